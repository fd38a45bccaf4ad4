package savepoint

import (
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/eoflow/pipeline/checkpoint"
	"github.com/eoflow/pipeline/config"
	"github.com/eoflow/pipeline/state"
)

// baseJob is the job the savepoints of these tests are taken from:
// parity-sum reading two topics.
const baseJob = `name: parity-sum
kafka:
  brokers: [localhost:9092]
checkpoint:
  key_groups: 128
sources:
  - id: numbers
    topics: [numbers, more]
steps:
  - id: parity
    key_by: 'n % 2 == 0 ? "even" : "odd"'
  - id: sums
    aggregate:
      values:
        count: count()
        sum: sum(n)
sinks:
  - topic: parity-sums
`

func parseConfig(t testing.TB, yaml string) *config.Config {
	t.Helper()
	cfg, err := config.Parse("job.yaml", []byte(yaml), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatalf("config:\n%s\n%v", yaml, err)
	}
	return cfg
}

// savepointOf writes a savepoint of the job yaml, the way the runtime
// would (DescribeConfig, SourceOffsets, one part per worker), with 3
// partitions of "numbers" and 2 of "more", and returns its manifest as
// Open reads it.
func savepointOf(t testing.TB, yaml string) *Manifest {
	t.Helper()
	return savepointWith(t, yaml, nil)
}

// savepointWith is savepointOf with the checkpoint's event time et (nil:
// none).
func savepointWith(t testing.TB, yaml string, et *checkpoint.EventTime) *Manifest {
	t.Helper()
	d := DescribeConfig(parseConfig(t, yaml))
	dir := filepath.Join(t.TempDir(), "sp")
	w, err := Create(dir, d.Meta(42, testMeta(8).Created), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	for _, op := range d.Aggregates() {
		ow, err := w.Aggregate(op.ID, *op.Aggregate)
		if err != nil {
			t.Fatal(err)
		}
		for wk := range 2 {
			s, _ := state.New[[]byte](op.ID, d.KeyGroups, state.RangeFor(wk, 2, d.KeyGroups), state.BytesCodec{})
			if s.Range().Contains(state.KeyGroupOf([]byte("even"), d.KeyGroups)) {
				s.Put([]byte("even"), []byte{1})
			}
			if err := ow.WriteAll(s.Range(), s.All()); err != nil {
				t.Fatal(err)
			}
		}
	}
	offs, err := d.SourceOffsets([]checkpoint.SourceOffset{
		{Topic: "numbers", Partition: 0, Offset: 10}, {Topic: "numbers", Partition: 1, Offset: 11}, {Topic: "numbers", Partition: 2, Offset: 12},
		{Topic: "more", Partition: 0, Offset: 20}, {Topic: "more", Partition: 1, Offset: 21},
	})
	if err != nil {
		t.Fatal(err)
	}
	for id, o := range offs {
		if err := w.Source(id, o); err != nil {
			t.Fatal(err)
		}
	}
	w.SetEventTime(et)
	if _, err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	r, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	return r.Manifest()
}

// TestCheckRestoreRefuses: each incompatible change is refused with a
// message that says exactly what differs, and the fix.
func TestCheckRestoreRefuses(t *testing.T) {
	m := savepointOf(t, baseJob)
	change := func(old, new string) yamlText {
		if !strings.Contains(baseJob, old) {
			t.Fatalf("baseJob has no %q", old)
		}
		return yamlText(strings.Replace(baseJob, old, new, 1))
	}
	valueFix := `put back the key_by and values the savepoint was taken with; or, to start "sums" empty, give the aggregate a new id and pass --allow-dropped-state`
	tests := []struct {
		name string
		yaml yamlText
		opts RestoreOptions
		want []Problem
	}{
		{"key groups changed", change("key_groups: 128", "key_groups: 64"), RestoreOptions{}, []Problem{{
			What: "key groups: the savepoint has 128, the config has 64",
			Fix:  "set checkpoint.key_groups: 128. The count cannot change for a job's state, because every key's group is hash(key) mod the count; the number of workers may change freely",
		}}},
		{"aggregate gone", change("  - id: sums\n", "  - id: totals\n"), RestoreOptions{}, []Problem{{
			What: `aggregate "sums" (1 key) has state in the savepoint but is not in the config`,
			Fix:  "state maps to operators by id (steps[].id): give the aggregate back its id, or pass --allow-dropped-state to start without that state",
		}}},
		{"aggregate id taken by a filter", change("  - id: parity\n", "  - id: sums\n    filter: n > 0\n  - id: parity\n").
			// the aggregate itself gets a new id
			replaceSecond("  - id: sums\n    aggregate", "  - id: totals\n    aggregate"), RestoreOptions{}, []Problem{{
			What: `operator "sums" is an aggregate in the savepoint (1 key) but a filter step in the config (steps[0])`,
			Fix:  `give the aggregate back the id "sums" and the filter step another id, or pass --allow-dropped-state to start without the aggregate's state`,
		}}},
		{"key_by changed", change(`'n % 2 == 0 ? "even" : "odd"'`, `'n % 3'`), RestoreOptions{}, []Problem{{
			What: `operator "sums": key_by was 'n % 2 == 0 ? "even" : "odd"', the config has 'n % 3' (its state is stored under the keys the old expression computed)`,
			Fix:  valueFix,
		}}},
		{"argument changed", change("sum: sum(n)", "sum: sum(amount)"), RestoreOptions{}, []Problem{{
			What: `operator "sums": value "sum" was sum(n), the config has sum(amount)`, Fix: valueFix,
		}}},
		{"function changed", change("sum: sum(n)", "sum: max(n)"), RestoreOptions{}, []Problem{{
			What: `operator "sums": value "sum" was sum(n), the config has max(n)`, Fix: valueFix,
		}}},
		{"value renamed", change("sum: sum(n)", "total: sum(n)"), RestoreOptions{}, []Problem{{
			What: `operator "sums": values differ: the savepoint has [count: count(), sum: sum(n)], the config has [count: count(), total: sum(n)]: value "sum" is not in the config; value "total" is not in the savepoint`,
			Fix:  valueFix,
		}}},
		{"value added", change("sum: sum(n)", "sum: sum(n)\n        low: min(n)\n        high: max(n)"), RestoreOptions{}, []Problem{{
			What: `operator "sums": values differ: the savepoint has [count: count(), sum: sum(n)], the config has [count: count(), sum: sum(n), low: min(n), high: max(n)]: values "low" and "high" are not in the savepoint`,
			Fix:  valueFix,
		}}},
		{"topic no longer read", change("topics: [numbers, more]", "topics: [numbers]"), RestoreOptions{}, []Problem{{
			What: `savepoint topic "more" is not read by any source of the config (it holds the offsets of 2 partitions, read by source "numbers")`,
			Fix:  "if it moved to another name or cluster, map it with --remap-topic more=NEW; to start without its offsets, pass --allow-dropped-state",
		}}},
		{"topic remapped to one not read", yamlText(baseJob), RestoreOptions{RemapTopics: map[string]string{"more": "more-v2"}}, []Problem{{
			What: `savepoint topic "more" (remapped to "more-v2") is not read by any source of the config (it holds the offsets of 2 partitions, read by source "numbers")`,
			Fix:  "if it moved to another name or cluster, map it with --remap-topic more=NEW; to start without its offsets, pass --allow-dropped-state",
		}}},
		{"remap of a topic the savepoint lacks", yamlText(baseJob), RestoreOptions{RemapTopics: map[string]string{"nubmers": "numbers"}}, []Problem{{
			What: `--remap-topic nubmers=numbers: the savepoint has no topic "nubmers"`,
			Fix:  `the savepoint's topics are "more" and "numbers"`,
		}}},
		{"remap merges two topics", yamlText(baseJob), RestoreOptions{RemapTopics: map[string]string{"more": "numbers"}}, []Problem{{
			What: `savepoint topics "more" and "numbers" would both resume as topic "numbers"`,
			Fix:  "map each savepoint topic to a topic of its own with --remap-topic",
		}}},
		{"partition count changed", yamlText(baseJob), RestoreOptions{Partitions: map[string]int{"numbers": 3, "more": 4}}, []Problem{{
			What: `topic "more" has 2 partitions in the savepoint, but 4 in the cluster`,
			Fix:  "offsets are per partition and cannot carry over to another partition count: restore into a topic with 2 partitions",
		}}},
		{"remapped topic missing from the cluster", change("[numbers, more]", "[numbers, more-v2]"), RestoreOptions{
			RemapTopics: map[string]string{"more": "more-v2"}, Partitions: map[string]int{"numbers": 3},
		}, []Problem{{
			What: `savepoint topic "more" (remapped to "more-v2") does not exist in the cluster`,
			Fix:  `create it with 2 partitions, or map "more" to a topic that exists with --remap-topic`,
		}}},
		{"everything at once", change("key_groups: 128", "key_groups: 256").
			replaceSecond("sum: sum(n)", "sum: sum(x)").replaceSecond("[numbers, more]", "[numbers]"), RestoreOptions{}, []Problem{
			{What: "key groups: the savepoint has 128, the config has 256", Fix: "set checkpoint.key_groups: 128. The count cannot change for a job's state, because every key's group is hash(key) mod the count; the number of workers may change freely"},
			{What: `operator "sums": value "sum" was sum(n), the config has sum(x)`, Fix: valueFix},
			{What: `savepoint topic "more" is not read by any source of the config (it holds the offsets of 2 partitions, read by source "numbers")`, Fix: "if it moved to another name or cluster, map it with --remap-topic more=NEW; to start without its offsets, pass --allow-dropped-state"},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := DescribeConfig(parseConfig(t, string(tc.yaml)))
			plan, err := CheckRestore(m, d, tc.opts)
			var inc *IncompatibleError
			if !errors.As(err, &inc) || !errors.Is(err, ErrIncompatible) {
				t.Fatalf("got plan %+v, error %v; want an IncompatibleError", plan, err)
			}
			if !reflect.DeepEqual(inc.Problems, tc.want) {
				t.Errorf("problems:\n got: %q\nwant: %q", inc.Problems, tc.want)
			}
			t.Log(err)
			if !reflect.DeepEqual(tc.opts, RestoreOptions{}) {
				return // a restart has no options
			}
			// A plain restart from the job's own checkpoint of baseJob
			// refuses the same change with the same problems.
			_, err = CheckRestart(recordOf(t, baseJob), d)
			if !errors.As(err, &inc) || !errors.Is(err, checkpoint.ErrIncompatible) || errors.Is(err, ErrIncompatible) || !inc.Restart {
				t.Fatalf("CheckRestart: %v; want a restart's IncompatibleError", err)
			}
			var want []Problem
			for _, p := range tc.want {
				want = append(want, Problem{What: strings.ReplaceAll(p.What, "savepoint", "checkpoint"), Fix: strings.ReplaceAll(p.Fix, "savepoint", "checkpoint")})
			}
			if !reflect.DeepEqual(inc.Problems, want) {
				t.Errorf("restart problems:\n got: %q\nwant: %q", inc.Problems, want)
			}
		})
	}
}

// recordOf is a checkpoint record of the job yaml, as the runtime writes
// it, holding the offsets and keys of savepointOf's savepoint.
func recordOf(t testing.TB, yaml string) *checkpoint.Record {
	t.Helper()
	d := DescribeConfig(parseConfig(t, yaml))
	rec := &checkpoint.Record{
		ID: 42, Job: d.Job, ConfigFingerprint: d.Fingerprint, KeyGroups: d.KeyGroups, Guarantee: d.Guarantee,
		Offsets: []checkpoint.SourceOffset{
			{Topic: "numbers", Partition: 0, Offset: 10}, {Topic: "numbers", Partition: 1, Offset: 11}, {Topic: "numbers", Partition: 2, Offset: 12},
			{Topic: "more", Partition: 0, Offset: 20}, {Topic: "more", Partition: 1, Offset: 21},
		},
		Operators: d.Checkpointed(),
	}
	for _, op := range rec.Operators {
		rec.OperatorIDs = append(rec.OperatorIDs, op.ID)
		if op.Kind == checkpoint.KindAggregate || op.Kind == checkpoint.KindWindow {
			rec.State = append(rec.State, checkpoint.StateSummary{Operator: op.ID, Keys: 1, Bytes: 5})
		}
	}
	rec.Normalize()
	if _, err := checkpoint.EncodeRecord(rec); err != nil {
		t.Fatal(err)
	}
	return rec
}

// TestCheckRestartAllows: a restart takes what a savepoint restore takes
// without flags (reordered values, a renamed source, a new topic), and
// says so; a record of an older build cannot be checked.
func TestCheckRestartAllows(t *testing.T) {
	rec := recordOf(t, baseJob)
	changed := strings.Replace(strings.Replace(baseJob, "count: count()\n        sum: sum(n)", "sum: sum(n)\n        count: count()", 1),
		"  - id: numbers\n    topics: [numbers, more]\n", "  - id: a\n    topics: [numbers, extra]\n  - id: b\n    topics: [more]\n", 1)
	plan, err := CheckRestart(rec, DescribeConfig(parseConfig(t, changed)))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`operator "sums": values reordered: the checkpoint has [count, sum], the config has [sum, count]; each value keeps its state`,
		`topic "extra" starts at its source's start position`,
	}
	if !reflect.DeepEqual(plan.Restore, []string{"sums"}) || len(plan.Offsets) != 5 || !reflect.DeepEqual(plan.Notes[1:], want) ||
		!strings.HasPrefix(plan.Notes[0], "the configuration changed since the checkpoint") {
		t.Errorf("plan %+v", plan)
	}
	old := recordOf(t, baseJob)
	old.Operators = nil
	if _, err := CheckRestart(old, DescribeConfig(parseConfig(t, changed))); !errors.Is(err, ErrUndescribed) {
		t.Errorf("CheckRestart of a v2 record: %v", err)
	}
}

// yamlText is a job's YAML, with an edit that chains.
type yamlText string

// replaceSecond replaces the last occurrence of old.

func (s yamlText) replaceSecond(old, new string) yamlText {
	i := strings.LastIndex(string(s), old)
	if i < 0 {
		panic("no " + old)
	}
	return s[:i] + yamlText(new) + s[i+len(old):]
}

// TestIncompatibleErrorText pins the text a user reads: one line per
// problem, a fix after each run of problems that share it.
func TestIncompatibleErrorText(t *testing.T) {
	restart := &IncompatibleError{Job: "parity-sum", CheckpointID: 42, Restart: true, Problems: []Problem{{What: "a", Fix: "fix a"}}}
	if want := "checkpoint does not fit the job's configuration (checkpoint 42 of job \"parity-sum\", restarting):\n  - a\n    fix: fix a\n  " + RestartFix; restart.Error() != want {
		t.Errorf("restart:\n got: %s\nwant: %s", restart, want)
	}
	err := &IncompatibleError{Job: "parity-sum", CheckpointID: 42, Problems: []Problem{
		{What: "a", Fix: "fix a"}, {What: "b", Fix: "fix b"}, {What: "c", Fix: "fix b"},
	}}
	want := `savepoint does not fit the job's configuration (savepoint of job "parity-sum" at checkpoint 42):
  - a
    fix: fix a
  - b
  - c
    fix: fix b`
	if err.Error() != want {
		t.Errorf("got:\n%s\nwant:\n%s", err, want)
	}
}

// TestCheckRestoreAllows: what may change, changes, and the plan says what
// the restore will do.
func TestCheckRestoreAllows(t *testing.T) {
	m := savepointOf(t, baseJob)
	offsets := func(more string) []checkpoint.SourceOffset {
		return []checkpoint.SourceOffset{
			{Topic: more, Partition: 0, Offset: 20}, {Topic: more, Partition: 1, Offset: 21},
			{Topic: "numbers", Partition: 0, Offset: 10}, {Topic: "numbers", Partition: 1, Offset: 11}, {Topic: "numbers", Partition: 2, Offset: 12},
		}
	}
	base := offsets("more")
	topics := []TopicMapping{{From: "more", To: "more", Partitions: 2}, {From: "numbers", To: "numbers", Partitions: 3}}
	tests := []struct {
		name string
		yaml string
		opts RestoreOptions
		want RestorePlan
	}{
		{"unchanged", baseJob, RestoreOptions{Partitions: map[string]int{"numbers": 3, "more": 2}}, RestorePlan{
			Offsets: base, Topics: topics, Restore: []string{"sums"},
		}},
		{"a filter added, workers changed, emit changed", strings.Replace(baseJob, "steps:\n", "workers: 7\nsteps:\n  - filter: n >= 0\n", 1) + "", RestoreOptions{},
			RestorePlan{Offsets: base, Topics: topics, Restore: []string{"sums"}, Notes: []string{"the configuration changed since the savepoint (fingerprint FP, now FP)"}}},
		{"source renamed and split", strings.Replace(baseJob, "  - id: numbers\n    topics: [numbers, more]\n", "  - id: a\n    topics: [numbers]\n  - id: b\n    topics: [more]\n", 1), RestoreOptions{},
			RestorePlan{Offsets: base, Topics: topics, Restore: []string{"sums"}, Notes: []string{"the configuration changed since the savepoint (fingerprint FP, now FP)"}}},
		{"moved to other topics and job name", strings.Replace(strings.Replace(baseJob, "[numbers, more]", "[numbers, more-v2, extra]", 1), "name: parity-sum", "name: parity-sum-2", 1),
			RestoreOptions{RemapTopics: map[string]string{"more": "more-v2"}, Partitions: map[string]int{"numbers": 3, "more-v2": 2}},
			RestorePlan{
				Offsets: offsets("more-v2"), Restore: []string{"sums"}, NewTopics: []string{"extra"},
				Topics: []TopicMapping{{From: "more", To: "more-v2", Partitions: 2}, {From: "numbers", To: "numbers", Partitions: 3}},
				Notes: []string{
					`the savepoint is of job "parity-sum", this job is "parity-sum-2"`,
					"the configuration changed since the savepoint (fingerprint FP, now FP)",
					`topic "more" resumes as "more-v2" (2 partitions)`,
					`topic "extra" starts at its source's start position`,
				},
			}},
		{"dropped, allowed", strings.Replace(strings.Replace(baseJob, "  - id: sums\n", "  - id: totals\n", 1), "[numbers, more]", "[numbers]", 1),
			RestoreOptions{AllowDroppedState: true},
			RestorePlan{
				Offsets: base[2:], Topics: topics[1:], Dropped: []string{"sums"}, DroppedTopics: []string{"more"}, Empty: []string{"totals"},
				Notes: []string{
					"the configuration changed since the savepoint (fingerprint FP, now FP)",
					`state of aggregate "sums" is dropped (--allow-dropped-state)`,
					`offsets of topic "more" are dropped (--allow-dropped-state)`,
					`aggregate "totals" starts without state`,
				},
			}},
		{"changed aggregate, allowed to drop under a new id", strings.Replace(strings.Replace(baseJob, "  - id: sums\n", "  - id: sums-v2\n", 1), "sum: sum(n)", "sum: sum(amount)", 1),
			RestoreOptions{AllowDroppedState: true},
			RestorePlan{
				Offsets: base, Topics: topics, Dropped: []string{"sums"}, Empty: []string{"sums-v2"},
				Notes: []string{
					"the configuration changed since the savepoint (fingerprint FP, now FP)",
					`state of aggregate "sums" is dropped (--allow-dropped-state)`,
					`aggregate "sums-v2" starts without state`,
				},
			}},
		{"values reordered", strings.Replace(baseJob, "count: count()\n        sum: sum(n)", "sum: sum(n)\n        count: count()", 1), RestoreOptions{},
			RestorePlan{Offsets: base, Topics: topics, Restore: []string{"sums"}, Notes: []string{
				"the configuration changed since the savepoint (fingerprint FP, now FP)",
				`operator "sums": values reordered: the savepoint has [count, sum], the config has [sum, count]; each value keeps its state`,
			}}},
		{"guarantee changed", baseJob + "guarantee: at_least_once\n", RestoreOptions{},
			RestorePlan{Offsets: base, Topics: topics, Restore: []string{"sums"}, Notes: []string{"the guarantee was exactly_once, now at_least_once"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			plan, err := CheckRestore(m, DescribeConfig(parseConfig(t, tc.yaml)), tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			for i, n := range plan.Notes { // fingerprints are not the point here
				if j := strings.Index(n, "(fingerprint "); j >= 0 {
					plan.Notes[i] = n[:j] + "(fingerprint FP, now FP)"
				}
			}
			if !reflect.DeepEqual(*plan, tc.want) {
				t.Errorf("plan:\n got: %+v\nwant: %+v", *plan, tc.want)
			}
		})
	}
}

// TestStatelessToStateful: a job that had no aggregate gains one; it
// starts empty and the offsets carry over.
func TestStatelessToStateful(t *testing.T) {
	stateless := strings.Replace(baseJob, baseJob[strings.Index(baseJob, "steps:"):strings.Index(baseJob, "sinks:")], "steps:\n  - filter: n > 0\n", 1)
	m := savepointOf(t, stateless)
	plan, err := CheckRestore(m, DescribeConfig(parseConfig(t, baseJob)), RestoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(plan.Empty, []string{"sums"}) || len(plan.Restore) != 0 || len(plan.Offsets) != 5 {
		t.Errorf("plan %+v", plan)
	}
}

func TestDescribeConfig(t *testing.T) {
	cfg := parseConfig(t, strings.Replace(baseJob, "steps:\n", "steps:\n  - key_by: first\n  - filter: n > 0\n", 1))
	d := DescribeConfig(cfg)
	want := []OperatorDesc{
		{ID: "numbers", Kind: KindSource, Path: "sources[0]", Topics: []string{"more", "numbers"}},
		{ID: "key_by-0", Kind: "key_by", Path: "steps[0]"},
		{ID: "filter-1", Kind: "filter", Path: "steps[1]"},
		{ID: "parity", Kind: "key_by", Path: "steps[2]"},
		{ID: "sums", Kind: KindAggregate, Path: "steps[3]", Aggregate: &AggregateDesc{
			KeyBy:  `n % 2 == 0 ? "even" : "odd"`, // the last key_by before it
			Values: []Value{{Name: "count", Func: "count"}, {Name: "sum", Func: "sum", Arg: "n"}},
		}},
	}
	if !reflect.DeepEqual(d.Operators, want) {
		t.Errorf("operators:\n got: %+v\nwant: %+v", d.Operators, want)
	}
	if d.Job != "parity-sum" || d.KeyGroups != 128 || d.Guarantee != "exactly_once" || d.Fingerprint != cfg.Fingerprint() {
		t.Errorf("descriptor %+v", d)
	}
	if _, err := d.SourceOffsets([]checkpoint.SourceOffset{{Topic: "elsewhere"}}); err == nil || !strings.Contains(err.Error(), `topics "elsewhere" that no source`) {
		t.Errorf("SourceOffsets of an unknown topic: %v", err)
	}
}
