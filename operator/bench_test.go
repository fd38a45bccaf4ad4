package operator

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/eoflow/pipeline/config"
)

// benchValues are ~100-byte JSON records, the shape of a typical event: a
// unique id (too long for the string cache), a repeated short value, ints, a
// float and a bool.
var benchValues = func() [][]byte {
	var vs [][]byte
	for i := range 64 {
		vs = append(vs, fmt.Appendf(nil, `{"n":%d,"user":"u-%018d","amount":%d.25,"country":"DE","ts":1735689600123,"ok":true}`, i*7919, i*104729, i*13))
	}
	return vs
}()

// BenchmarkRecordHotPath is the per-record cost on the keyed path of the
// reference job: decode + key_by + aggregate (count, sum) + output
// encoding, with a state per group key reused as the runtime does.
func BenchmarkRecordHotPath(b *testing.B) {
	c := mustCompile(b, paritySteps("")...)
	agg := c.Aggregator()
	states := map[string]*AggregateState{}
	var r Record
	var out []byte
	b.SetBytes(int64(len(benchValues[0])))
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		r.Reset()
		r.Value = benchValues[i%len(benchValues)]
		i++
		if keep, err := c.Process(&r); !keep || err != nil {
			b.Fatal(err)
		}
		st := states[r.GroupKey]
		if st == nil {
			st = agg.NewState()
			states[r.GroupKey] = st
		}
		if _, err := agg.Add(st, &r); err != nil {
			b.Fatal(err)
		}
		out = st.AppendOutput(out[:0], r.GroupKey)
	}
	_ = out
}

// BenchmarkStages splits the hot path so a regression points at its stage.
func BenchmarkStages(b *testing.B) {
	b.Run("decode", func(b *testing.B) {
		var d decoder
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if _, err := d.decodeObject(benchValues[i%len(benchValues)]); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
	b.Run("decode-encoding-json-usenumber", func(b *testing.B) {
		// The baseline the custom decoder replaces.
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			var m map[string]any
			d := json.NewDecoder(bytes.NewReader(benchValues[i%len(benchValues)]))
			d.UseNumber()
			if err := d.Decode(&m); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
	b.Run("filter+map+key_by", func(b *testing.B) {
		c := mustCompile(b, filterStep("amount > 1"), mapStep("user", "user", "cents", "amount * 100"), keyByStep("user"))
		var r Record
		var out []byte
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			r.Reset()
			r.Value = benchValues[i%len(benchValues)]
			i++
			if _, err := c.Process(&r); err != nil {
				b.Fatal(err)
			}
			out, _ = r.AppendValue(out[:0], config.FormatJSON)
		}
	})
	b.Run("decimal-aggregate", func(b *testing.B) {
		// The fractional amounts (N.25) of benchValues through every
		// numeric function: the decimal path.
		c := mustCompile(b, keyByStep("country"), aggStep("",
			val("sum", config.AggSum, "amount"), val("min", config.AggMin, "amount"),
			val("max", config.AggMax, "amount"), val("avg", config.AggAvg, "amount")))
		agg := c.Aggregator()
		st := agg.NewState()
		var r Record
		var out []byte
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			r.Reset()
			r.Value = benchValues[i%len(benchValues)]
			i++
			if _, err := c.Process(&r); err != nil {
				b.Fatal(err)
			}
			if _, err := agg.Add(st, &r); err != nil {
				b.Fatal(err)
			}
			out = st.AppendOutput(out[:0], r.GroupKey)
		}
	})
	b.Run("state-encode", func(b *testing.B) {
		c := mustCompile(b, paritySteps("")...)
		st := c.Aggregator().NewState()
		r := jsonRecord(`{"n":12345}`)
		c.Process(r)
		c.Aggregator().Add(st, r)
		var enc []byte
		b.ReportAllocs()
		for b.Loop() {
			enc, _ = st.AppendBinary(enc[:0])
		}
	})
	b.Run("state-decode", func(b *testing.B) {
		c := mustCompile(b, paritySteps("")...)
		st := c.Aggregator().NewState()
		r := jsonRecord(`{"n":12345}`)
		c.Process(r)
		c.Aggregator().Add(st, r)
		enc, _ := st.MarshalBinary()
		b.ReportAllocs()
		for b.Loop() {
			if _, err := c.Aggregator().DecodeState(enc); err != nil {
				b.Fatal(err)
			}
		}
	})
}
