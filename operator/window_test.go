package operator

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/eoflow/pipeline/config"
)

func allFuncValues() []config.AggregateValue {
	return []config.AggregateValue{
		val("n", config.AggCount, ""), val("s", config.AggSum, "x"), val("lo", config.AggMin, "x"),
		val("hi", config.AggMax, "x"), val("mean", config.AggAvg, "x"), val("f", config.AggFirst, "x"), val("l", config.AggLast, "x"),
	}
}

func windowChain(t testing.TB, vals ...config.AggregateValue) *Chain {
	t.Helper()
	return mustCompile(t, keyByStep("k"), config.Step{Window: &config.Window{Tumbling: 10e9, Values: vals}})
}

// Merging the states of consecutive runs of records gives the state of all
// of them, for every function and any cut, integer and decimal inputs.
func TestMergeStatesEqualsOneState(t *testing.T) {
	c := windowChain(t, allFuncValues()...)
	agg := c.Aggregator()
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 300 {
		n := 1 + rng.IntN(12)
		var xs []string
		for range n {
			if rng.IntN(4) == 0 {
				xs = append(xs, fmt.Sprintf("%d.%d", rng.IntN(200)-100, rng.IntN(10)))
			} else {
				xs = append(xs, fmt.Sprint(rng.IntN(2000)-1000))
			}
		}
		add := func(st *AggregateState, x string) {
			r := jsonRecord(`{"k":"a","x":` + x + `}`)
			if keep, err := c.Process(r); !keep || err != nil {
				t.Fatalf("process: %v", err)
			}
			if _, err := agg.Add(st, r); err != nil {
				t.Fatalf("add %s: %v", x, err)
			}
		}
		whole := agg.NewState()
		for _, x := range xs {
			add(whole, x)
		}
		var parts []*AggregateState
		for i := 0; i < n; {
			j := i + 1 + rng.IntN(n-i)
			st := agg.NewState()
			for _, x := range xs[i:j] {
				add(st, x)
			}
			parts = append(parts, st)
			i = j
		}
		merged, err := agg.MergeStates(parts...)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := string(merged.Output("a")), string(whole.Output("a")); got != want {
			t.Fatalf("round %d, inputs %v in %d parts:\n merged %s\n  whole %s", round, xs, len(parts), got, want)
		}
	}
}

func TestMergeStatesOverflow(t *testing.T) {
	c := windowChain(t, val("s", config.AggSum, "x"))
	agg := c.Aggregator()
	a, b := agg.NewState(), agg.NewState()
	for _, st := range []*AggregateState{a, b} {
		r := jsonRecord(`{"k":"a","x":9223372036854775000}`)
		c.Process(r)
		if _, err := agg.Add(st, r); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := agg.MergeStates(a, b); err == nil || err.Code != CodeOverflow || !strings.Contains(err.Step, "values.s") {
		t.Fatalf("merge of two near-max sums: %v, want an overflow naming the value", err)
	}
}

func TestWindowStateRoundTripAndOutput(t *testing.T) {
	c := windowChain(t, val("count", config.AggCount, ""), val("sum", config.AggSum, "x"))
	agg := c.Aggregator()
	st := agg.NewState()
	r := jsonRecord(`{"k":"even","x":4}`)
	c.Process(r)
	agg.Add(st, r)
	ws := &WindowState{Windows: []OpenWindow{{Start: 0, End: 10_000, State: st}, {Start: 10_000, End: 20_500, State: agg.NewState()}}}
	enc, err := agg.AppendWindowState(nil, ws)
	if err != nil {
		t.Fatal(err)
	}
	back, err := agg.DecodeWindowState(enc)
	if err != nil {
		t.Fatal(err)
	}
	if len(back.Windows) != 2 || back.Windows[1].End != 20_500 {
		t.Fatalf("round trip: %+v", back.Windows)
	}
	got := string(back.Windows[0].State.AppendWindowOutput(nil, "even", 0, 10_000))
	want := `{"key":"even","window_start":"1970-01-01T00:00:00Z","window_end":"1970-01-01T00:00:10Z","count":1,"sum":4}`
	if got != want {
		t.Fatalf("output\n got %s\nwant %s", got, want)
	}
	if got := string(AppendTime(nil, 1_764_000_000_250)); got != "2025-11-24T16:00:00.25Z" {
		t.Errorf("AppendTime: %s", got)
	}
	// Every int64 prints as something that parses back: RFC 3339 within
	// the years 0000 to 9999, epoch milliseconds beyond.
	for _, c := range []struct {
		ms   int64
		want string
	}{
		{-62_167_219_200_000, "0000-01-01T00:00:00Z"},
		{253_402_300_799_999, "9999-12-31T23:59:59.999Z"},
		{-62_167_219_200_001, "-62167219200001"},
		{253_402_300_800_000, "253402300800000"},
		{1e15, "1000000000000000"}, // the year 33658
		{math.MaxInt64, "9223372036854775807"},
		{math.MinInt64, "-9223372036854775808"},
	} {
		got := string(AppendTime(nil, c.ms))
		if got != c.want {
			t.Errorf("AppendTime(%d) = %s, want %s", c.ms, got, c.want)
		}
		if tm, err := time.Parse(time.RFC3339Nano, got); err == nil && tm.UnixMilli() != c.ms {
			t.Errorf("AppendTime(%d) = %s reads back as %d", c.ms, got, tm.UnixMilli())
		}
	}
	for i := range enc {
		if _, err := agg.DecodeWindowState(enc[:i]); err == nil {
			t.Fatalf("truncated to %d bytes: no error", i)
		}
	}
	bad := append([]byte(nil), enc...)
	bad[0] = 9
	if _, err := agg.DecodeWindowState(bad); err == nil || !strings.Contains(err.Error(), "version") {
		t.Fatalf("bad version: %v", err)
	}
}

func TestEventTimeOf(t *testing.T) {
	for _, tc := range []struct {
		in   any
		want int64
		err  string
	}{
		{int64(1_700_000_000_123), 1_700_000_000_123, ""},
		{1_700_000_000_123, 1_700_000_000_123, ""},
		{float64(5000), 5000, ""},
		{"2026-12-04T10:00:00.5Z", 1_796_378_400_500, ""},
		{"2026-12-04T11:00:00+01:00", 1_796_378_400_000, ""},
		{"1234", 1234, ""},
		{1.5, 0, "whole epoch milliseconds"},
		{"yesterday", 0, "RFC 3339"},
		{nil, 0, "null"},
		{true, 0, "got bool"},
		{int64(math.MinInt64), 0, "outside the representable range"},
		{int64(math.MaxInt64), 0, "outside the representable range"},
		{"-9223372036854775808", 0, "outside the representable range"},
		{int64(math.MinInt64 + 1), math.MinInt64 + 1, ""},
		{int64(math.MaxInt64 - 1), math.MaxInt64 - 1, ""},
	} {
		got, err := EventTimeOf(tc.in)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Reason, tc.err)):
			t.Errorf("EventTimeOf(%v) = %d, %v; want error with %q", tc.in, got, err, tc.err)
		case tc.err == "" && (err != nil || got != tc.want):
			t.Errorf("EventTimeOf(%v) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
}

func TestChainEventTime(t *testing.T) {
	c := mustCompile(t, keyByStep("k"))
	e, err := CompileExpr("sources[0].event_time.timestamp", "ts")
	if err != nil {
		t.Fatal(err)
	}
	c.AlsoRead(e)
	r := jsonRecord(`{"k":"a","ts":1000,"other":[1,2]}`)
	ms, rerr := c.EventTime(r, e)
	if rerr != nil || ms != 1000 {
		t.Fatalf("EventTime = %d, %v", ms, rerr)
	}
	if keep, rerr := c.Process(r); !keep || rerr != nil || r.GroupKey != "a" {
		t.Fatalf("Process after EventTime: %v %v %q", keep, rerr, r.GroupKey)
	}
	_, rerr = c.EventTime(jsonRecord(`{"k":"a"}`), e)
	if rerr == nil || rerr.Code != CodeMissingField || rerr.Step != "sources[0].event_time.timestamp" {
		t.Fatalf("missing ts: %+v", rerr)
	}
	_, rerr = c.EventTime(jsonRecord(`{"k":"a","ts":"soon"}`), e)
	if rerr == nil || rerr.Code != CodeType || rerr.Step != "sources[0].event_time.timestamp" {
		t.Fatalf("bad ts: %+v", rerr)
	}
}

// With aggregate.ttl a state keeps its update time (encoding version 3);
// states written without a TTL restore into one with it (time unknown),
// and the converse drops the time.
func TestStateUpdateTimeWithTTL(t *testing.T) {
	vals := []config.AggregateValue{val("count", config.AggCount, ""), val("sum", config.AggSum, "x")}
	withTTL := mustCompile(t, keyByStep("k"), config.Step{Aggregate: &config.Aggregate{TTL: 3600e9, Values: vals}})
	without := mustCompile(t, keyByStep("k"), aggStep("", vals...))
	a, b := withTTL.Aggregator(), without.Aggregator()
	if a.TTL() != time.Hour || b.TTL() != 0 {
		t.Fatalf("TTL: %v %v", a.TTL(), b.TTL())
	}
	st := a.NewState()
	r := jsonRecord(`{"k":"a","x":5}`)
	withTTL.Process(r)
	a.Add(st, r)
	st.SetUpdated(1_700_000_000_123)
	enc, _ := st.MarshalBinary()
	if enc[0] != 3 {
		t.Fatalf("version %d, want 3", enc[0])
	}
	back, err := a.DecodeState(enc)
	if err != nil || back.Updated() != 1_700_000_000_123 || string(back.Output("a")) != string(st.Output("a")) {
		t.Fatalf("round trip: %v %d %s", err, back.Updated(), back.Output("a"))
	}
	old, err := b.DecodeState(enc)
	if err != nil || old.Updated() != 0 || string(old.Output("a")) != string(st.Output("a")) {
		t.Fatalf("into a job without TTL: %v %s", err, old.Output("a"))
	}
	plain, _ := old.MarshalBinary()
	if plain[0] != 1 {
		t.Fatalf("without TTL the encoding is version %d, want 1", plain[0])
	}
	up, err := a.DecodeState(plain)
	if err != nil || up.Updated() != 0 {
		t.Fatalf("version 1 into a TTL job: %v %d", err, up.Updated())
	}
	for i := range enc {
		if _, err := a.DecodeState(enc[:i]); err == nil {
			t.Fatalf("truncated at %d: no error", i)
		}
	}
}
