package operator

import (
	"fmt"
	"testing"
)

// Every stateless step counts the records that reached it, passed it,
// were dropped and failed there, whether or not a sink reads it: a filter
// that feeds only a key_by and an aggregate, steps shared by two branches
// (counted once, not once per branch), a merge (each input's records
// counted), a linear job's steps over two sources, and a failure.
func TestTakeStepCounts(t *testing.T) {
	for _, tc := range []struct {
		name   string
		yaml   string
		values []string
		// want by step id; steps not named must count nothing.
		want map[string]StepCount
	}{{
		name: "a filter that only an aggregate reads, fanned out to two branches",
		yaml: `name: job
kafka: {brokers: [localhost:9092]}
sources: [{id: numbers, topics: [numbers]}]
steps:
  - {id: small, from: numbers, filter: 'n < 5'}
  - {id: by-parity, from: small, key_by: 'n % 2'}
  - {id: parity-sums, aggregate: {values: {count: count()}}}
  - {id: by-mod3, from: small, key_by: 'n % 3'}
  - {id: mod3-sums, aggregate: {values: {count: count()}}}
  - {id: tens, from: numbers, filter: 'n % 10 == 0'}
sinks:
  - {from: parity-sums, topic: a}
  - {from: mod3-sums, topic: b}
  - {from: tens, topic: c}
`,
		values: []string{`{"n": 1}`, `{"n": 2}`, `{"n": 10}`, `{"n": 20}`, `{"n": 7}`, `{"n": "x"}`},
		want: map[string]StepCount{
			// "x" < 5 fails: a dead letter of small's, once.
			"small":     {In: 6, Out: 2, Dropped: 3, Failed: 1},
			"by-parity": {In: 2, Out: 2},
			"by-mod3":   {In: 2, Out: 2},
			// "x" % 10 fails too.
			"tens": {In: 6, Out: 2, Dropped: 3, Failed: 1},
		},
	}, {
		name: "a merge of two branches of one source",
		yaml: `name: job
kafka: {brokers: [localhost:9092]}
sources: [{id: numbers, topics: [numbers]}]
steps:
  - {id: odd, from: numbers, filter: 'n % 2 == 1'}
  - {id: big, from: numbers, filter: 'n > 2'}
  - {id: both, from: [odd, big], map: {n: n}}
  - {id: by-n, key_by: 'n'}
  - {id: sums, aggregate: {values: {count: count()}}}
sinks: [{from: sums, topic: a}]
`,
		values: []string{`{"n": 1}`, `{"n": 2}`, `{"n": 3}`, `{"n": 4}`},
		want: map[string]StepCount{
			"odd":  {In: 4, Out: 2, Dropped: 2},
			"big":  {In: 4, Out: 2, Dropped: 2},
			"both": {In: 4, Out: 4},
			"by-n": {In: 4, Out: 4},
		},
	}, {
		name: "a linear job of two sources, a value not JSON",
		yaml: `name: job
kafka: {brokers: [localhost:9092]}
sources: [{id: numbers, topics: [numbers]}, {id: more, topics: [more]}]
steps:
  - {id: small, filter: 'n < 3'}
  - {id: by-n, key_by: 'n'}
  - {id: sums, aggregate: {values: {sum: sum(n)}}}
sinks: [{topic: a}]
`,
		// A value that is not JSON is the first step's dead letter in a
		// linear job, as its error names that step.
		values: []string{`{"n": 1}`, `{"n": 2}`, `{"n": 3}`, `nope`},
		want: map[string]StepCount{
			"small": {In: 8, Out: 4, Dropped: 2, Failed: 2},
			"by-n":  {In: 4, Out: 4},
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := parseJob(t, tc.yaml)
			g, err := CompileGraph(cfg)
			if err != nil {
				t.Fatal(err)
			}
			b := g.NewBranches()
			for src := range cfg.Sources {
				for _, v := range tc.values {
					r := &Record{Value: []byte(v), Topic: cfg.Sources[src].Topics[0]}
					if derr := b.Process(src, r, func() *Record { return new(Record) }, func(int, int, *Record, *RecordError) {}); derr != nil {
						t.Fatalf("%s: %v", v, derr)
					}
				}
			}
			counts := make([]StepCount, len(cfg.Steps))
			b.TakeStepCounts(counts)
			for i, s := range cfg.Steps {
				if got, want := counts[i], tc.want[s.ID]; got != want {
					t.Errorf("%s: %+v, want %+v", s.ID, got, want)
				}
			}
			// Taken: the next call adds nothing.
			again := make([]StepCount, len(cfg.Steps))
			b.TakeStepCounts(again)
			if fmt.Sprint(again) != fmt.Sprint(make([]StepCount, len(cfg.Steps))) {
				t.Errorf("counted again: %+v", again)
			}
		})
	}
}

// The keyed side of group mode runs a route again for a record the source
// side already counted: ProcessRoute does not count it.
func TestProcessRouteDoesNotCount(t *testing.T) {
	cfg := parseJob(t, branchingJob)
	g, err := CompileGraph(cfg)
	if err != nil {
		t.Fatal(err)
	}
	b := g.NewBranches()
	for route := range g.Routes(0) {
		if _, _, err := b.ProcessRoute(0, route, &Record{Value: []byte(`{"n": 4, "x": 1}`), Topic: "numbers"}); err != nil {
			t.Fatal(err)
		}
	}
	counts := make([]StepCount, len(cfg.Steps))
	b.TakeStepCounts(counts)
	for i, c := range counts {
		if c != (StepCount{}) {
			t.Errorf("%s counted %+v", cfg.Steps[i].ID, c)
		}
	}
}
