package fault

import (
	"errors"
	"testing"
)

func TestNilInjectorNeverFails(t *testing.T) {
	var i *Injector
	for _, p := range Points {
		if err := i.Hit(p); err != nil {
			t.Fatalf("nil injector failed at %s", p)
		}
	}
}

func TestFailsOnTheArmedHitOnly(t *testing.T) {
	i := New(map[Point]int{BeforeCommit: 3})
	for hit := 1; hit <= 5; hit++ {
		err := i.Hit(BeforeCommit)
		if (hit == 3) != errors.Is(err, ErrInjected) {
			t.Fatalf("hit %d: %v", hit, err)
		}
		if err := i.Hit(AfterCommit); err != nil {
			t.Fatalf("unarmed point failed: %v", err)
		}
	}
}

func TestParse(t *testing.T) {
	got, err := Parse("before-commit@3, during-restore")
	if err != nil || got[BeforeCommit] != 3 || got[DuringRestore] != 1 || len(got) != 2 {
		t.Fatalf("Parse = %v, %v", got, err)
	}
	for _, bad := range []string{"nowhere@1", "before-commit@0", "before-commit@x"} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) accepted", bad)
		}
	}
}
