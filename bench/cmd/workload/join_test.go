package main

import (
	"slices"
	"strconv"
	"testing"
)

func TestCustomersAreSeededUpdatedAndDeleted(t *testing.T) {
	a, b := customers(1000, 3), customers(1000, 3)
	if !slices.EqualFunc(a, b, func(x, y tableRecord) bool { return x.key == y.key && string(x.value) == string(y.value) }) {
		t.Fatal("two tables of one seed differ")
	}
	// 1000 keys, 20 updates (every 50th), 10 tombstones (c7, c107, …).
	if len(a) != 1030 {
		t.Fatalf("%d records, want 1030", len(a))
	}
	tiers := tierOf(a)
	if len(tiers) != 990 {
		t.Fatalf("%d keys held, want 990", len(tiers))
	}
	if _, ok := tiers["c107"]; ok {
		t.Error("c107 was deleted but is held")
	}
	// The update of c50 is the last value of c50.
	if want := string(a[1000+1].value); `{"tier":"`+tiers["c50"]+`"}` != want {
		t.Errorf("c50 is %q, its last value %s", tiers["c50"], want)
	}
}

func TestOrdersAreSeededAndSomeMiss(t *testing.T) {
	o1, o2 := newOrders(1000, 0.05, 9), newOrders(1000, 0.05, 9)
	missing := 0
	for i := range 10000 {
		k1, v1 := o1.next(i, 42)
		k2, v2 := o2.next(i, 42)
		if k1 != k2 || string(v1) != string(v2) {
			t.Fatalf("order %d differs: %s %s, %s %s", i, k1, v1, k2, v2)
		}
		if k1[0] == 'x' {
			missing++
		}
		want := `{"id":` + strconv.Itoa(i) + `,"customer":"` + k1 + `","n":` + strconv.Itoa(amountOf(v1)) + `,"ts":42}`
		if string(v1) != want || amountOf(v1) < 1 || amountOf(v1) > 100 {
			t.Fatalf("order %d is %s, want %s with n in 1..100", i, v1, want)
		}
	}
	if missing < 400 || missing > 600 {
		t.Errorf("%d of 10000 orders miss the table, want about 500", missing)
	}
}
