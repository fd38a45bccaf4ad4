package operator

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/eoflow/pipeline/config"
)

// fuzzChains are compiled once; each input goes through all of them.
var fuzzChains = []struct {
	format config.Format
	steps  []config.Step
}{
	{"", paritySteps("")},
	{"", []config.Step{
		filterStep(`n > 0 || k != nil`),
		mapStep("a", "n", "s", "string(n)", "o", "$env", "ks", "keys($env)"),
		keyByStep("a"),
		aggStep("", val("c", config.AggCount, ""), val("f", config.AggFirst, "o"), val("l", config.AggLast, "s")),
	}},
	{"", []config.Step{
		keyByStep("k"),
		aggStep(config.EmitOnCheckpoint,
			val("sum", config.AggSum, "v"), val("min", config.AggMin, "v"), val("max", config.AggMax, "v"),
			val("avg", config.AggAvg, "v"), val("first", config.AggFirst, "v"), val("last", config.AggLast, "$env")),
	}},
	{"", []config.Step{filterStep("(x ?? true) == true")}},
	{"", nil},
	{config.FormatRaw, []config.Step{
		filterStep("len(value) >= 0"),
		keyByStep("value"),
		aggStep("", val("first", config.AggFirst, "value"), val("last", config.AggLast, "key"), val("n", config.AggSum, "len(value)")),
	}},
	{config.FormatRaw, []config.Step{mapStep("v", "value", "k", "key")}},
}

// FuzzRecordPipeline feeds arbitrary bytes through decode, compiled chains,
// aggregation, output encoding and a state encode/decode round trip. It
// checks that nothing panics, that every failure is a well-formed
// RecordError, that every output is valid JSON, and that a restored state
// gives the same output and the same encoding. The input is also fed to
// the state decoder directly.
func FuzzRecordPipeline(f *testing.F) {
	for _, s := range []string{
		`{"n": 1}`, `{"n": 10}`, `{"n": -3, "k": "a", "v": 1.5}`,
		`{"k":"x","v":9223372036854775807}`, `{"k":"x","v":-9223372036854775808}`, `{"k":1,"v":9007199254740993}`,
		`{"n":18446744073709551616}`, `{"n":1e308,"k":true,"v":1e308}`, `{"n":0.1,"k":2.5,"v":"s"}`,
		`{"n":{"a":[1,{"b":null}]},"k":[1],"v":{}}`, `{"k":"😀","v":"\ud800","n":"é"}`,
		"{\"k\":\"\xff\xfe\",\"n\":1}", `{"x":false}`, `{"x":null}`, `[1,2]`, `"str"`, `null`, ``, ` `, `{`, `{"a":}`,
		"\x00\x01", "\x01\x02\x05\x05count\x03\x01\x01\x03",
		`{"k":"m","v":112.99}`, `{"k":"m","v":1.5e-2,"n":0.1}`, `{"k":2,"v":1e300}`, `{"k":true,"v":5e-324}`,
		// States with decimals (sum, then min, of the fuzz chains' layouts).
		"\x01\x06\x03sum\x07\x01\x02\x03\x02\xc6\xb0\x01\x03min\x03\x01\x03\x00\x03max\x03\x01\x04\x00\x03avg\x06\x01\x05\x00\x01\x00\x00\x05first\x03\x01\x06\x00\x04last\x03\x01\x07\x00",
		"\x02\x01\x06\x03sum\x0f\x01\x02\x04\x01\x01\x09\x01\x00\x00\x00\x00\x00\x00\x00\x01\x03min\x03\x01\x03\x00\x03max\x03\x01\x04\x00\x03avg\x06\x01\x05\x00\x01\x00\x00\x05first\x03\x01\x06\x00\x04last\x03\x01\x07\x00",
	} {
		f.Add([]byte(s))
	}
	type compiled struct {
		chain  *Chain
		format config.Format
	}
	var chains []compiled
	for _, c := range fuzzChains {
		ch, err := Compile(c.steps)
		if err != nil {
			f.Fatal(err)
		}
		chains = append(chains, compiled{ch, c.format})
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for ci, c := range chains {
			r := &Record{Key: data[:len(data)/2], Value: data, Format: c.format, Topic: "t"}
			keep, rerr := c.chain.Process(r)
			if rerr != nil {
				checkRecordError(t, ci, rerr)
				continue
			}
			if !bytes.Equal(r.Value, data) {
				t.Fatalf("chain %d: Value modified", ci)
			}
			if !keep {
				continue
			}
			out, rerr := r.AppendValue(nil, config.FormatJSON)
			if rerr != nil {
				t.Fatalf("chain %d: AppendValue after Process: %v", ci, rerr)
			}
			if !json.Valid(out) {
				t.Fatalf("chain %d: invalid JSON output %q", ci, out)
			}
			raw, _ := r.AppendValue(nil, config.FormatRaw)
			if !r.Changed() && !bytes.Equal(raw, data) {
				t.Fatalf("chain %d: raw output of an unchanged record differs", ci)
			}
			agg := c.chain.Aggregator()
			if agg == nil {
				continue
			}
			st := agg.NewState()
			for range 2 {
				before, _ := st.MarshalBinary()
				if _, rerr := agg.Add(st, r); rerr != nil {
					checkRecordError(t, ci, rerr)
					if after, _ := st.MarshalBinary(); !bytes.Equal(before, after) {
						t.Fatalf("chain %d: failed Add changed the state", ci)
					}
				}
			}
			outA := st.Output(r.GroupKey)
			if !json.Valid(outA) {
				t.Fatalf("chain %d: invalid aggregate output %q", ci, outA)
			}
			enc, err := st.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			back, err := agg.DecodeState(enc)
			if err != nil {
				t.Fatalf("chain %d: DecodeState(MarshalBinary()) = %v", ci, err)
			}
			if outB := back.Output(r.GroupKey); !bytes.Equal(outA, outB) {
				t.Fatalf("chain %d: restored output %s, want %s", ci, outB, outA)
			}
			if enc2, _ := back.MarshalBinary(); !bytes.Equal(enc, enc2) {
				t.Fatalf("chain %d: re-encoding differs", ci)
			}
			// Arbitrary bytes as a state: an error or a state that
			// re-encodes stably, never a panic.
			if junk, err := agg.DecodeState(data); err == nil {
				e1, _ := junk.MarshalBinary()
				again, err := agg.DecodeState(e1)
				if err != nil {
					t.Fatalf("chain %d: re-decoding a decoded state: %v", ci, err)
				}
				if e2, _ := again.MarshalBinary(); !bytes.Equal(e1, e2) {
					t.Fatalf("chain %d: state encoding not stable", ci)
				}
				if !json.Valid(junk.Output("k")) {
					t.Fatalf("chain %d: invalid output of a decoded state", ci)
				}
			}
		}
	})
}

func checkRecordError(t *testing.T, chain int, e *RecordError) {
	t.Helper()
	if !slices.Contains(Codes(), e.Code) || e.Step == "" || e.Reason == "" || strings.Contains(e.Reason, "\n") {
		t.Fatalf("chain %d: malformed RecordError %#v", chain, e)
	}
}
