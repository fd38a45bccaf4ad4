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

// Hits counts every pass, armed or not; Armed shrinks as points fail, and
// Disarm hands back what never fired, after which nothing fails.
func TestHitsArmedAndDisarm(t *testing.T) {
	i := New(map[Point]int{BeforeCommit: 1, AfterCommit: 4})
	_ = i.Hit(BeforeCommit)
	_ = i.Hit(AfterCommit)
	_ = i.Hit(AfterBarrier)
	if h := i.Hits(); h[BeforeCommit] != 1 || h[AfterCommit] != 1 || h[AfterBarrier] != 1 || len(h) != 3 {
		t.Fatalf("Hits = %v", h)
	}
	if a := i.Armed(); len(a) != 1 || a[AfterCommit] != 3 {
		t.Fatalf("Armed = %v, want after-commit with 3 hits left", a)
	}
	if left := i.Disarm(); len(left) != 1 || left[AfterCommit] != 3 {
		t.Fatalf("Disarm = %v", left)
	}
	for range 5 {
		if err := i.Hit(AfterCommit); err != nil {
			t.Fatalf("a disarmed point failed: %v", err)
		}
	}
	if a := i.Armed(); len(a) != 0 {
		t.Fatalf("Armed after Disarm = %v", a)
	}
	if h := i.Hits(); h[AfterCommit] != 6 {
		t.Fatalf("after-commit hits = %d, want 6", h[AfterCommit])
	}
}
