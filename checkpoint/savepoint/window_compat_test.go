package savepoint

import (
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eoflow/pipeline/checkpoint"
)

// windowedJob is baseJob with event time and a tumbling window in place
// of the aggregate: the windowed savepoints of these tests are taken
// from it.
const windowedJob = `name: parity-windows
kafka:
  brokers: [localhost:9092]
checkpoint:
  key_groups: 128
sources:
  - id: numbers
    topics: [numbers, more]
    event_time:
      timestamp: ts
      max_out_of_orderness: 2s
steps:
  - id: parity
    key_by: 'n % 2 == 0 ? "even" : "odd"'
  - id: counts
    window:
      tumbling: 10s
      allowed_lateness: 1s
      values:
        count: count()
        sum: sum(n)
sinks:
  - topic: parity-windows
`

// testWatermark is the watermark of the windowed savepoints and records
// of these tests: 2026-12-02T10:00:00Z.
var testWatermark = time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC).UnixMilli()

// testEventTime is where event time stood at the windowed checkpoint:
// every partition of savepointOf's topics, "more"/1 without a record yet.
func testEventTime() *checkpoint.EventTime {
	w := testWatermark
	return &checkpoint.EventTime{Watermark: w, Partitions: []checkpoint.PartitionTime{
		{Topic: "more", Partition: 0, MaxEventTime: w + 2500},
		{Topic: "more", Partition: 1, MaxEventTime: checkpoint.NoEventTime},
		{Topic: "numbers", Partition: 0, MaxEventTime: w + 2000},
		{Topic: "numbers", Partition: 1, MaxEventTime: w + 7000},
		{Topic: "numbers", Partition: 2, MaxEventTime: w + 4000},
	}}
}

// timedRecordOf is recordOf with event time when the job yaml has it.
func timedRecordOf(t testing.TB, yaml string) *checkpoint.Record {
	t.Helper()
	rec := recordOf(t, yaml)
	if strings.Contains(yaml, "event_time:") {
		rec.EventTime = testEventTime()
		if _, err := checkpoint.EncodeRecord(rec); err != nil {
			t.Fatal(err)
		}
	}
	return rec
}

// timedSavepointOf is savepointOf with event time when the job yaml has
// it.
func timedSavepointOf(t testing.TB, yaml string) *Manifest {
	t.Helper()
	if strings.Contains(yaml, "event_time:") {
		return savepointWith(t, yaml, testEventTime())
	}
	return savepointOf(t, yaml)
}

func replaceIn(t testing.TB, yaml, old, new string) string {
	t.Helper()
	if !strings.Contains(yaml, old) {
		t.Fatalf("no %q in\n%s", old, yaml)
	}
	return strings.Replace(yaml, old, new, 1)
}

// TestCheckRestoreRefusesWindows: each incompatible change of a window is
// refused, from a savepoint and on a plain restart, with a message that
// says exactly what differs and the fix.
func TestCheckRestoreRefusesWindows(t *testing.T) {
	shapeFix := `put back the window the savepoint was taken with; or, to start "counts" empty, give the window a new id and pass --allow-dropped-state`
	valueFix := `put back the key_by and values the savepoint was taken with; or, to start "counts" empty, give the window a new id and pass --allow-dropped-state`
	shape := func(s string) string { return replaceIn(t, windowedJob, "      tumbling: 10s\n", "      "+s+"\n") }
	shapeWas := func(now string) string {
		return `operator "counts": window was tumbling 10s, the config has ` + now + ` (its open windows are stored by their start and end)`
	}
	hopping := replaceIn(t, windowedJob, "      tumbling: 10s\n", "      hopping: {size: 10s, advance: 5s}\n")
	session := replaceIn(t, windowedJob, "      tumbling: 10s\n", "      session: {gap: 30m}\n")
	asAggregate := replaceIn(t, windowedJob, "    window:\n      tumbling: 10s\n      allowed_lateness: 1s\n", "    aggregate:\n")
	tests := []struct {
		name       string
		from, yaml string
		want       []Problem
	}{
		{"tumbling size", windowedJob, shape("tumbling: 5s"), []Problem{{What: shapeWas("tumbling 5s"), Fix: shapeFix}}},
		{"size printed as a duration", windowedJob, shape("tumbling: 90s"), []Problem{{What: shapeWas("tumbling 1m30s"), Fix: shapeFix}}},
		{"tumbling to hopping", windowedJob, shape("hopping: {size: 10s, advance: 5s}"), []Problem{{What: shapeWas("hopping 10s every 5s"), Fix: shapeFix}}},
		{"tumbling to hopping of the same size and advance", windowedJob, shape("hopping: {size: 10s, advance: 10s}"), []Problem{{What: shapeWas("hopping 10s every 10s"), Fix: shapeFix}}},
		{"tumbling to session", windowedJob, shape("session: {gap: 10s}"), []Problem{{What: shapeWas("session gap 10s"), Fix: shapeFix}}},
		{"hopping advance", hopping, replaceIn(t, hopping, "advance: 5s", "advance: 2s"), []Problem{{
			What: `operator "counts": window was hopping 10s every 5s, the config has hopping 10s every 2s (its open windows are stored by their start and end)`, Fix: shapeFix,
		}}},
		{"session gap", session, replaceIn(t, session, "gap: 30m", "gap: 1h"), []Problem{{
			What: `operator "counts": window was session gap 30m0s, the config has session gap 1h0m0s (its open windows are stored by their start and end)`, Fix: shapeFix,
		}}},
		{"key_by", windowedJob, replaceIn(t, windowedJob, `'n % 2 == 0 ? "even" : "odd"'`, `'n % 3'`), []Problem{{
			What: `operator "counts": key_by was 'n % 2 == 0 ? "even" : "odd"', the config has 'n % 3' (its state is stored under the keys the old expression computed)`,
			Fix:  valueFix,
		}}},
		{"value function", windowedJob, replaceIn(t, windowedJob, "sum: sum(n)", "sum: max(n)"), []Problem{{
			What: `operator "counts": value "sum" was sum(n), the config has max(n)`, Fix: valueFix,
		}}},
		{"value renamed", windowedJob, replaceIn(t, windowedJob, "sum: sum(n)", "total: sum(n)"), []Problem{{
			What: `operator "counts": values differ: the savepoint has [count: count(), sum: sum(n)], the config has [count: count(), total: sum(n)]: value "sum" is not in the config; value "total" is not in the savepoint`,
			Fix:  valueFix,
		}}},
		{"shape and value at once", windowedJob, replaceIn(t, shape("tumbling: 1m"), "sum: sum(n)", "sum: sum(x)"), []Problem{
			{What: shapeWas("tumbling 1m0s"), Fix: shapeFix},
			{What: `operator "counts": value "sum" was sum(n), the config has sum(x)`, Fix: valueFix},
		}},
		{"window gone", windowedJob, replaceIn(t, windowedJob, "  - id: counts\n", "  - id: counts-v2\n"), []Problem{{
			What: `window "counts" (1 key) has state in the savepoint but is not in the config`,
			Fix:  "state maps to operators by id (steps[].id): give the window back its id, or pass --allow-dropped-state to start without that state",
		}}},
		{"window to aggregate", windowedJob, asAggregate, []Problem{{
			What: `operator "counts" is a window in the savepoint (1 key) but an aggregate in the config (steps[1])`,
			Fix:  `give the window back the id "counts" and the aggregate another id, or pass --allow-dropped-state to start without the window's state`,
		}}},
		{"aggregate to window", asAggregate, windowedJob, []Problem{{
			What: `operator "counts" is an aggregate in the savepoint (1 key) but a window in the config (steps[1])`,
			Fix:  `give the aggregate back the id "counts" and the window another id, or pass --allow-dropped-state to start without the aggregate's state`,
		}}},
		{"aggregate without event time to window", baseJob, replaceIn(t, windowedJob, "  - id: counts\n", "  - id: sums\n"), []Problem{{
			What: `operator "sums" is an aggregate in the savepoint (1 key) but a window in the config (steps[1])`,
			Fix:  `give the aggregate back the id "sums" and the window another id, or pass --allow-dropped-state to start without the aggregate's state`,
		}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := DescribeConfig(parseConfig(t, tc.yaml))
			plan, err := CheckRestore(timedSavepointOf(t, tc.from), d, RestoreOptions{})
			var inc *IncompatibleError
			if !errors.As(err, &inc) || !errors.Is(err, ErrIncompatible) {
				t.Fatalf("got plan %+v, error %v; want an IncompatibleError", plan, err)
			}
			if !reflect.DeepEqual(inc.Problems, tc.want) {
				t.Errorf("problems:\n got: %q\nwant: %q", inc.Problems, tc.want)
			}
			t.Log(err)
			// A plain restart from the job's own checkpoint refuses the
			// same change with the same problems, and says what to do.
			_, err = CheckRestart(timedRecordOf(t, tc.from), d)
			if !errors.As(err, &inc) || !errors.Is(err, checkpoint.ErrIncompatible) || !inc.Restart || !strings.HasSuffix(err.Error(), RestartFix) {
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

// TestCheckRestoreAllowsWindows: what may change about windows and event
// time changes, and the notes say what the restore does about it.
func TestCheckRestoreAllowsWindows(t *testing.T) {
	base := []checkpoint.SourceOffset{
		{Topic: "more", Partition: 0, Offset: 20}, {Topic: "more", Partition: 1, Offset: 21},
		{Topic: "numbers", Partition: 0, Offset: 10}, {Topic: "numbers", Partition: 1, Offset: 11}, {Topic: "numbers", Partition: 2, Offset: 12},
	}
	topics := []TopicMapping{{From: "more", To: "more", Partitions: 2}, {From: "numbers", To: "numbers", Partitions: 3}}
	tests := []struct {
		name       string
		from, yaml string
		opts       RestoreOptions
		want       RestorePlan
	}{
		{"unchanged", windowedJob, windowedJob, RestoreOptions{Partitions: map[string]int{"numbers": 3, "more": 2}}, RestorePlan{
			Offsets: base, Topics: topics, Restore: []string{"counts"},
		}},
		// Neither is stored: the checkpoint keeps each partition's largest
		// event time, not its watermark, so the new bound applies.
		{"allowed_lateness and max_out_of_orderness", windowedJob,
			replaceIn(t, replaceIn(t, windowedJob, "allowed_lateness: 1s", "allowed_lateness: 1m"), "max_out_of_orderness: 2s", "max_out_of_orderness: 10s"),
			RestoreOptions{}, RestorePlan{Offsets: base, Topics: topics, Restore: []string{"counts"}}},
		{"emit and late records", windowedJob,
			replaceIn(t, windowedJob, "      allowed_lateness: 1s\n", "      allowed_lateness: 1s\n      emit: every_update\n      late_records: drop\n"),
			RestoreOptions{}, RestorePlan{Offsets: base, Topics: topics, Restore: []string{"counts"}}},
		{"values reordered", windowedJob, replaceIn(t, windowedJob, "count: count()\n        sum: sum(n)", "sum: sum(n)\n        count: count()"),
			RestoreOptions{}, RestorePlan{Offsets: base, Topics: topics, Restore: []string{"counts"}, Notes: []string{
				`operator "counts": values reordered: the savepoint has [count, sum], the config has [sum, count]; each value keeps its state`,
			}}},
		{"window dropped for a new one, allowed", windowedJob, replaceIn(t, replaceIn(t, windowedJob, "  - id: counts\n", "  - id: counts-v2\n"), "tumbling: 10s", "tumbling: 1m"),
			RestoreOptions{AllowDroppedState: true}, RestorePlan{
				Offsets: base, Topics: topics, Dropped: []string{"counts"}, Empty: []string{"counts-v2"},
				Notes: []string{
					`state of window "counts" is dropped (--allow-dropped-state)`,
					`window "counts-v2" starts without state`,
				},
			}},
		{"event time gone with the window, allowed", windowedJob, baseJob, RestoreOptions{AllowDroppedState: true}, RestorePlan{
			Offsets: base, Topics: topics, Dropped: []string{"counts"}, Empty: []string{"sums"},
			Notes: []string{
				`the savepoint is of job "parity-windows", this job is "parity-sum"`,
				`state of window "counts" is dropped (--allow-dropped-state)`,
				`aggregate "sums" starts without state`,
				"the savepoint has event time (watermark 2026-12-02T10:00:00Z) but the config's sources have no event_time: it is not used",
			},
		}},
		{"event time new with a window, allowed", baseJob, windowedJob, RestoreOptions{AllowDroppedState: true}, RestorePlan{
			Offsets: base, Topics: topics, Dropped: []string{"sums"}, Empty: []string{"counts"},
			Notes: []string{
				`the savepoint is of job "parity-sum", this job is "parity-windows"`,
				`state of aggregate "sums" is dropped (--allow-dropped-state)`,
				`window "counts" starts without state`,
				"the savepoint has no event time: the watermarks start over, each partition from its first record",
			},
		}},
		{"event time added to an aggregate's sources", baseJob, replaceIn(t, baseJob, "    topics: [numbers, more]\n", "    topics: [numbers, more]\n    event_time: {timestamp: ts}\n"),
			RestoreOptions{}, RestorePlan{Offsets: base, Topics: topics, Restore: []string{"sums"}, Notes: []string{
				"the savepoint has no event time: the watermarks start over, each partition from its first record",
			}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			plan, err := CheckRestore(timedSavepointOf(t, tc.from), DescribeConfig(parseConfig(t, tc.yaml)), tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			plan.Notes = withoutFingerprint(plan.Notes)
			if !reflect.DeepEqual(*plan, tc.want) {
				t.Errorf("plan:\n got: %+v\nwant: %+v", *plan, tc.want)
			}
		})
	}
}

// TestRestartWindowNotes: a plain restart notes event time that appears
// or disappears, as a restore does, and allows changed lateness.
func TestRestartWindowNotes(t *testing.T) {
	timed := replaceIn(t, baseJob, "    topics: [numbers, more]\n", "    topics: [numbers, more]\n    event_time: {timestamp: ts, max_out_of_orderness: 5s}\n")
	for _, tc := range []struct {
		name, from, yaml, want string
	}{
		{"event time removed", timed, baseJob, "the checkpoint has event time (watermark 2026-12-02T10:00:00Z) but the config's sources have no event_time: it is not used"},
		{"event time added", baseJob, timed, "the checkpoint has no event time: the watermarks start over, each partition from its first record"},
		{"out-of-orderness changed", timed, replaceIn(t, timed, "max_out_of_orderness: 5s", "max_out_of_orderness: 1m"), ""},
		{"lateness changed", windowedJob, replaceIn(t, windowedJob, "allowed_lateness: 1s", "allowed_lateness: 0s"), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan, err := CheckRestart(timedRecordOf(t, tc.from), DescribeConfig(parseConfig(t, tc.yaml)))
			if err != nil {
				t.Fatal(err)
			}
			var want []string
			if tc.want != "" {
				want = []string{tc.want}
			}
			if got := withoutFingerprint(plan.Notes); !reflect.DeepEqual(got, want) {
				t.Errorf("notes:\n got: %q\nwant: %q", got, want)
			}
			if len(plan.Restore) != 1 {
				t.Errorf("restore %v", plan.Restore)
			}
		})
	}
}

// TestDroppedOperatorsOfTwoKinds: a message about operators of both
// kinds calls them operators.
func TestDroppedOperatorsOfTwoKinds(t *testing.T) {
	m := savepointOf(t, baseJob)
	m.Operators = append(m.Operators, Operator{ID: "w", Kind: KindWindow, Keys: 2, Aggregate: &AggregateDesc{
		KeyBy: "k", Window: &WindowDesc{Kind: "session", GapMs: 1000}, Values: []Value{{Name: "n", Func: "count"}},
	}})
	d := DescribeConfig(parseConfig(t, replaceIn(t, baseJob, "  - id: sums\n", "  - id: totals\n")))
	_, err := CheckRestore(m, d, RestoreOptions{})
	var inc *IncompatibleError
	want := []Problem{{
		What: `operators "sums" (1 key), "w" (2 keys) have state in the savepoint but are not in the config`,
		Fix:  "state maps to operators by id (steps[].id): give the operator back its id, or pass --allow-dropped-state to start without that state",
	}}
	if !errors.As(err, &inc) || !reflect.DeepEqual(inc.Problems, want) {
		t.Fatalf("got %v\nwant %q", err, want)
	}
	plan, err := CheckRestore(m, d, RestoreOptions{AllowDroppedState: true})
	if err != nil || !slices.Contains(plan.Notes, `state of operators "sums" and "w" is dropped (--allow-dropped-state)`) {
		t.Fatalf("notes %q, %v", plan.Notes, err)
	}
}

// withoutFingerprint is notes without the one about a changed
// fingerprint: which settings the fingerprint covers is config's
// business, not these tests'.
// withoutFingerprint drops the fingerprint note (the config package's
// business, tested there); nil when nothing else is left, so plans compare
// equal whether the note was there or not.
func withoutFingerprint(notes []string) []string {
	rest := slices.DeleteFunc(slices.Clone(notes), func(n string) bool { return strings.HasPrefix(n, "the configuration changed since the ") })
	if len(rest) == 0 {
		return nil
	}
	return rest
}

func jsonOf(v any) (string, error) {
	b, err := json.Marshal(v)
	return string(b), err
}

// TestDescribeWindows: a window step is described with the key_by before
// it and its shape, and goes into the checkpoint record and back
// unchanged, for every shape.
func TestDescribeWindows(t *testing.T) {
	for _, tc := range []struct {
		yaml string
		want WindowDesc
		rec  checkpoint.WindowDesc
		json string
	}{
		{"tumbling: 10s", WindowDesc{Kind: "tumbling", SizeMs: 10000}, checkpoint.WindowDesc{Kind: checkpoint.WindowTumbling, Size: 10000},
			`{"kind":"tumbling","size_ms":10000}`},
		{"hopping: {size: 1m, advance: 15s}", WindowDesc{Kind: "hopping", SizeMs: 60000, AdvanceMs: 15000},
			checkpoint.WindowDesc{Kind: checkpoint.WindowHopping, Size: 60000, Advance: 15000}, `{"kind":"hopping","size_ms":60000,"advance_ms":15000}`},
		{"session: {gap: 30m}", WindowDesc{Kind: "session", GapMs: 1800000}, checkpoint.WindowDesc{Kind: checkpoint.WindowSession, Gap: 1800000},
			`{"kind":"session","gap_ms":1800000}`},
	} {
		d := DescribeConfig(parseConfig(t, replaceIn(t, windowedJob, "tumbling: 10s", tc.yaml)))
		want := OperatorDesc{ID: "counts", Kind: KindWindow, Path: "steps[1]", Aggregate: &AggregateDesc{
			KeyBy: `n % 2 == 0 ? "even" : "odd"`, Window: &tc.want,
			Values: []Value{{Name: "count", Func: "count"}, {Name: "sum", Func: "sum", Arg: "n"}},
		}}
		if got := d.Operator("counts"); got == nil || !reflect.DeepEqual(*got, want) {
			t.Errorf("%s: operator %+v, want %+v", tc.yaml, got, want)
		}
		if src := d.Operator("numbers"); src == nil || !src.EventTime {
			t.Errorf("%s: source %+v has no event time", tc.yaml, src)
		}
		if aggs := d.Aggregates(); len(aggs) != 1 || aggs[0].ID != "counts" {
			t.Errorf("%s: Aggregates() = %+v, want the window", tc.yaml, aggs)
		}
		ops := d.Checkpointed()
		wantRec := checkpoint.OperatorDesc{ID: "counts", Kind: checkpoint.KindWindow, KeyBy: `n % 2 == 0 ? "even" : "odd"`, Window: tc.rec,
			Values: []checkpoint.AggregateValue{{Name: "count", Func: "count"}, {Name: "sum", Func: "sum", Arg: "n"}}}
		if len(ops) != 2 || !reflect.DeepEqual(ops[0], wantRec) || ops[1].ID != "numbers" {
			t.Errorf("%s: checkpointed %+v", tc.yaml, ops)
		}
		back := manifestOf(timedRecordOf(t, replaceIn(t, windowedJob, "tumbling: 10s", tc.yaml))).Operator("counts")
		if back == nil || back.Kind != KindWindow || !reflect.DeepEqual(back.Aggregate, want.Aggregate) {
			t.Errorf("%s: manifest of the record: %+v", tc.yaml, back)
		}
		if b, err := jsonOf(tc.want); err != nil || b != tc.json {
			t.Errorf("%s: JSON %s %v, want %s", tc.yaml, b, err, tc.json)
		}
	}
}
