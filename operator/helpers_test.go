package operator

import (
	"testing"
	"time"

	"github.com/eoflow/pipeline/config"
)

func filterStep(src string) config.Step { return config.Step{Filter: src} }
func keyByStep(src string) config.Step  { return config.Step{KeyBy: src} }

// mapStep takes name, expression pairs.
func mapStep(pairs ...string) config.Step {
	fs := []config.Field{}
	for i := 0; i+1 < len(pairs); i += 2 {
		fs = append(fs, config.Field{Name: pairs[i], Expr: pairs[i+1]})
	}
	return config.Step{Map: fs}
}

func aggStep(emit config.EmitMode, vals ...config.AggregateValue) config.Step {
	return config.Step{Aggregate: &config.Aggregate{Emit: emit, Values: vals}}
}

func val(name string, fn config.AggregateFunc, arg string) config.AggregateValue {
	return config.AggregateValue{Name: name, Func: fn, Arg: arg}
}

func mustCompile(t testing.TB, steps ...config.Step) *Chain {
	t.Helper()
	c, err := Compile(steps)
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	return c
}

var testTime = time.Date(2025, 3, 1, 12, 0, 0, 5, time.FixedZone("X", 3600))

func jsonRecord(v string) *Record {
	return &Record{Key: []byte("k1"), Value: []byte(v), Timestamp: testTime, Topic: "numbers", Partition: 3, Offset: 42}
}
