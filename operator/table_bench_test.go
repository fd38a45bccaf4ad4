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
// are the broker's). It reports the memory the table holds per key: on
// the Go heap (what the collector's headroom doubles in resident memory),
// outside it (mapped by the store), and the two together.
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
	t = nil
	runtime.GC()
	runtime.ReadMemStats(&before)
	t = NewTable(config.Table{ID: "customers", Format: config.FormatJSON, KeyFormat: config.FormatRaw})
	for _, r := range recs {
		t.Apply(r[0], r[1])
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	heap := float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / keys
	off := float64(t.store.offHeap()) / keys
	b.ReportMetric(heap, "heap-B/key")
	b.ReportMetric(off, "offheap-B/key")
	b.ReportMetric(heap+off, "mem-B/key")
	b.ReportMetric(float64(t.Bytes())/keys, "topic-B/key")
	runtime.KeepAlive(t)
	runtime.KeepAlive(recs)
}

// BenchmarkTableLookup is a join's lookup, from every core at once: the
// key found and its value decoded, with a decoder per goroutine as each
// chain has.
func BenchmarkTableLookup(b *testing.B) {
	const keys = 1 << 16
	t := NewTable(config.Table{ID: "customers", Format: config.FormatJSON, KeyFormat: config.FormatRaw})
	names := make([]string, keys)
	for i := range names {
		names[i] = fmt.Sprintf("customer-%07d", i)
		t.Apply([]byte(names[i]), []byte(`{"tier":"gold"}`))
	}
	b.ResetTimer()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		var dec decoder
		i := 0
		for pb.Next() {
			if _, ok, _ := t.lookup(&dec, names[i&(keys-1)]); !ok {
				b.Fatal("missing")
			}
			i += 7
		}
	})
}

// BenchmarkJoinEnrich is a join step's cost per record, in the chain of
// bench/jobs/join-enrich.yaml: an order decoded, looked up by customer in
// a table of 100,000 (5% miss), mapped with the customer's tier, and
// encoded; what the table's lookup costs shows against the rest.
func BenchmarkJoinEnrich(b *testing.B) {
	const job = `name: job
kafka:
  brokers: [localhost:9092]
sources:
  - id: orders
    topics: [orders]
tables:
  - {id: customers, topic: customers}
steps:
  - id: enrich
    join: {table: customers, key: customer, as: c, how: left}
  - id: out
    map: {id: id, customer: customer, n: n, tier: 'c == nil ? "none" : c.tier'}
sinks:
  - topic: out
`
	cfg, err := config.Parse("job.yaml", []byte(job), func(string) (string, bool) { return "", false })
	if err != nil {
		b.Fatal(err)
	}
	g, err := CompileGraph(cfg)
	if err != nil {
		b.Fatal(err)
	}
	const keys = 100000
	t := NewTable(config.Table{ID: "customers", Format: config.FormatJSON, KeyFormat: config.FormatRaw})
	for i := range keys {
		t.Apply(fmt.Appendf(nil, "customer-%07d", i), fmt.Appendf(nil, `{"tier":"%s"}`, []string{"gold", "silver", "bronze", "platinum"}[i%4]))
	}
	if err := g.BindTables(map[string]*Table{"customers": t}, nil); err != nil {
		b.Fatal(err)
	}
	c := g.NewBranches().Linear()
	orders := make([][]byte, 1<<14)
	for i := range orders {
		orders[i] = fmt.Appendf(nil, `{"id":%d,"customer":"customer-%07d","n":%d,"ts":%d}`, i, (i*7919)%(keys*105/100), i%100, 1700000000000+i)
	}
	var r Record
	var out []byte
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		r.Reset()
		r.Value = orders[i%len(orders)]
		i++
		if keep, err := c.Process(&r); !keep || err != nil {
			b.Fatalf("%s: keep %v, %v", r.Value, keep, err)
		}
		var aerr *RecordError
		if out, aerr = r.AppendValue(out[:0], config.FormatJSON); aerr != nil {
			b.Fatal(aerr)
		}
		c.Recycle(&r)
	}
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
