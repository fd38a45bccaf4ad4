package engine

import (
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/eoflow/pipeline/operator/keyed"
	"github.com/eoflow/pipeline/state"
	"github.com/eoflow/pipeline/window"
)

// graphHotPath is every target's operator of a job (all key groups) and
// its router, for benchmarks of job graphs.
func graphHotPath(tb testing.TB, path string) (*router, workerOps) {
	tb.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	cfg := parseConfig(tb, data, nil)
	p, err := compile(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	groups := cfg.Checkpoint.KeyGroups
	var ops workerOps
	for i, t := range p.targets {
		op, err := keyed.NewAggregate(p.env(time.Now), t.sinks, t.agg, groups, state.RangeFor(0, 1, groups), false)
		if err != nil {
			tb.Fatal(err)
		}
		ops = append(ops, newTargetOp(op, i, cfg.Name))
	}
	return p.newRouter(1), ops
}

func benchJobHotPath(b *testing.B, path string) {
	const keys, batchLen = 100_000, 500
	r, ops := graphHotPath(b, path)
	inputs := benchInputs(keys)
	for k := range keys {
		in := benchInput("k"+strconv.Itoa(k), 1, 1764688090000)
		msgs, _ := r.route1(in)
		for _, m := range msgs {
			ops.process(m)
		}
	}
	ops.snapshot(window.NoWatermark)
	b.ReportAllocs()
	batch := make([]message, 0, batchLen)
	i := 0
	var returns slabReturns
	for b.Loop() {
		msgs, _ := r.route1(inputs[i%len(inputs)])
		batch = append(batch, msgs...)
		i++
		if len(batch) >= batchLen {
			ops.prefetch(batch)
			for _, m := range batch {
				ops.process(m)
				if m.slab != nil {
					returns.add(m.slab)
				}
			}
			returns.flush()
			batch = batch[:0]
		}
		if i%100_000 == 0 {
			ops.snapshot(window.NoWatermark)
		}
	}
}

func BenchmarkJobKeyedSum(b *testing.B)  { benchJobHotPath(b, "../bench/jobs/keyed-sum.yaml") }
func BenchmarkJobKeyedSumB(b *testing.B) { benchJobHotPath(b, "../bench/jobs/keyed-sum-b.yaml") }
func BenchmarkJobTwoSums(b *testing.B)   { benchJobHotPath(b, "../bench/jobs/two-sums.yaml") }
