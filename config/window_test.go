package config

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// windowJob is a windowed job; cases replace its lines.
const windowJob = `name: job
kafka:
  brokers: [localhost:9092]
sources:
  - topics: [in]
    event_time: {timestamp: ts, max_out_of_orderness: 5s}
steps:
  - key_by: k
  - id: per-minute
    window:
      tumbling: 1m
      values: {n: count()}
sinks:
  - topic: out
`

func TestWindowDefaults(t *testing.T) {
	c, err := Parse("c.yaml", []byte(windowJob), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	w := c.Steps[1].Window
	if w.Kind() != "tumbling" || w.Tumbling != time.Minute || w.Emit != EmitOnWindowClose || w.LateRecords != LateSideOutput || w.LateTopic != "job-late" {
		t.Fatalf("defaults: %+v", w)
	}
	if c.Sources[0].EventTime.MaxOutOfOrderness != 5*time.Second || c.Steps[1].Kind() != StepWindow {
		t.Fatalf("event time: %+v", c.Sources[0].EventTime)
	}
	drop, err := Parse("c.yaml", []byte(strings.Replace(windowJob, "      values:", "      late_records: drop\n      values:", 1)), env(nil))
	if err != nil || drop.Steps[1].Window.LateTopic != "" {
		t.Fatalf("drop: %v %+v", err, drop)
	}
}

// The exact problems of bad windows, event time and TTLs.
func TestWindowErrors(t *testing.T) {
	for _, tc := range []struct {
		name, old, new string
		want           []string
	}{
		{"no shape", "      tumbling: 1m\n", "", []string{
			"c.yaml:10:5: steps[1].window: a window needs a shape: tumbling: 5m, hopping: {size: 5m, advance: 1m} or session: {gap: 30m}"}},
		{"two shapes", "      tumbling: 1m\n", "      tumbling: 1m\n      session: {gap: 1m}\n", []string{
			"c.yaml:10:5: steps[1].window: a window has one shape, this one sets tumbling and session: keep one"}},
		{"advance over size", "      tumbling: 1m\n", "      hopping: {size: 1m, advance: 2m}\n", []string{
			"c.yaml:11:36: steps[1].window.hopping.advance: 2m0s is more than size 1m0s: records between two windows would be in none; for windows that do not overlap use tumbling: 1m0s"}},
		{"zero gap", "      tumbling: 1m\n", "      session: {gap: 0s}\n", []string{
			"c.yaml:11:22: steps[1].window.session.gap: must be more than 0, e.g. 1m"}},
		{"sub-millisecond", "      tumbling: 1m\n", "      tumbling: 1500us\n", []string{
			"c.yaml:11:17: steps[1].window.tumbling: 1.5ms is not whole milliseconds: event time is kept in milliseconds, write e.g. 2ms"}},
		{"aggregate emit", "      tumbling: 1m\n", "      tumbling: 1m\n      emit: on_checkpoint\n", []string{
			"c.yaml:12:13: steps[1].window.emit: on_checkpoint is an aggregate's emit mode; a window emits on_window_close (once, when it fires) or every_update (each change)"}},
		{"late topic with drop", "      tumbling: 1m\n", "      tumbling: 1m\n      late_records: drop\n      late_topic: late\n", []string{
			"c.yaml:13:19: steps[1].window.late_topic: late_records: drop writes no late topic: remove late_topic, or set late_records: side_output"}},
		{"late topic is the output", "      tumbling: 1m\n", "      tumbling: 1m\n      late_topic: out\n", []string{
			"c.yaml:12:19: steps[1].window.late_topic: \"out\" is also the output topic of sinks[0]: late records need a topic of their own"}},
		{"no event time", "    event_time: {timestamp: ts, max_out_of_orderness: 5s}\n", "", []string{
			"c.yaml:9:5: steps[1].window: a window needs event time: add \"event_time: {}\" to sources[0] (the Kafka record timestamp), or event_time: {timestamp: <field>}"}},
		{"at most once", "name: job\n", "name: job\nguarantee: at_most_once\n", []string{
			"c.yaml:11:5: steps[1].window: a window fires when a checkpoint's watermark passes its end, and guarantee: at_most_once takes no checkpoints, so nothing would ever be written: use guarantee: at_least_once (outputs may repeat after a crash) or exactly_once"}},
		{"window and aggregate", "sinks:\n", "  - aggregate: {values: {n: count()}}\nsinks:\n", []string{
			`c.yaml:13:5: steps[2].aggregate: follows the window steps[1] (id "per-minute"), and only a sink can read its output: to branch off before it, read what it reads, e.g. from: key_by-0`}},
		{"ttl in days with event time on every source is accepted", "  - id: per-minute\n    window:\n      tumbling: 1m\n      values: {n: count()}\n",
			"  - aggregate: {ttl: 7d, values: {n: count()}}\n", []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			yaml := strings.Replace(windowJob, tc.old, tc.new, 1)
			if yaml == windowJob && tc.old != "" {
				t.Fatal("the case changes nothing")
			}
			_, err := Parse("c.yaml", []byte(yaml), env(nil))
			var got []string
			if err != nil {
				got = strings.Split(strings.TrimSpace(err.Error()), "\n")
			}
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
	twoSources := strings.Replace(windowJob, "sinks:\n", "sinks:\n", 1)
	twoSources = strings.Replace(twoSources, "  - id: per-minute\n    window:\n      tumbling: 1m\n      values: {n: count()}\n", "  - aggregate: {ttl: 7d, values: {n: count()}}\n", 1)
	twoSources = strings.Replace(twoSources, "steps:\n", "  - topics: [in2]\nsteps:\n", 1)
	_, err := Parse("c.yaml", []byte(twoSources), env(nil))
	want := "c.yaml:10:22: steps[1].aggregate.ttl: the TTL runs in event time when the sources have event_time, and 1 of 2 have it: give every source event_time, or none (processing time)"
	if err == nil || strings.TrimSpace(err.Error()) != want {
		t.Fatalf("ttl with event time on one of two sources:\n got %v\nwant %s", err, want)
	}
}

// editWindowJob applies old, new pairs to windowJob, each exactly once.
func editWindowJob(t *testing.T, pairs ...string) string {
	t.Helper()
	yaml := windowJob
	for i := 0; i+1 < len(pairs); i += 2 {
		if strings.Count(yaml, pairs[i]) != 1 {
			t.Fatalf("%q is not in the job exactly once", pairs[i])
		}
		yaml = strings.Replace(yaml, pairs[i], pairs[i+1], 1)
	}
	return yaml
}

// Every other problem a window, event time or TTL can have, one case each:
// the exact text, position and path.
func TestWindowErrorsEach(t *testing.T) {
	const (
		shape     = "      tumbling: 1m\n"
		eventTime = "    event_time: {timestamp: ts, max_out_of_orderness: 5s}\n"
		window    = "  - id: per-minute\n    window:\n      tumbling: 1m\n      values: {n: count()}\n"
		ttl       = "  - aggregate: {ttl: 7d, values: {n: count()}}\n"
	)
	for _, tc := range []struct {
		name  string
		edits []string
		want  []string
	}{
		// Shape.
		{"three shapes", []string{shape, shape + "      hopping: {size: 1m, advance: 1m}\n      session: {gap: 1m}\n"}, []string{
			"c.yaml:10:5: steps[1].window: a window has one shape, this one sets tumbling and hopping and session: keep one"}},
		{"zero advance", []string{shape, "      hopping: {size: 1m, advance: 0s}\n"}, []string{
			"c.yaml:11:36: steps[1].window.hopping.advance: must be more than 0, e.g. 1m"}},
		{"advance left out", []string{shape, "      hopping: {size: 1m}\n"}, []string{
			"c.yaml:11:7: steps[1].window.hopping.advance: must be more than 0, e.g. 1m"}},
		{"advance equal to size is tumbling, and accepted", []string{shape, "      hopping: {size: 1m, advance: 1m}\n"}, nil},
		{"negative size", []string{shape, "      tumbling: -1m\n"}, []string{
			"c.yaml:11:17: steps[1].window.tumbling: duration -1m is negative"}},
		{"less than a millisecond", []string{shape, "      session: {gap: 100us}\n"}, []string{
			"c.yaml:11:22: steps[1].window.session.gap: 100µs is less than a millisecond: event time is kept in milliseconds, write e.g. 1ms"}},
		{"size from the environment", []string{shape, "      tumbling: ${WINDOW:-10s}\n"}, nil},

		// Lateness, emit, late records.
		{"lateness not whole milliseconds", []string{shape, shape + "      allowed_lateness: 2500us\n"}, []string{
			"c.yaml:12:25: steps[1].window.allowed_lateness: 2.5ms is not whole milliseconds: event time is kept in milliseconds, write e.g. 3ms"}},
		{"negative lateness", []string{shape, shape + "      allowed_lateness: -1s\n"}, []string{
			"c.yaml:12:25: steps[1].window.allowed_lateness: duration -1s is negative"}},
		{"every_record is the aggregate's", []string{shape, shape + "      emit: every_record\n"}, []string{
			"c.yaml:12:13: steps[1].window.emit: every_record is an aggregate's emit mode; a window emits on_window_close (once, when it fires) or every_update (each change)"}},
		{"emit typo", []string{shape, shape + "      emit: on_window_clos\n"}, []string{
			`c.yaml:12:13: steps[1].window.emit: unknown emit mode "on_window_clos"; did you mean on_window_close?`}},
		{"emit unknown", []string{shape, shape + "      emit: sometimes\n"}, []string{
			`c.yaml:12:13: steps[1].window.emit: unknown emit mode "sometimes"; allowed: on_window_close, every_update`}},
		{"late_records unknown", []string{shape, shape + "      late_records: ignore\n"}, []string{
			`c.yaml:12:21: steps[1].window.late_records: unknown late_records "ignore"; allowed: side_output, drop`}},
		{"late topic is read", []string{shape, shape + "      late_topic: in\n"}, []string{
			`c.yaml:12:19: steps[1].window.late_topic: "in" is read by sources[0] (id "source-0"): late records need a topic of their own`}},
		{"default late topic is read", []string{"topics: [in]", "topics: [job-late]"}, []string{
			`c.yaml:10:5: steps[1].window.late_topic: "job-late" is read by sources[0] (id "source-0"): late records need a topic of their own`}},
		{"late topic is the dead-letter topic", []string{shape, shape + "      late_topic: job-dead-letter\n"}, []string{
			`c.yaml:12:19: steps[1].window.late_topic: "job-dead-letter" is also the dead-letter topic of sinks[0]: late records need a topic of their own`}},
		{"late topic is internal", []string{shape, shape + "      late_topic: job-state\n"}, []string{
			`c.yaml:12:19: steps[1].window.late_topic: "job-state" is the job's internal state topic`}},

		// Values.
		{"no values", []string{"      values: {n: count()}\n", ""}, []string{
			"c.yaml:10:5: steps[1].window.values: at least one value is required, e.g. count: count()"}},
		{"empty values", []string{"      values: {n: count()}\n", "      values: {}\n"}, []string{
			"c.yaml:12:7: steps[1].window.values: at least one value is required, e.g. count: count()"}},
		{"unknown function", []string{"      values: {n: count()}\n", "      values: {n: cnt()}\n"}, []string{
			`c.yaml:12:19: steps[1].window.values.n: unknown aggregate function "cnt"; allowed: count, sum, min, max, avg, first, last`}},

		// Unknown keys know the new ones.
		{"window key typo", []string{shape, "      tumbing: 1m\n"}, []string{
			"c.yaml:10:5: steps[1].window: a window needs a shape: tumbling: 5m, hopping: {size: 5m, advance: 1m} or session: {gap: 30m}",
			"c.yaml:11:7: steps[1].window.tumbing: unknown field; did you mean tumbling?"}},
		{"step key typo", []string{"    window:\n", "    windw:\n"}, []string{
			"c.yaml:9:5: steps[1]: a step needs one of filter, map, key_by, join, aggregate or window",
			"c.yaml:10:5: steps[1].windw: unknown field; did you mean window?"}},
		{"source key typo", []string{"    event_time:", "    eventtime:"}, []string{
			"c.yaml:6:5: sources[0].eventtime: unknown field; did you mean event_time?",
			`c.yaml:10:5: steps[1].window: a window needs event time: add "event_time: {}" to sources[0] (the Kafka record timestamp), or event_time: {timestamp: <field>}`}},
		{"event_time key typo", []string{"max_out_of_orderness: 5s", "max_out_of_ordernes: 5s"}, []string{
			"c.yaml:6:33: sources[0].event_time.max_out_of_ordernes: unknown field; did you mean max_out_of_orderness?"}},
		{"ttl typo", []string{window, "  - aggregate: {tll: 7d, values: {n: count()}}\n"}, []string{
			"c.yaml:9:17: steps[1].aggregate.tll: unknown field; did you mean ttl?"}},

		// Placement.
		{"no key_by", []string{"  - key_by: k\n", ""}, []string{
			`c.yaml:9:5: steps[0].window: needs a key_by step before it to say what to group by (for one global group: key_by: '"all"')`}},
		{"two windows", []string{"sinks:\n", "  - window: {tumbling: 1m, values: {n: count()}}\nsinks:\n"}, []string{
			`c.yaml:13:5: steps[2].window: follows the window steps[1] (id "per-minute"), and only a sink can read its output: to branch off before it, read what it reads, e.g. from: key_by-0`}},
		{"two windows, each on a branch of its own", []string{"sinks:\n", "  - {id: per-hour, from: key_by-0, window: {tumbling: 1h, values: {n: count()}}}\nsinks:\n  - {from: per-minute, topic: minutely}\n"}, nil},
		{"aggregate, then a window", []string{"  - key_by: k\n", "  - key_by: k\n  - aggregate: {values: {n: count()}}\n"}, []string{
			`c.yaml:11:5: steps[2].window: follows the aggregate steps[1] (id "aggregate-1"), and only a sink can read its output: to branch off before it, read what it reads, e.g. from: key_by-0`}},
		{"window and filter in one step", []string{"    window:\n", "    filter: x\n    window:\n"}, []string{
			"c.yaml:9:5: steps[1]: a step does one thing, this one sets filter and window: split it into one step each"}},

		// Event time.
		{"event_time: with nothing is the Kafka timestamp", []string{eventTime, "    event_time:\n"}, nil},
		{"event_time not a mapping", []string{eventTime, "    event_time: [ts]\n"}, []string{
			"c.yaml:6:17: sources[0].event_time: want a mapping, got a list"}},
		{"two sources without event time, one problem", []string{eventTime, "  - topics: [in2]\n"}, []string{
			`c.yaml:10:5: steps[1].window: a window needs event time: add "event_time: {}" to sources[0] and sources[1] (the Kafka record timestamp), or event_time: {timestamp: <field>}`}},
		{"max_out_of_orderness not whole milliseconds", []string{"max_out_of_orderness: 5s", "max_out_of_orderness: 5500us"}, []string{
			"c.yaml:6:55: sources[0].event_time.max_out_of_orderness: 5.5ms is not whole milliseconds: event time is kept in milliseconds, write e.g. 6ms"}},
		{"idle_timeout not whole milliseconds", []string{"max_out_of_orderness: 5s", "idle_timeout: 1500us"}, []string{
			"c.yaml:6:47: sources[0].event_time.idle_timeout: 1.5ms is not whole milliseconds: event time is kept in milliseconds, write e.g. 2ms"}},
		{"negative max_out_of_orderness", []string{"max_out_of_orderness: 5s", "max_out_of_orderness: -5s"}, []string{
			"c.yaml:6:55: sources[0].event_time.max_out_of_orderness: duration -5s is negative"}},

		// TTL.
		{"ttl not whole milliseconds", []string{window, "  - aggregate: {ttl: 1500us, values: {n: count()}}\n"}, []string{
			"c.yaml:9:22: steps[1].aggregate.ttl: 1.5ms is not whole milliseconds: event time is kept in milliseconds, write e.g. 2ms"}},
		{"negative ttl", []string{window, "  - aggregate: {ttl: -1h, values: {n: count()}}\n"}, []string{
			"c.yaml:9:22: steps[1].aggregate.ttl: duration -1h is negative"}},
		{"ttl under at_most_once", []string{"name: job\n", "name: job\nguarantee: at_most_once\n", window, ttl}, []string{
			"c.yaml:10:22: steps[1].aggregate.ttl: keys expire at checkpoint barriers, and guarantee: at_most_once takes no checkpoints: drop the ttl, or use guarantee: at_least_once or exactly_once"}},
		{"ttl in processing time", []string{eventTime, "", window, ttl}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("c.yaml", []byte(editWindowJob(t, tc.edits...)), env(nil))
			var got []string
			if err != nil {
				got = strings.Split(strings.TrimSpace(err.Error()), "\n")
			}
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

func TestWindowSummary(t *testing.T) {
	const window = "  - id: per-minute\n    window:\n      tumbling: 1m\n      values: {n: count()}\n"
	const head = `job "job": exactly_once, 1 source (1 topic), 2 steps, 1 sink, checkpoint every 1s; `
	for _, tc := range []struct {
		edits []string
		want  string
	}{
		{nil, "tumbling 1m windows in event time, late records to job-late"},
		{[]string{"      tumbling: 1m\n", "      hopping: {size: 1h30m, advance: 90s}\n      allowed_lateness: 1h\n      emit: every_update\n      late_records: drop\n"},
			"hopping 1h30m windows every 1m30s in event time (allowed lateness 1h), emitted on every update, late records dropped"},
		{[]string{"      tumbling: 1m\n", "      session: {gap: 2d}\n      late_topic: late\n"},
			"session windows (gap 2d) in event time, late records to late"},
		{[]string{window, "  - aggregate: {ttl: 7d, values: {n: count()}}\n"},
			"keys expire 7d after their last update, in event time"},
		{[]string{window, "  - aggregate: {ttl: 36h, values: {n: count()}}\n", "    event_time: {timestamp: ts, max_out_of_orderness: 5s}\n", ""},
			"keys expire 36h after their last update, in processing time"},
	} {
		c, err := Parse("c.yaml", []byte(editWindowJob(t, tc.edits...)), env(nil))
		if err != nil {
			t.Fatal(err)
		}
		if got := c.Summary(); got != head+tc.want {
			t.Errorf("Summary() = %s\nwant        %s", got, head+tc.want)
		}
	}
}

func TestWindowFingerprint(t *testing.T) {
	// Jobs without event time, windows or TTLs keep the fingerprints their
	// checkpoints were written with.
	for yaml, want := range map[string]string{
		full:    "04088505813f9ed5c866c058452d51b42ac8eb8914a2fca02f7a586ae00e6195",
		minimal: "3b2c78d38b20f58bd00d43e6a0d2184ece6de3c2e77d76d8069c077e92046397",
	} {
		if got := mustParse(t, yaml, nil).Fingerprint(); got != want {
			t.Errorf("Fingerprint() = %s, was %s", got, want)
		}
	}
	const window = "  - id: per-minute\n    window:\n      tumbling: 1m\n      values: {n: count()}\n"
	base := mustParse(t, windowJob, nil).Fingerprint()
	seen := map[string]string{base: "the base"}
	for _, edits := range [][]string{
		{"tumbling: 1m", "tumbling: 2m"},
		{"tumbling: 1m", "hopping: {size: 1m, advance: 30s}"},
		{"tumbling: 1m", "hopping: {size: 1m, advance: 20s}"},
		{"tumbling: 1m", "session: {gap: 1m}"},
		{"      tumbling: 1m\n", "      tumbling: 1m\n      allowed_lateness: 1s\n"},
		{"      tumbling: 1m\n", "      tumbling: 1m\n      emit: every_update\n"},
		{"      tumbling: 1m\n", "      tumbling: 1m\n      late_records: drop\n"},
		{"      tumbling: 1m\n", "      tumbling: 1m\n      late_topic: late\n"},
		{"{n: count()}", "{n: count(), s: sum(x)}"},
		{"timestamp: ts", "timestamp: ts2"},
		{"max_out_of_orderness: 5s", "max_out_of_orderness: 6s"},
		{"max_out_of_orderness: 5s", "max_out_of_orderness: 5s, idle_timeout: 1m"},
		{window, "  - aggregate: {values: {n: count()}}\n"},
		{window, "  - aggregate: {ttl: 7d, values: {n: count()}}\n"},
		{window, "  - aggregate: {ttl: 8d, values: {n: count()}}\n"},
		{"    event_time: {timestamp: ts, max_out_of_orderness: 5s}\n", "", window, "  - aggregate: {values: {n: count()}}\n"},
	} {
		fp := mustParse(t, editWindowJob(t, edits...), nil).Fingerprint()
		if prev, dup := seen[fp]; dup {
			t.Errorf("%q: the fingerprint of %s", edits, prev)
		}
		seen[fp] = fmt.Sprintf("%q", edits)
	}
}
