package engine

import (
	"os"
	"testing"
)

func benchRoute(b *testing.B, path string) {
	data, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	cfg := parseConfig(b, data, nil)
	p, err := compile(cfg)
	if err != nil {
		b.Fatal(err)
	}
	r := p.newRouter(2)
	inputs := benchInputs(100_000)
	out := make([][]message, 2)
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		out[0], out[1] = out[0][:0], out[1][:0]
		r.route(inputs[i%len(inputs)], out)
		for _, msgs := range out {
			for _, m := range msgs {
				if m.op != nil {
					p.recycle(m.op)
				}
			}
		}
		i++
	}
}

func BenchmarkRouteKeyedSum(b *testing.B)  { benchRoute(b, "../bench/jobs/keyed-sum.yaml") }
func BenchmarkRouteKeyedSumB(b *testing.B) { benchRoute(b, "../bench/jobs/keyed-sum-b.yaml") }
func BenchmarkRouteTwoSums(b *testing.B)   { benchRoute(b, "../bench/jobs/two-sums.yaml") }
