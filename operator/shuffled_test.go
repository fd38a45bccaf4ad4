package operator

import (
	"testing"

	"github.com/eoflow/pipeline/config"
)

// shuffleThrough is r as the keyed side of group mode sees it: its
// aggregate's values evaluated by c (the source side's chain, which ran
// the steps) and encoded, in a Record of their own.
func shuffleThrough(t *testing.T, c *Chain, v string) (*Record, *RecordError) {
	t.Helper()
	r := jsonRecord(v)
	keep, rerr := c.Process(r)
	if rerr != nil || !keep {
		t.Fatalf("steps on %s: keep %v, %v", v, keep, rerr)
	}
	enc, rerr := c.Aggregator().Clone().AppendInputs(nil, r)
	if rerr != nil {
		return nil, rerr
	}
	out := &Record{Timestamp: r.Timestamp}
	out.SetShuffled(r.GroupKey, r.GroupKeyKind(), enc)
	return out, nil
}

// TestShuffledInputsAddAsEvaluated: an aggregate adds the values the
// source side evaluated exactly as it adds them evaluating itself: every
// function, every kind of value (integers, floats that look integral, -0,
// decimals, strings, objects, null), keys of every JSON kind, and the
// same error, at the same path, for a value it refuses.
func TestShuffledInputsAddAsEvaluated(t *testing.T) {
	steps := []config.Step{
		keyByStep("k"),
		aggStep(config.EmitEveryRecord,
			val("n", config.AggCount, ""), val("s", config.AggSum, "x"), val("lo", config.AggMin, "x"),
			val("hi", config.AggMax, "x"), val("m", config.AggAvg, "x"), val("f", config.AggFirst, "o"), val("l", config.AggLast, "o")),
	}
	inputs := []string{
		`{"k":"a","x":1,"o":{"b":[1,2.0,-0.0],"a":null}}`,
		`{"k":"a","x":100.0,"o":"text"}`,
		`{"k":"a","x":-0.0,"o":null}`,
		`{"k":"a","x":9007199254740993,"o":true}`,
		`{"k":3,"x":2.5,"o":1.25}`,
		`{"k":true,"x":1e300,"o":[]}`,
		`{"k":"a","x":"not a number","o":1}`,
		`{"k":"a","x":9223372036854775807,"o":1}`,
		`{"k":"a","x":9223372036854775807,"o":1}`,
	}
	direct, shuffled := mustCompile(t, steps...), mustCompile(t, steps...)
	agg := direct.Aggregator()
	want, got := map[string]*AggregateState{}, map[string]*AggregateState{}
	for _, v := range inputs {
		r := jsonRecord(v)
		if _, rerr := direct.Process(r); rerr != nil {
			t.Fatal(rerr)
		}
		if want[r.GroupKey] == nil {
			want[r.GroupKey], got[r.GroupKey] = agg.NewState(), agg.NewState()
		}
		_, werr := agg.Add(want[r.GroupKey], r)
		s, gerr := shuffleThrough(t, shuffled, v)
		if gerr == nil {
			_, gerr = agg.Add(got[r.GroupKey], s)
		}
		if (werr == nil) != (gerr == nil) || werr != nil && (werr.Step != gerr.Step || werr.Code != gerr.Code || werr.Reason != gerr.Reason) {
			t.Fatalf("%s: evaluating gives %v, the shuffled values %v", v, werr, gerr)
		}
		if w, g := string(want[r.GroupKey].Output(r.GroupKey)), string(got[r.GroupKey].Output(r.GroupKey)); w != g {
			t.Fatalf("%s: evaluating gives %s, the shuffled values %s", v, w, g)
		}
	}
}

// TestShuffledInputsTakeTheIntegerPath: on the reference job's shape the
// keyed side folds shuffled integers by the integer path, to the state
// the general path reaches.
func TestShuffledInputsTakeTheIntegerPath(t *testing.T) {
	steps := []config.Step{keyByStep("k"), aggStep(config.EmitEveryRecord, val("n", config.AggCount, ""), val("s", config.AggSum, "x"), val("l", config.AggLast, "x"))}
	c := mustCompile(t, steps...)
	agg := c.Aggregator()
	ints, st := agg.NewIntState(), agg.NewState()
	ints.Reset()
	general := mustCompile(t, keyByStep("k+''"), steps[1]) // not the integer path's shape
	ref := general.Aggregator().NewState()
	for _, v := range []string{`{"k":"a","x":5}`, `{"k":"a","x":-7}`, `{"k":"a","x":40}`} {
		s, rerr := shuffleThrough(t, c, v)
		if rerr != nil {
			t.Fatal(rerr)
		}
		r := jsonRecord(v)
		if _, rerr := general.Process(r); rerr != nil {
			t.Fatal(rerr)
		}
		if _, rerr := general.Aggregator().Add(ref, r); rerr != nil {
			t.Fatal(rerr)
		}
		if _, ok := agg.AddInts(ints, s); !ok {
			t.Fatalf("%s: the integer path declined shuffled integers", v)
		}
		if _, rerr := agg.Add(st, s); rerr != nil {
			t.Fatal(rerr)
		}
	}
	if g, w, e := string(ints.AppendOutput(nil, "a")), string(st.Output("a")), string(ref.Output("a")); g != w || w != e {
		t.Fatalf("integer path %s, shuffled values added %s, evaluated %s", g, w, e)
	}
	// A float is not for the integer path: it declines, and Add takes it.
	s, _ := shuffleThrough(t, c, `{"k":"a","x":1.5}`)
	if _, ok := agg.AddInts(ints, s); ok {
		t.Fatal("the integer path took a float")
	}
}

// TestShuffledInputsMalformed: values that are not what AppendInputs
// writes fail Add with a decode error, and change nothing.
func TestShuffledInputsMalformed(t *testing.T) {
	c := mustCompile(t, keyByStep("k"), aggStep(config.EmitEveryRecord, val("n", config.AggCount, ""), val("s", config.AggSum, "x")))
	agg := c.Aggregator()
	for _, enc := range [][]byte{
		{},                   // no values
		{inAbsent},           // one of two
		{inInt, 2, inAbsent}, // count() must be absent, sum present
		{inAbsent, inInt},    // truncated varint
		{inAbsent, inFloat, 1, 2},
		{inAbsent, inString, 5, 'a'},
		{inAbsent, inDecimal, 1, 'x'},
		{inAbsent, inJSON, 2, '{', '{'},
		{inAbsent, 99},
		{inAbsent, inInt, 2, 0}, // a byte after the last value
	} {
		st := agg.NewState()
		r := &Record{}
		r.SetShuffled("a", 0, enc)
		_, rerr := agg.Add(st, r)
		if rerr == nil || rerr.Code != CodeDecode {
			t.Fatalf("%v: got %v, want a decode error", enc, rerr)
		}
		if string(st.Output("a")) != string(agg.NewState().Output("a")) {
			t.Fatalf("%v: the state changed: %s", enc, st.Output("a"))
		}
		if _, ok := agg.AddInts(agg.NewIntState(), r); ok {
			t.Fatalf("%v: the integer path took it", enc)
		}
	}
}

// FuzzShuffledInputs: whatever the bytes, Add decodes them or fails with
// a decode error (or the error the values themselves earn), never a panic.
func FuzzShuffledInputs(f *testing.F) {
	c := mustCompile(f, keyByStep("k"), aggStep(config.EmitEveryRecord,
		val("n", config.AggCount, ""), val("s", config.AggSum, "x"), val("l", config.AggLast, "o")))
	agg := c.Aggregator()
	for _, v := range []string{`{"k":"a","x":1,"o":{"a":[1.5,null]}}`, `{"k":"a","x":2.25,"o":"s"}`} {
		r := jsonRecord(v)
		if _, rerr := c.Process(r); rerr != nil {
			f.Fatal(rerr)
		}
		enc, rerr := agg.Clone().AppendInputs(nil, r)
		if rerr != nil {
			f.Fatal(rerr)
		}
		f.Add(enc)
	}
	f.Fuzz(func(t *testing.T, enc []byte) {
		r := &Record{}
		r.SetShuffled("a", 0, enc)
		agg.AddInts(agg.NewIntState(), r)
		_, rerr := agg.Add(agg.NewState(), r)
		if rerr != nil && rerr.Code != CodeDecode && rerr.Code != CodeType && rerr.Code != CodeOverflow {
			t.Fatalf("%v: %v", enc, rerr)
		}
	})
}
