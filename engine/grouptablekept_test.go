package engine

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// Two members of a job with a broadcast table, on the broker: when b
// joins, a keeps its table across the rebalance (its next generation
// follows at once) and reads it on from where it stood instead of from
// the start (tablekept.go); b reads it whole. The sums go on exactly,
// with the update the table took before the rebalance.
func TestGroupModeKeepsTablesAcrossRebalance(t *testing.T) {
	e := newBrokerTableEnv(t)
	group := e.config(func(s string) string {
		return strings.Replace(s, "mode: ${SCALE_MODE:-single}", "mode: group\n  partitions: 2", 1)
	})
	e.write("customers", "c1\t{\"tier\":\"gold\"}", "c2\t{\"tier\":\"silver\"}")
	a := startWith(t, group, WithInstanceID("a"))
	e.write("orders", `{"id":1,"customer":"c1","n":1}`, `{"id":2,"customer":"c2","n":2}`)
	await := func(want map[string]string, logs func() string) {
		t.Helper()
		deadline := time.Now().Add(time.Minute)
		for got := e.lastPerKey("totals-by-tier"); fmt.Sprint(got) != fmt.Sprint(want); got = e.lastPerKey("totals-by-tier") {
			if time.Now().After(deadline) {
				t.Fatalf("outputs %v, want %v\n%s", got, want, logs())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	e.awaitCheckpoint(group.Name)
	await(map[string]string{
		"gold":   `{"key":"gold","count":1,"sum":1}`,
		"silver": `{"key":"silver","count":1,"sum":2}`,
	}, a.logs.String)
	e.write("customers", "c2\t{\"tier\":\"gold\"}")
	e.awaitCheckpoint(group.Name)
	b := startWith(t, group, WithInstanceID("b"))
	const kept = "table kept from the last generation and read on to its end"
	for deadline := time.Now().Add(time.Minute); !strings.Contains(a.logs.String(), kept); {
		if time.Now().After(deadline) {
			t.Fatalf("a did not log %q:\n%s", kept, a.logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	// It kept both keys: the table's whole state, c2's update included.
	for _, l := range strings.Split(a.logs.String(), "\n") {
		if strings.Contains(l, kept) && !strings.Contains(l, "kept_keys=2 ") {
			t.Errorf("a kept other than the table's 2 keys: %s", l)
		}
	}
	e.write("orders", `{"id":3,"customer":"c2","n":4}`, `{"id":4,"customer":"c1","n":8}`)
	await(map[string]string{
		"gold":   `{"key":"gold","count":3,"sum":13}`,
		"silver": `{"key":"silver","count":1,"sum":2}`,
	}, func() string { return a.logs.String() + b.logs.String() })
	for _, r := range []*running{a, b} {
		if err := r.stop(); err != nil {
			t.Fatal(err)
		}
	}
	if strings.Contains(b.logs.String(), kept) && !strings.Contains(b.logs.String(), "table read to its end") {
		t.Errorf("b kept a table it never read:\n%s", b.logs.String())
	}
}
