package operator

import (
	"fmt"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/eoflow/pipeline/config"
)

// BenchmarkTableApply is the cost of reading a table's topic to its end:
// one JSON value per key applied (the CPU side of a restore; the fetches
// are the broker's). It reports the heap the table holds per key.
func BenchmarkTableApply(b *testing.B) {
	const keys = 1 << 20
	recs := make([][2][]byte, keys)
	for i := range recs {
		recs[i] = [2][]byte{fmt.Appendf(nil, "customer-%07d", i), fmt.Appendf(nil, `{"tier":"%s","region":"eu-%d","since":%d}`, []string{"gold", "silver", "bronze"}[i%3], i%7, 1700000000+i)}
	}
	b.ResetTimer()
	cpu0 := cpuTime()
	var t *Table
	for range b.N {
		t = NewTable(config.Table{ID: "customers", Format: config.FormatJSON, KeyFormat: config.FormatRaw})
		for _, r := range recs {
			t.Apply(r[0], r[1])
		}
	}
	b.StopTimer()
	// CPU time (the garbage collector's included), not wall time: on a
	// shared machine the wall clock says more about the neighbours.
	b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(b.N*keys), "cpu-ns/key")
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	t = NewTable(config.Table{ID: "customers", Format: config.FormatJSON, KeyFormat: config.FormatRaw})
	for _, r := range recs {
		t.Apply(r[0], r[1])
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/keys, "heap-B/key")
	b.ReportMetric(float64(t.Bytes())/keys, "topic-B/key")
	runtime.KeepAlive(t)
}

// BenchmarkTableLookup is a join's lookup, from every core at once.
func BenchmarkTableLookup(b *testing.B) {
	const keys = 1 << 16
	t := NewTable(config.Table{ID: "customers", Format: config.FormatJSON, KeyFormat: config.FormatRaw})
	names := make([]string, keys)
	for i := range names {
		names[i] = fmt.Sprintf("customer-%07d", i)
		t.Apply([]byte(names[i]), []byte(`{"tier":"gold"}`))
	}
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			if _, ok := t.Lookup(names[i&(keys-1)]); !ok {
				b.Fatal("missing")
			}
			i += 7
		}
	})
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
