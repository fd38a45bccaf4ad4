package operator

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/eoflow/pipeline/config"
)

// paritySteps is the reference job, examples/parity-sum and config.yaml.
func paritySteps(emit config.EmitMode) []config.Step {
	return []config.Step{
		{ID: "parity", KeyBy: `n % 2 == 0 ? "even" : "odd"`},
		{ID: "sums", Aggregate: &config.Aggregate{Emit: emit, Values: []config.AggregateValue{
			{Name: "count", Func: config.AggCount},
			{Name: "sum", Func: config.AggSum, Arg: "n"},
		}}},
	}
}

// TestParitySum runs {"n": 1} ... {"n": 10} through the reference job and
// checks every output byte, then restores the states from their encodings
// half way and checks the run continues identically.
func TestParitySum(t *testing.T) {
	want := []string{
		`{"key":"odd","count":1,"sum":1}`,
		`{"key":"even","count":1,"sum":2}`,
		`{"key":"odd","count":2,"sum":4}`,
		`{"key":"even","count":2,"sum":6}`,
		`{"key":"odd","count":3,"sum":9}`,
		`{"key":"even","count":3,"sum":12}`,
		`{"key":"odd","count":4,"sum":16}`,
		`{"key":"even","count":4,"sum":20}`,
		`{"key":"odd","count":5,"sum":25}`,
		`{"key":"even","count":5,"sum":30}`,
	}
	for _, restoreAt := range []int{-1, 0, 5, 9} {
		t.Run(fmt.Sprintf("restore at %d", restoreAt), func(t *testing.T) {
			c := mustCompile(t, paritySteps("")...)
			agg := c.Aggregator()
			if agg == nil || agg.Emit() != config.EmitEveryRecord || agg.ID() != "sums" || agg.Path() != "steps[1].aggregate" {
				t.Fatalf("aggregator %+v", agg)
			}
			states := map[string]*AggregateState{}
			for i := 1; i <= 10; i++ {
				if i-1 == restoreAt {
					// A crash: the states come back from the changelog.
					for k, st := range states {
						enc, err := st.MarshalBinary()
						if err != nil {
							t.Fatal(err)
						}
						if states[k], err = agg.DecodeState(enc); err != nil {
							t.Fatal(err)
						}
					}
				}
				r := jsonRecord(fmt.Sprintf(`{"n": %d}`, i))
				keep, err := c.Process(r)
				if !keep || err != nil {
					t.Fatalf("record %d: keep %v, err %v", i, keep, err)
				}
				st := states[r.GroupKey]
				if st == nil {
					st = agg.NewState()
					states[r.GroupKey] = st
				}
				changed, err := agg.Add(st, r)
				if !changed || err != nil {
					t.Fatalf("record %d: changed %v, err %v", i, changed, err)
				}
				if got := string(st.Output(r.GroupKey)); got != want[i-1] {
					t.Fatalf("record %d: output %s, want %s", i, got, want[i-1])
				}
			}
		})
	}
}

// failingAdd is a record an aggregate must refuse: the error's code and
// the path of the value that fails.
type failingAdd struct {
	in, path string
	code     Code
}

// addsAllOrNothing adds {"n":1,"m":1} to one key of an aggregate of values,
// then each of failing, which must fail as given and leave the state as it
// was, then last, which must succeed and output want. It returns the state.
func addsAllOrNothing(t *testing.T, emit config.EmitMode, values []config.AggregateValue, failing []failingAdd, last, want string) *AggregateState {
	t.Helper()
	c := mustCompile(t, keyByStep(`"all"`), aggStep(emit, values...))
	agg := c.Aggregator()
	st := agg.NewState()
	add := func(v string) *RecordError {
		t.Helper()
		r := jsonRecord(v)
		if _, err := c.Process(r); err != nil {
			t.Fatal(err)
		}
		_, err := agg.Add(st, r)
		return err
	}
	if err := add(`{"n":1,"m":1}`); err != nil {
		t.Fatal(err)
	}
	before := string(st.Output("all"))
	for _, tt := range failing {
		err := add(tt.in)
		if err == nil || err.Step != tt.path || err.Code != tt.code {
			t.Fatalf("%s: error %+v, want %s at %s", tt.in, err, tt.code, tt.path)
		}
		if got := string(st.Output("all")); got != before {
			t.Fatalf("%s: state changed by a failed record: %s, was %s", tt.in, got, before)
		}
	}
	if err := add(last); err != nil {
		t.Fatal(err)
	}
	if got := string(st.Output("all")); got != want {
		t.Fatal(got)
	}
	return st
}

func TestAggregateAllOrNothing(t *testing.T) {
	st := addsAllOrNothing(t, config.EmitOnCheckpoint, []config.AggregateValue{
		val("count", config.AggCount, ""),
		val("sum", config.AggSum, "n"),
		val("max", config.AggMax, "m"),
		val("last", config.AggLast, "n"),
	}, []failingAdd{
		// count and sum would succeed; max fails: nothing may change.
		{`{"n":2,"m":"x"}`, "steps[1].aggregate.values.max", CodeType},
		{`{"n":2}`, "steps[1].aggregate.values.max", CodeMissingField},
		{`{"n":9223372036854775807,"m":1}`, "steps[1].aggregate.values.sum", CodeOverflow},
		{`{"n":"2","m":1}`, "steps[1].aggregate.values.sum", CodeType},
		{`{"n":2,"m":[1]}`, "steps[1].aggregate.values.max", CodeType},
	}, `{"n":2,"m":0}`, `{"key":"all","count":2,"sum":3,"max":1,"last":2}`)
	if v, ok := st.Value("sum"); !ok || v != int64(3) {
		t.Fatal(v, ok)
	}
	if _, ok := st.Value("nope"); ok {
		t.Fatal("Value of an unknown name")
	}
}

// TestAggregateFirstValueFails: the first value is added without a Check
// of its own; when it fails, or another fails, nothing changes, and the
// error is always that of the first failing value in configured order.
func TestAggregateFirstValueFails(t *testing.T) {
	addsAllOrNothing(t, config.EmitEveryRecord, []config.AggregateValue{
		val("sum", config.AggSum, "n"),
		val("max", config.AggMax, "m"),
		val("count", config.AggCount, ""),
	}, []failingAdd{
		{`{"n":"x","m":"y"}`, "steps[1].aggregate.values.sum", CodeType},
		{`{"n":"x","m":2}`, "steps[1].aggregate.values.sum", CodeType},
		{`{"n":2,"m":"y"}`, "steps[1].aggregate.values.max", CodeType},
		{`{"n":9223372036854775807,"m":2}`, "steps[1].aggregate.values.sum", CodeOverflow},
		{`{"n":9223372036854775807,"m":"y"}`, "steps[1].aggregate.values.sum", CodeOverflow},
		{`{"m":2}`, "steps[1].aggregate.values.sum", CodeMissingField},
	}, `{"n":2,"m":5}`, `{"key":"all","sum":3,"max":5,"count":2}`)
}

func TestAggregateDecodeError(t *testing.T) {
	c := mustCompile(t, keyByStep(`"k"`), aggStep("", val("c", config.AggCount, "")))
	// A record that skipped Process still gets decoded by Add.
	r := jsonRecord(`nope`)
	_, err := c.Aggregator().Add(c.Aggregator().NewState(), r)
	if err == nil || err.Code != CodeDecode || err.Step != "steps[1].aggregate" {
		t.Fatalf("%+v", err)
	}
}

func TestOutputEscaping(t *testing.T) {
	c := mustCompile(t, keyByStep("k"), aggStep("", val(`a"b`, config.AggFirst, "v"), val("é", config.AggAvg, "n")))
	r := jsonRecord(`{"k":"x\"y","v":"\u2028","n":1.25}`)
	if _, err := c.Process(r); err != nil {
		t.Fatal(err)
	}
	st := c.Aggregator().NewState()
	if _, err := c.Aggregator().Add(st, r); err != nil {
		t.Fatal(err)
	}
	got := string(st.AppendOutput([]byte("prefix:"), r.GroupKey))
	if want := `prefix:{"key":"x\"y","a\"b":"\u2028","é":1.25}`; got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
}

func TestStateRoundTripAllFunctions(t *testing.T) {
	c := mustCompile(t, keyByStep(`"k"`), aggStep("",
		val("count", config.AggCount, ""),
		val("sum", config.AggSum, "n"),
		val("min", config.AggMin, "n"),
		val("max", config.AggMax, "n"),
		val("avg", config.AggAvg, "n"),
		val("first", config.AggFirst, "o"),
		val("last", config.AggLast, "o"),
	))
	agg := c.Aggregator()
	st := agg.NewState()
	empty, _ := st.MarshalBinary()
	if back, err := agg.DecodeState(empty); err != nil || string(back.Output("k")) != string(st.Output("k")) {
		t.Fatalf("empty state: %v", err)
	}
	for _, v := range []string{
		`{"n":9007199254740993,"o":{"z":[1,2.5,"s"],"a":null}}`,
		`{"n":-4,"o":"x"}`,
		`{"n":0.5,"o":-0.0}`,
	} {
		r := jsonRecord(v)
		if _, err := c.Process(r); err != nil {
			t.Fatal(err)
		}
		if _, err := agg.Add(st, r); err != nil {
			t.Fatal(err)
		}
		enc, err := st.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		back, err := agg.DecodeState(enc)
		if err != nil {
			t.Fatalf("%x: %v", enc, err)
		}
		if a, b := string(st.Output("k")), string(back.Output("k")); a != b {
			t.Fatalf("restored output %s, want %s", b, a)
		}
		again, _ := back.AppendBinary([]byte{0xAA})
		if !bytes.Equal(again[1:], enc) || again[0] != 0xAA {
			t.Fatalf("re-encoding differs")
		}
	}
	// Exact beyond 2^53, also once the 0.5 makes the sum a decimal; the
	// average has 15 significant digits.
	want := `{"key":"k","count":3,"sum":9007199254740989.5,"min":-4,"max":9007199254740993,"avg":3002399751580330,"first":{"a":null,"z":[1,2.5,"s"]},"last":-0}`
	if got := string(st.Output("k")); got != want {
		t.Fatalf("got %s\nwant %s", got, want)
	}
}

func TestStateLongAccumulatorEncoding(t *testing.T) {
	// An accumulator encoding of 128 bytes or more takes a multi-byte length.
	c := mustCompile(t, keyByStep(`"k"`), aggStep("", val("l", config.AggLast, "s"), val("c", config.AggCount, "")))
	agg := c.Aggregator()
	for _, n := range []int{100, 123, 124, 125, 126, 127, 128, 300, 20000} {
		st := agg.NewState()
		r := jsonRecord(fmt.Sprintf(`{"s":%q}`, strings.Repeat("x", n)))
		if _, err := agg.Add(st, r); err != nil {
			t.Fatal(err)
		}
		enc, _ := st.MarshalBinary()
		back, err := agg.DecodeState(enc)
		if err != nil {
			t.Fatalf("%d: %v", n, err)
		}
		if !bytes.Equal(back.Output("k"), st.Output("k")) {
			t.Fatalf("%d: outputs differ", n)
		}
	}
}

func TestStateMismatchAndCorruption(t *testing.T) {
	mk := func(vals ...config.AggregateValue) *Aggregator {
		return mustCompile(t, keyByStep(`"k"`), aggStep("", vals...)).Aggregator()
	}
	orig := mk(val("count", config.AggCount, ""), val("sum", config.AggSum, "n"))
	st := orig.NewState()
	r := jsonRecord(`{"n":5}`)
	orig.Add(st, r)
	enc, _ := st.MarshalBinary()

	renamed := mk(val("count", config.AggCount, ""), val("total", config.AggSum, "n"))
	if _, err := renamed.DecodeState(enc); !errors.Is(err, errStateMismatch) || !strings.Contains(err.Error(), "state has values [count sum], config has [count total]") {
		t.Fatalf("renamed: %v", err)
	}
	// Reordered values each find their own state.
	reordered := mk(val("sum", config.AggSum, "n"), val("count", config.AggCount, ""))
	back, err := reordered.DecodeState(enc)
	if err != nil {
		t.Fatalf("reordered: %v", err)
	}
	if c, _ := back.Value("count"); c != int64(1) {
		t.Errorf("reordered: count = %v, want 1", c)
	}
	if sum, _ := back.Value("sum"); sum != int64(5) {
		t.Errorf("reordered: sum = %v, want 5", sum)
	}
	// An encoding holding "sum" twice (and no "count") is refused.
	countEntry := 1 + len("count") + 1 + int(enc[2+1+len("count")])
	sumEntry := enc[2+countEntry:]
	dup := append(append([]byte{stateVersion, 2}, sumEntry...), sumEntry...)
	if _, err := orig.DecodeState(dup); !errors.Is(err, errStateMismatch) {
		t.Errorf("a value twice: %v", err)
	}
	refunc := mk(val("count", config.AggCount, ""), val("sum", config.AggAvg, "n"))
	if _, err := refunc.DecodeState(enc); err == nil || !strings.Contains(err.Error(), "value sum: decode avg state") {
		t.Fatalf("changed function: %v", err)
	}

	bad := [][]byte{
		nil,
		{2},
		{1},
		{1, 200},
		{1, 1, 5, 'c'},
		append(append([]byte{}, enc...), 0),
		enc[:len(enc)-1],
	}
	for _, b := range bad {
		st2 := orig.NewState()
		orig.Add(st2, r)
		before := string(st2.Output("k"))
		if err := st2.UnmarshalBinary(b); err == nil {
			t.Errorf("%x: no error", b)
		}
		if string(st2.Output("k")) != before {
			t.Errorf("%x: a failed UnmarshalBinary changed the state", b)
		}
	}
	// Every truncation and every single-byte change is an error or a valid
	// state, never a panic.
	for i := range enc {
		orig.NewState().UnmarshalBinary(enc[:i])
		for _, x := range []byte{0, 1, 0x7f, 0x80, 0xff} {
			c := bytes.Clone(enc)
			c[i] = x
			orig.NewState().UnmarshalBinary(c)
		}
	}
}

// TestStateIsOneBlock: a state and its accumulators are one allocation,
// new or decoded, and work as separately allocated ones did.
func TestStateIsOneBlock(t *testing.T) {
	c := mustCompile(t, keyByStep(`"all"`), aggStep(config.EmitEveryRecord,
		val("c", config.AggCount, ""), val("s", config.AggSum, "n"), val("mn", config.AggMin, "n"),
		val("mx", config.AggMax, "n"), val("a", config.AggAvg, "n"), val("f", config.AggFirst, "n"), val("l", config.AggLast, "n")))
	agg := c.Aggregator()
	if n := testing.AllocsPerRun(100, func() { agg.NewState() }); n != 1 {
		t.Errorf("NewState: %v allocations, want 1", n)
	}
	st := agg.NewState()
	for _, v := range []string{`{"n":3}`, `{"n":1}`, `{"n":2}`} {
		r := jsonRecord(v)
		c.Process(r)
		if _, err := agg.Add(st, r); err != nil {
			t.Fatal(err)
		}
	}
	const want = `{"key":"all","c":3,"s":6,"mn":1,"mx":3,"a":2,"f":3,"l":2}`
	if got := string(st.Output("all")); got != want {
		t.Fatalf("%s, want %s", got, want)
	}
	enc, _ := st.MarshalBinary()
	back, err := agg.DecodeState(enc)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(back.Output("all")); got != want {
		t.Fatalf("decoded: %s, want %s", got, want)
	}
	// The decoded accumulators are the block's, not separate objects.
	if n := testing.AllocsPerRun(100, func() { agg.DecodeState(enc) }); n > 1 {
		t.Errorf("DecodeState: %v allocations, want 1", n)
	}
}

// FuzzStateDecode feeds an aggregate state arbitrary bytes: never a panic,
// a failed decode leaves the state as it was, and an accepted encoding
// re-encodes to one that decodes and re-encodes to itself. (Not always to
// the input: values may come in another order, decoded by name and written
// in config order; for the accumulators' own canonical forms see
// FuzzAccumulatorDecode.)
func FuzzStateDecode(f *testing.F) {
	steps := []config.Step{keyByStep(`"k"`), aggStep("",
		val("count", config.AggCount, ""),
		val("sum", config.AggSum, "n"),
		val("avg", config.AggAvg, "n"),
		val("last", config.AggLast, "o"),
	)}
	c := mustCompile(f, steps...)
	agg := c.Aggregator()
	st := agg.NewState()
	empty, _ := st.MarshalBinary()
	f.Add(empty)
	for _, v := range []string{`{"n":3,"o":"x"}`, `{"n":0.5,"o":[1]}`} {
		r := jsonRecord(v)
		if _, err := c.Process(r); err != nil {
			f.Fatal(err)
		}
		if _, err := agg.Add(st, r); err != nil {
			f.Fatal(err)
		}
		enc, _ := st.MarshalBinary()
		f.Add(enc)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s := agg.NewState()
		before, _ := s.MarshalBinary()
		if err := s.UnmarshalBinary(data); err != nil {
			if after, _ := s.MarshalBinary(); !bytes.Equal(after, before) {
				t.Fatalf("a failed decode of %x changed the state", data)
			}
			return
		}
		enc, err := s.MarshalBinary()
		if err != nil {
			t.Fatalf("decoded %x but cannot encode: %v", data, err)
		}
		back, err := agg.DecodeState(enc)
		if err != nil {
			t.Fatalf("re-encoding %x of %x does not decode: %v", enc, data, err)
		}
		if again, _ := back.MarshalBinary(); !bytes.Equal(again, enc) {
			t.Fatalf("re-encoding not stable: %x then %x", enc, again)
		}
	})
}
