package operator

import (
	"bytes"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/eoflow/pipeline/config"
)

// intPathChains are chains of the integer path's shape: between them,
// every function it knows, a field read by two values, count() alone and
// on_checkpoint emission.
func intPathChains() [][]config.Step {
	return [][]config.Step{
		{keyByStep("key"), aggStep("", val("sum", config.AggSum, "amount"), val("count", config.AggCount, ""), val("ts", config.AggLast, "ts"))},
		{keyByStep("k"), aggStep(config.EmitOnCheckpoint,
			val("min", config.AggMin, "n"), val("max", config.AggMax, "n"), val("first", config.AggFirst, "o"),
			val("last", config.AggLast, "o"), val("sum", config.AggSum, "n"), val("count", config.AggCount, ""))},
		{keyByStep("k"), aggStep("", val("c", config.AggCount, ""))},
	}
}

// TestIntPathShape: which chains get an integer path.
func TestIntPathShape(t *testing.T) {
	for _, steps := range intPathChains() {
		if mustCompile(t, steps...).ints == nil {
			t.Errorf("%+v: no integer path", steps)
		}
	}
	sum := aggStep("", val("s", config.AggSum, "n"))
	for name, steps := range map[string][]config.Step{
		"key_by expression":  {keyByStep("k + 'x'"), sum},
		"value expression":   {keyByStep("k"), aggStep("", val("s", config.AggSum, "n * 2"))},
		"avg":                {keyByStep("k"), aggStep("", val("a", config.AggAvg, "n"))},
		"a filter before":    {filterStep("n > 0"), keyByStep("k"), sum},
		"no aggregate":       {keyByStep("k")},
		"value of the key":   {keyByStep("k"), aggStep("", val("l", config.AggLast, "k"))},
		"five fields":        {keyByStep("k"), aggStep("", val("a", config.AggSum, "a"), val("b", config.AggSum, "b"), val("c", config.AggSum, "c"), val("d", config.AggSum, "d"), val("e", config.AggSum, "e"))},
		"window":             {keyByStep("k"), {Window: &config.Window{Tumbling: 1e9, Values: []config.AggregateValue{val("s", config.AggSum, "n")}}}},
		"a TTL on the state": {keyByStep("k"), {Aggregate: &config.Aggregate{TTL: 1e9, Values: []config.AggregateValue{val("s", config.AggSum, "n")}}}},
	} {
		c, err := Compile(steps)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if c.ints != nil {
			t.Errorf("%s: an integer path, want none", name)
		}
	}
}

// intPathInput is a random record for the chains above: mostly what the
// integer path takes, often what only the general path does.
func intPathInput(rng *rand.Rand) string {
	pick := func(s ...string) string { return s[rng.IntN(len(s))] }
	// Mostly integers a job sees; now and then the extremes, which
	// overflow sums and, at 19 digits, leave a first/last state to the
	// general codec (parseSmallInt).
	ints := []string{"0", "1", "-1", "7", "-0", "1000", "1764688091000", "-1764688091000",
		strconv.Itoa(rng.IntN(50) - 25), strconv.Itoa(rng.IntN(1 << 30))}
	extremes := []string{"999999999999999999", "-999999999999999999", "9223372036854775807", "-9223372036854775808", "1234567890123456789", strconv.FormatInt(rng.Int64(), 10)}
	num := func() string {
		switch rng.IntN(40) {
		case 0, 1, 2:
			return pick("0.5", "1e3", "9223372036854775808", `"3"`, "null", "true", "[1]", `{"a":1}`, "-", "01")
		case 3:
			return pick(extremes...)
		}
		return ints[rng.IntN(len(ints))]
	}
	// Many keys: a key whose sum once took a fraction keeps a decimal
	// sum, which only the general path folds, so fresh keys keep coming.
	key := `"k` + strconv.Itoa(rng.IntN(3000)) + `"`
	if rng.IntN(4) == 0 {
		key = pick(`"a"`, `"b"`, `""`, `"é"`, `"😀"`, `"a<b>&"`)
	}
	if rng.IntN(10) == 0 {
		key = pick(`7`, `true`, `"x\"y"`, `"\u0041"`, `"a\nb"`, `null`, `"\ud800"`, "\"\xff\"", `1.5`)
	}
	members := []string{
		`"key":` + key, `"k":` + key, `"amount":` + num(), `"n":` + num(), `"o":` + num(), `"ts":` + num(),
		`"pad":"xxxxxxxxxxxxxxxxxxxxxxxx"`, `"nested":{"a":[1,2,{"b":null}],"s":"t"}`,
	}
	rng.Shuffle(len(members), func(i, j int) { members[i], members[j] = members[j], members[i] })
	members = members[:len(members)-rng.IntN(3)] // sometimes a field is missing
	if rng.IntN(8) == 0 {
		members = append(members, members[rng.IntN(len(members))]) // a repeated member
	}
	sep := ","
	if rng.IntN(8) == 0 {
		sep = " ,\n "
	}
	v := "{" + strings.Join(members, sep) + "}"
	switch rng.IntN(30) {
	case 0:
		v = v[:len(v)-1] // truncated
	case 1:
		v = " " + v + "\t"
	case 2:
		v += "x"
	case 3:
		v = "[" + v + "]"
	}
	return v
}

// intPathCheck runs one record through both paths on the same prior state
// (enc, nil for a new key) and fails the test where the integer path took
// the record and differs from the general path. It returns the general
// path's new state encoding (nil when the record failed or was not kept)
// and whether the integer path took the record all the way.
func intPathCheck(t *testing.T, general, ints *Chain, enc []byte, value string) (next []byte, taken bool) {
	t.Helper()
	gr, ir := jsonRecord(value), jsonRecord(value)
	gkeep, gerr := general.Process(gr)
	ikeep, ierr := ints.Process(ir)
	// Declined, the chain took the general path: the same result either way.
	if ikeep != gkeep || (ierr == nil) != (gerr == nil) || gr.GroupKey != ir.GroupKey || gr.keyKind != ir.keyKind {
		t.Fatalf("%s: integer path (read %v) keep %v, key %q (kind %d), error %v; the general path keep %v, key %q (kind %d), error %v",
			value, ir.intsRead, ikeep, ir.GroupKey, ir.keyKind, ierr, gkeep, gr.GroupKey, gr.keyKind, gerr)
	}
	if ierr != nil && *ierr != *gerr {
		t.Fatalf("%s: error %v, the general path %v", value, ierr, gerr)
	}
	if gerr != nil || !gkeep {
		return nil, false
	}
	agg := general.Aggregator()
	gst := agg.NewState()
	if enc != nil {
		if err := agg.DecodeInto(gst, enc); err != nil {
			t.Fatalf("prior state %x: %v", enc, err)
		}
	}
	gchanged, aerr := agg.Add(gst, gr)
	if aerr == nil {
		next, _ = gst.AppendBinary(nil)
	}
	if !ir.intsRead {
		return next, false
	}
	iagg := ints.Aggregator()
	ist := iagg.NewIntState()
	if enc == nil {
		ist.Reset()
	} else if !ist.Decode(enc) {
		return next, false // a state only the general codec reads
	}
	before := ist.AppendBinary(nil)
	ichanged, ok := iagg.AddInts(ist, ir)
	if !ok {
		if aerr == nil {
			t.Fatalf("%s on %x: the integer path declined a record the general path adds", value, enc)
		}
		if after := ist.AppendBinary(nil); !bytes.Equal(before, after) {
			t.Fatalf("%s: a declined AddInts changed the state", value)
		}
		return next, false
	}
	if aerr != nil {
		t.Fatalf("%s on %x: the integer path added what the general path refuses: %v", value, enc, aerr)
	}
	if ichanged != gchanged {
		t.Fatalf("%s on %x: changed %v, the general path %v", value, enc, ichanged, gchanged)
	}
	if got := ist.AppendBinary(nil); !bytes.Equal(got, next) {
		t.Fatalf("%s on %x: state %x, the general path %x", value, enc, got, next)
	}
	if got, want := ist.AppendOutput(nil, ir.GroupKey), gst.AppendOutput(nil, gr.GroupKey); !bytes.Equal(got, want) {
		t.Fatalf("%s: output %s, the general path %s", value, got, want)
	}
	return next, true
}

// generalOnly is c compiled again without its integer path.
func generalOnly(t testing.TB, steps []config.Step) *Chain {
	c := mustCompile(t, steps...)
	c.ints, c.agg.ints = nil, nil
	return c
}

// TestIntPathMatchesGeneral folds sequences of random records into a few
// keys' states by both paths: where the integer path takes a record, its
// key, change flag, state encoding and output are the general path's.
func TestIntPathMatchesGeneral(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 9))
	for ci, steps := range intPathChains() {
		general, ints := generalOnly(t, steps), mustCompile(t, steps...)
		states := map[string][]byte{}
		var taken, total int
		for range 20000 {
			v := intPathInput(rng)
			gr := jsonRecord(v)
			var enc []byte
			if keep, err := general.Process(gr); err == nil && keep {
				enc = states[gr.GroupKey]
			}
			next, ok := intPathCheck(t, general, ints, enc, v)
			if next != nil {
				states[gr.GroupKey] = next
			}
			total++
			if ok {
				taken++
			}
		}
		t.Logf("chain %d: the integer path took %d of %d records", ci, taken, total)
		if taken < total/4 {
			t.Errorf("chain %d: the integer path took only %d of %d records", ci, taken, total)
		}
	}
}

// TestIntPathDeclines: records and states the integer path leaves to the
// general one.
func TestIntPathDeclines(t *testing.T) {
	c := mustCompile(t, intPathChains()[0]...)
	for _, v := range []string{
		`{"key":7,"amount":1,"ts":1}`,                      // a number key
		`{"key":"a\"b","amount":1,"ts":1}`,                 // an escaped key
		`{"key":"a","amount":1.5,"ts":1}`,                  // a fraction
		`{"key":"a","amount":1e2,"ts":1}`,                  // an exponent
		`{"key":"a","amount":"1","ts":1}`,                  // a string
		`{"key":"a","ts":1}`,                               // a missing field
		`{"key":"a","amount":1,"ts":1`,                     // truncated
		`{"key":"a","amount":1,"ts":1}{}`,                  // trailing
		`{"key":"a","amount":1,"ts":[1}`,                   // invalid
		`{"key":"a","amount":1,"ts":1,"x":}`,               // invalid elsewhere
		`{"key":"a","amount":99999999999999999999,"ts":1}`, // beyond int64
	} {
		r := jsonRecord(v)
		if _, _ = c.Process(r); r.intsRead {
			t.Errorf("%s: read by the integer path", v)
		}
	}
	for _, v := range []string{`{"key":"a","amount":1,"ts":1}`, ` {"ts":-0, "amount" : -3 ,"key":"é","p":[{}]} `, `{"key":"","amount":0,"ts":0,"key":"b"}`} {
		r := jsonRecord(v)
		if _, err := c.Process(r); err != nil || !r.intsRead {
			t.Errorf("%s: not read by the integer path (%v)", v, err)
		}
	}
	// A sum that would overflow is declined, whatever the state.
	agg := c.Aggregator()
	st := agg.NewIntState()
	st.Reset()
	r := jsonRecord(`{"key":"a","amount":9223372036854775807,"ts":1}`)
	c.Process(r)
	if _, ok := agg.AddInts(st, r); !ok {
		t.Fatal("the first MaxInt64 declined")
	}
	c.Recycle(r)
	r = jsonRecord(`{"key":"a","amount":1,"ts":2}`)
	c.Process(r)
	if _, ok := agg.AddInts(st, r); ok {
		t.Fatal("an overflowing sum taken")
	}
	// A record the integer path did not read.
	if _, ok := agg.AddInts(st, jsonRecord(`{}`)); ok {
		t.Fatal("AddInts took a record the integer path did not read")
	}
	// A decimal sum is not in the fast form.
	g := generalOnly(t, intPathChains()[0])
	gst := g.Aggregator().NewState()
	gr := jsonRecord(`{"key":"a","amount":0.5,"ts":1}`)
	g.Process(gr)
	g.Aggregator().Add(gst, gr)
	enc, _ := gst.MarshalBinary()
	if st.Decode(enc) {
		t.Fatalf("decoded a decimal sum %x", enc)
	}
}

// FuzzIntPath: on any record value and any of a few prior states, the
// integer path gives the general path's result wherever it takes the
// record.
func FuzzIntPath(f *testing.F) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 40 {
		f.Add(intPathInput(rng))
	}
	type pair struct{ general, ints *Chain }
	var chains []pair
	for _, steps := range intPathChains() {
		chains = append(chains, pair{generalOnly(f, steps), mustCompile(f, steps...)})
	}
	// Prior states: none, and a few reached by records of each chain.
	priors := make([][][]byte, len(chains))
	for ci, c := range chains {
		priors[ci] = [][]byte{nil}
		var enc []byte
		for _, v := range []string{`{"key":"k","k":"k","amount":5,"n":-5,"o":3,"ts":9}`, `{"key":"k","k":"k","amount":9223372036854775800,"n":9223372036854775807,"o":-1,"ts":1}`} {
			r := jsonRecord(v)
			c.general.Process(r)
			st := c.general.Aggregator().NewState()
			if enc != nil {
				c.general.Aggregator().DecodeInto(st, enc)
			}
			c.general.Aggregator().Add(st, r)
			enc, _ = st.AppendBinary(nil)
			priors[ci] = append(priors[ci], enc)
		}
	}
	f.Fuzz(func(t *testing.T, value string) {
		for ci, c := range chains {
			for _, enc := range priors[ci] {
				intPathCheck(t, c.general, c.ints, enc, value)
			}
		}
	})
}

// BenchmarkIntPathRead is the integer path's reading of the bench
// workload's record (bench/jobs/keyed-sum.yaml): the key, two integers
// and a pad string skipped.
func BenchmarkIntPathRead(b *testing.B) {
	c := mustCompile(b, keyByStep("key"), aggStep("", val("sum", config.AggSum, "amount"), val("count", config.AggCount, ""), val("ts", config.AggLast, "ts")))
	var values [][]byte
	for i := range 64 {
		values = append(values, []byte(`{"key":"k`+strconv.Itoa(i*1543%100000)+`","amount":`+strconv.Itoa(i*37%1000+1)+`,"ts":17646880910`+strconv.Itoa(10+i)+`,"pad":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}`))
	}
	var r Record
	b.SetBytes(int64(len(values[0])))
	i := 0
	for b.Loop() {
		r = Record{Value: values[i%len(values)]}
		i++
		if keep, err := c.Process(&r); !keep || err != nil || !r.intsRead {
			b.Fatal("not read by the integer path")
		}
	}
}
