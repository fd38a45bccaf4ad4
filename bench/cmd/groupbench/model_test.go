package main

import (
	"strings"
	"testing"
)

func TestPinnedCPUSpreadsProcessesOverTheCPUs(t *testing.T) {
	for _, c := range []struct {
		id   string
		ncpu int
		want int
	}{{"p0", 2, 0}, {"p1", 2, 1}, {"p2", 2, 0}, {"a", 2, 0}, {"b", 2, 1}, {"c", 2, 0}, {"p3", 4, 3}, {"p1", 0, 0}} {
		if got := pinnedCPU(c.id, c.ncpu); got != c.want {
			t.Errorf("pinnedCPU(%q, %d) = %d, want %d", c.id, c.ncpu, got, c.want)
		}
	}
}

// The prediction is nproc over the CPU per record; the ratio says how
// far the measurement is from it.
func TestModelTablePredictsFromCPUPerRecord(t *testing.T) {
	md := modelTable(2, []modelRow{{name: "single", procs: 1, pipelineUs: 1.5, brokerUs: 0.5, measured: 800_000}})
	if !strings.Contains(md, "| single | 1 | 1.50 | 0.50 | 1000000 | 800000 | 0.80 |") {
		t.Fatalf("model table:\n%s", md)
	}
	if median([]float64{3, 1, 2}) != 2 || median(nil) != 0 {
		t.Fatal("median")
	}
}
