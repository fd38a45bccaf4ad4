package operator

import (
	"bytes"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/eoflow/pipeline/config"
)

// fastCodecSteps is an aggregate of every function the fast codec knows,
// keyed by the record's kk field (a string, or a number for the general
// codec's key kinds).
func fastCodecSteps() []config.Step {
	return []config.Step{keyByStep(`kk`), aggStep("",
		val("count", config.AggCount, ""),
		val("sum", config.AggSum, "n"),
		val("min", config.AggMin, "n"),
		val("max", config.AggMax, "n"),
		val("first", config.AggFirst, "o"),
		val("last", config.AggLast, "o"),
	)}
}

// codecInput is a random record for fastCodecSteps: mostly what the fast
// codec keeps (string keys, integers of every length), sometimes what only
// the general one does (a number key, a fraction, a string or a null).
func codecInput(rng *rand.Rand) string {
	kk := `"k"`
	if rng.IntN(10) == 0 {
		kk = "7"
	}
	ints := []string{"0", "1", "-1", "127", "-64", "1764688091000", "-999999999999999999", "999999999999999999",
		"9223372036854775807", "-9223372036854775808", strconv.Itoa(rng.IntN(1 << 20)), strconv.FormatInt(rng.Int64(), 10)}
	n := ints[rng.IntN(len(ints))]
	if rng.IntN(20) == 0 {
		n = "0.5"
	}
	o := ints[rng.IntN(len(ints))]
	switch rng.IntN(12) {
	case 0:
		o = `"x"`
	case 1:
		o = "null"
	case 2:
		o = "2.5"
	}
	return `{"kk":` + kk + `,"n":` + n + `,"o":` + o + `}`
}

// TestFastCodecMatchesGeneral holds the fast codec to the general one:
// every state it encodes has the general encoding byte for byte, and any
// input it decodes (valid encodings and mutations of them) the general
// codec decodes without error to the same state. Mutations that the
// general codec refuses must never pass the fast one.
func TestFastCodecMatchesGeneral(t *testing.T) {
	c := mustCompile(t, fastCodecSteps()...)
	agg := c.Aggregator()
	if !agg.layout.fast {
		t.Fatal("the layout of count/sum/min/max/first/last is not fast")
	}
	rng := rand.New(rand.NewPCG(7, 8))
	var fastEncoded, fastDecoded, mutatedFast, mutatedGeneral int
	for run := range 200 {
		st := agg.NewState()
		for range 1 + run%5 {
			r := jsonRecord(codecInput(rng))
			if _, err := c.Process(r); err != nil {
				t.Fatal(err)
			}
			agg.Add(st, r) // an overflow leaves st as it was: fine here
		}
		general, err := st.appendGeneral([]byte{0xAA})
		if err != nil {
			t.Fatal(err)
		}
		if enc, ok := agg.layout.appendFast([]byte{0xAA}, st); ok {
			fastEncoded++
			if !bytes.Equal(enc, general) {
				t.Fatalf("fast encoding %x, general %x", enc, general)
			}
		} else if !bytes.Equal(enc, []byte{0xAA}) {
			t.Fatalf("a refused fast encoding left %x", enc)
		}
		enc := general[1:]
		if checkFastDecode(t, agg, enc) {
			fastDecoded++
		}
		for range 50 {
			m := mutate(rng, enc)
			if checkFastDecode(t, agg, m) {
				mutatedFast++
			} else if agg.NewState().unmarshalGeneral(m, agg.NewState()) == nil {
				mutatedGeneral++
			}
		}
	}
	t.Logf("fast: %d of 200 encoded, %d decoded; mutations: %d decoded fast, %d only by the general codec", fastEncoded, fastDecoded, mutatedFast, mutatedGeneral)
	// Not every fast encoding decodes fast: a first/last integer of 19
	// digits is left to the general decoder (parseSmallInt).
	if fastEncoded < 50 || fastDecoded < fastEncoded/2 || mutatedFast < 50 {
		t.Fatalf("the fast codec was not exercised: %d encoded, %d decoded, %d mutations", fastEncoded, fastDecoded, mutatedFast)
	}
}

// checkFastDecode decodes b with the fast codec and, when it takes b,
// checks that the general codec gives the same state; it reports whether
// the fast codec took b.
func checkFastDecode(t *testing.T, agg *Aggregator, b []byte) bool {
	t.Helper()
	fast := agg.NewState()
	if !agg.layout.decodeFast(b, fast) {
		return false
	}
	general := agg.NewState()
	if err := general.unmarshalGeneral(b, general); err != nil {
		t.Fatalf("fast codec decoded %x, the general one refuses it: %v", b, err)
	}
	fe, _ := fast.appendGeneral(nil)
	ge, _ := general.appendGeneral(nil)
	if !bytes.Equal(fe, ge) || !bytes.Equal(fe, b) {
		t.Fatalf("%x decoded to %x (fast) and %x (general)", b, fe, ge)
	}
	if fo, gout := string(fast.Output("k")), string(general.Output("k")); fo != gout {
		t.Fatalf("%x: output %s (fast), %s (general)", b, fo, gout)
	}
	return true
}

// mutate returns a copy of b with one random change: a byte replaced
// (often by a boundary value), removed, inserted or appended, or the
// copy truncated.
func mutate(rng *rand.Rand, b []byte) []byte {
	m := bytes.Clone(b)
	boundary := []byte{0, 1, 2, 0x7f, 0x80, 0xff, '0', '9', '-'}
	pick := func() byte {
		if rng.IntN(2) == 0 {
			return boundary[rng.IntN(len(boundary))]
		}
		return byte(rng.IntN(256))
	}
	i := rng.IntN(len(m))
	switch rng.IntN(5) {
	case 0, 1:
		m[i] = pick()
	case 2:
		m = append(m[:i], m[i+1:]...)
	case 3:
		m = append(m[:i], append([]byte{pick()}, m[i:]...)...)
	default:
		if rng.IntN(2) == 0 {
			m = m[:i]
		} else {
			m = append(m, pick())
		}
	}
	return m
}

// TestFastCodecDeclines: layouts and states outside the fast form are
// left to the general codec, which still round-trips them.
func TestFastCodecDeclines(t *testing.T) {
	avg := mustCompile(t, keyByStep(`"k"`), aggStep("", val("a", config.AggAvg, "n"))).Aggregator()
	if avg.layout.fast {
		t.Fatal("avg is not a fast function")
	}
	ttl := []config.Step{keyByStep(`"k"`), {Aggregate: &config.Aggregate{TTL: time.Hour, Values: []config.AggregateValue{val("c", config.AggCount, "")}}}}
	if mustCompile(t, ttl...).Aggregator().layout.fast {
		t.Fatal("a layout with a TTL is not fast")
	}
	c := mustCompile(t, fastCodecSteps()...)
	agg := c.Aggregator()
	for _, in := range []string{`{"kk":"k","n":0.5,"o":1}`, `{"kk":"k","n":1,"o":"s"}`, `{"kk":3,"n":1,"o":1}`} {
		st := agg.NewState()
		r := jsonRecord(in)
		if _, err := c.Process(r); err != nil {
			t.Fatal(err)
		}
		if _, err := agg.Add(st, r); err != nil {
			t.Fatal(err)
		}
		if _, ok := agg.layout.appendFast(nil, st); ok {
			t.Fatalf("%s: the fast codec encoded a state it does not know", in)
		}
		enc, _ := st.MarshalBinary()
		if agg.layout.decodeFast(enc, agg.NewState()) {
			t.Fatalf("%s: the fast codec decoded a state it does not know", in)
		}
		back, err := agg.DecodeState(enc)
		if err != nil || string(back.Output("k")) != string(st.Output("k")) {
			t.Fatalf("%s: round trip %v", in, err)
		}
	}
}

// FuzzFastCodec: whatever the fast codec decodes, the general codec
// decodes to the same state.
func FuzzFastCodec(f *testing.F) {
	c := mustCompile(f, fastCodecSteps()...)
	agg := c.Aggregator()
	rng := rand.New(rand.NewPCG(1, 1))
	st := agg.NewState()
	for range 8 {
		r := jsonRecord(codecInput(rng))
		if _, err := c.Process(r); err != nil {
			f.Fatal(err)
		}
		agg.Add(st, r)
		enc, _ := st.MarshalBinary()
		f.Add(enc)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkFastDecode(t, agg, data)
	})
}
