package operator

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/eoflow/pipeline/config"
)

const branchingJob = `name: job
kafka:
  brokers: [localhost:9092]
sources:
  - id: numbers
    topics: [numbers]
steps:
  - id: by-parity
    from: numbers
    key_by: 'n % 2 == 0 ? "even" : "odd"'
  - id: parity-sums
    aggregate: {values: {count: count(), sum: sum(n)}}
  - id: by-mod3
    from: numbers
    key_by: 'string(n % 3)'
  - id: mod3-sums
    aggregate: {values: {count: count(), sum: sum(n)}}
  - id: tens
    from: numbers
    filter: 'n % 10 == 0'
  - id: doubled
    from: numbers
    map: {n: n * 2, was: n}
  - id: needs-x
    from: numbers
    filter: 'x > 0'
sinks:
  - {from: parity-sums, topic: parity-sums}
  - {from: mod3-sums, topic: mod3-sums}
  - {from: tens, topic: tens}
  - {from: [doubled, tens], topic: doubled-and-tens}
  - {from: needs-x, topic: xs}
`

func parseJob(t *testing.T, yaml string) *config.Config {
	t.Helper()
	cfg, err := config.Parse("job.yaml", []byte(yaml), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// delivery is what one route delivered: its target and the record's
// group key and fields, or the error that stopped it.
type delivery struct {
	target string
	key    string
	fields string
	err    string
}

func processAll(t *testing.T, b *Branches, g *Graph, source int, value string) []delivery {
	t.Helper()
	r := &Record{Value: []byte(value), Topic: "numbers"}
	var got []delivery
	derr := b.Process(source, r, func() *Record { return new(Record) }, func(_, target int, rec *Record, err *RecordError) {
		d := delivery{target: g.Targets()[target].ID}
		if err != nil {
			d.err = err.Step + ": " + err.Reason
		} else {
			d.key = rec.GroupKey
			fields, ferr := rec.Fields()
			if ferr != nil {
				t.Fatal(ferr)
			}
			names := slices.Sorted(func(yield func(string) bool) {
				for k := range fields {
					if !strings.HasPrefix(k, "_") && !yield(k) {
						return
					}
				}
			})
			var parts []string
			for _, n := range names {
				parts = append(parts, fmt.Sprintf("%s=%v", n, fields[n]))
			}
			d.fields = strings.Join(parts, " ")
		}
		got = append(got, d)
	})
	if derr != nil {
		got = append(got, delivery{err: "decode: " + derr.Reason})
	}
	slices.SortFunc(got, func(a, b delivery) int { return strings.Compare(a.target+a.err, b.target+b.err) })
	return got
}

func TestGraphRoutesEachBranch(t *testing.T) {
	g, err := CompileGraph(parseJob(t, branchingJob))
	if err != nil {
		t.Fatal(err)
	}
	if g.Linear() != nil {
		t.Fatal("a branching job compiled as linear")
	}
	var targets []string
	for _, tg := range g.Targets() {
		targets = append(targets, fmt.Sprintf("%s keyed=%v sinks=%v", tg.ID, tg.Keyed(), tg.Sinks))
	}
	wantTargets := []string{
		"parity-sums keyed=true sinks=[0]",
		"mod3-sums keyed=true sinks=[1]",
		"tens keyed=false sinks=[2 3]",
		"doubled keyed=false sinks=[3]",
		"needs-x keyed=false sinks=[4]",
	}
	if !slices.Equal(targets, wantTargets) {
		t.Errorf("targets:\n%s\nwant:\n%s", strings.Join(targets, "\n"), strings.Join(wantTargets, "\n"))
	}
	if n := g.Routes(0); n != 5 {
		t.Errorf("%d routes, want 5", n)
	}
	b := g.NewBranches()
	for _, tc := range []struct {
		value string
		want  []delivery
	}{
		{`{"n": 30, "x": 1}`, []delivery{
			{target: "doubled", fields: "n=60 was=30"},
			{target: "mod3-sums", key: "0", fields: "n=30 x=1"},
			{target: "needs-x", fields: "n=30 x=1"},
			{target: "parity-sums", key: "even", fields: "n=30 x=1"},
			{target: "tens", fields: "n=30 x=1"},
		}},
		// The filter of one branch drops it; another branch fails on it
		// (a dead letter of that branch) while the rest go on.
		{`{"n": 7}`, []delivery{
			{target: "doubled", fields: "n=14 was=7"},
			{target: "mod3-sums", key: "1", fields: "n=7"},
			{target: "needs-x", err: "steps[6].filter: missing field x"},
			{target: "parity-sums", key: "odd", fields: "n=7"},
		}},
		// A value that does not decode fails every route once.
		{`{"n": `, []delivery{{err: "decode: unexpected end of JSON input at offset 6"}}},
	} {
		got := processAll(t, b, g, 0, tc.value)
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s:\ngot  %+v\nwant %+v", tc.value, got, tc.want)
		}
	}
}

// A linear job is its one Chain: every source's one route goes through
// every step to the one target, which every sink reads.
func TestLinearGraphIsTheChain(t *testing.T) {
	cfg := parseJob(t, `name: job
kafka:
  brokers: [localhost:9092]
sources:
  - {id: a, topics: [a]}
  - {id: b, topics: [b]}
steps:
  - filter: 'n > 1'
  - key_by: 'string(n % 2)'
  - {id: sums, aggregate: {values: {s: sum(n)}}}
sinks:
  - topic: out
  - topic: out2
`)
	g, err := CompileGraph(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if g.Linear() == nil {
		t.Fatal("a job without from: did not compile as its Chain")
	}
	ts := g.Targets()
	if len(ts) != 1 || ts[0].ID != "sums" || !ts[0].Keyed() || !slices.Equal(ts[0].Sinks, []int{0, 1}) {
		t.Errorf("targets %+v, want sums, keyed, read by both sinks", ts)
	}
	b := g.NewBranches()
	if b.Linear() == nil {
		t.Error("the evaluator of a linear job has no Chain")
	}
	for src := range 2 {
		got := processAll(t, b, g, src, `{"n": 3}`)
		want := []delivery{{target: "sums", key: "1", fields: "n=3"}}
		if !slices.Equal(got, want) {
			t.Errorf("source %d: got %+v, want %+v", src, got, want)
		}
	}
}

// Each branch's record is its own: workers of different branches read
// them at once (the race detector checks), and what one branch's
// expressions write into its record shows in no other.
func TestBranchRecordsAreIndependent(t *testing.T) {
	g, err := CompileGraph(parseJob(t, branchingJob))
	if err != nil {
		t.Fatal(err)
	}
	b := g.NewBranches()
	var recs []*Record
	r := &Record{Value: []byte(`{"n": 30, "x": 1, "pad": "` + strings.Repeat("y", 100) + `"}`), Topic: "numbers"}
	if derr := b.Process(0, r, func() *Record { return new(Record) }, func(_, target int, rec *Record, err *RecordError) {
		if err == nil {
			recs = append(recs, rec)
		}
	}); derr != nil {
		t.Fatal(derr)
	}
	var wg sync.WaitGroup
	for _, rec := range recs {
		wg.Go(func() {
			for range 100 {
				e, _ := CompileExpr("k", `_key + string(n)`)
				if _, err := e.Eval(rec); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	for i, a := range recs {
		for _, c := range recs[i+1:] {
			if a == c {
				t.Fatal("two branches share one record")
			}
		}
	}
}

// A branch of the integer path keys and reads a record as the general
// path would: from the bytes when no branch decodes it, from the decoded
// fields when one does. Wherever it declines, the general path takes the
// record, with the same key.
func TestGraphIntPathMatchesGeneral(t *testing.T) {
	const job = `name: job
kafka: {brokers: [localhost:9092]}
sources: [{id: in, topics: [in]}]
steps:
  - {id: by-k, from: in, key_by: k}
  - {id: sums, aggregate: {values: {n: count(), s: sum(x), l: last(y)}}}
  - {id: by-x, from: in, key_by: '${OTHER}'}
  - {id: sums-x, aggregate: {values: {n: count(), s: sum(x)}}}
sinks:
  - {from: sums, topic: a}
  - {from: sums-x, topic: b}
`
	values := []string{
		`{"k":"a","x":1,"y":2}`, `{"k":"a\u00e9","x":1,"y":2}`, `{"k":"a\"b","x":-3,"y":0}`,
		`{"k":"a","x":1.5,"y":2}`, `{"k":"a","x":1e3,"y":2}`, `{"k":7,"x":1,"y":2}`, `{"k":true,"x":1,"y":2}`,
		`{"k":"a","y":2}`, `{"k":"a","x":"1","y":2}`, `{"k":"a","x":9223372036854775807,"y":-9223372036854775808}`,
		`{"k":"a","x":9223372036854775808,"y":1}`, `{"k":"","x":0,"y":0}`, `{"x":1,"y":2,"k":"z","k":"w"}`,
	}
	for _, other := range []string{"x % 3", "k"} { // a branch that decodes, and one of the integer path too
		cfg, err := config.Parse("job.yaml", []byte(job), func(k string) (string, bool) { return other, k == "OTHER" })
		if err != nil {
			t.Fatal(err)
		}
		g, err := CompileGraph(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if g.routes[0][0].chain.ints == nil {
			t.Fatal("the branch keyed by k has no integer path")
		}
		general, err := Compile(cfg.Steps[:2])
		if err != nil {
			t.Fatal(err)
		}
		general.ints, general.agg.ints = nil, nil
		b := g.NewBranches()
		for _, v := range values {
			var got *Record
			var gotErr *RecordError
			r := &Record{Value: []byte(v), Topic: "in"}
			derr := b.Process(0, r, func() *Record { return new(Record) }, func(route, _ int, rec *Record, err *RecordError) {
				if route == 0 {
					got, gotErr = rec, err
				}
			})
			want := &Record{Value: []byte(v), Topic: "in"}
			keep, werr := general.Process(want)
			switch {
			case derr != nil:
				if werr == nil {
					t.Errorf("%s (%s): the graph failed to decode it (%v), the general path took it", v, other, derr)
				}
			case werr != nil || !keep:
				if gotErr == nil {
					t.Errorf("%s (%s): the general path failed (%v) where the graph's branch passed it", v, other, werr)
				}
			case gotErr != nil || got == nil:
				t.Errorf("%s (%s): the branch failed (%v) where the general path passed it", v, other, gotErr)
			case got.GroupKey != want.GroupKey || got.keyKind != want.keyKind:
				t.Errorf("%s (%s): key %q (%v), the general path %q (%v)", v, other, got.GroupKey, got.keyKind, want.GroupKey, want.keyKind)
			case got.intsRead:
				for j, f := range g.routes[0][0].chain.ints.fields {
					fv, _ := want.field(f)
					if n, ok := fv.(int); !ok || int64(n) != got.ints[j] {
						t.Errorf("%s (%s): field %s read as %d, the general path decoded %v", v, other, f, got.ints[j], fv)
					}
				}
			}
		}
	}
}
