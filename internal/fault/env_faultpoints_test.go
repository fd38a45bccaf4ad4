//go:build faultpoints

package fault

import "testing"

func TestFromEnv(t *testing.T) {
	t.Setenv(EnvVar, "")
	if i, err := FromEnv(); i != nil || err != nil {
		t.Fatalf("unset: %v, %v", i, err)
	}
	t.Setenv(EnvVar, "after-barrier@2")
	i, err := FromEnv()
	if err != nil || !i.kill || i.armed[AfterBarrier] != 2 {
		t.Fatalf("FromEnv = %+v, %v", i, err)
	}
	t.Setenv(EnvVar, "bogus")
	if _, err := FromEnv(); err == nil {
		t.Fatal("a bad spec must be refused")
	}
}
