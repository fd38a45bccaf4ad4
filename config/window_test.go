package config

import (
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
			"c.yaml:13:5: steps[2].aggregate: a job has at most one aggregate; steps[1] is one already"}},
		{"ttl with event time on some sources", "  - id: per-minute\n    window:\n      tumbling: 1m\n      values: {n: count()}\n",
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
