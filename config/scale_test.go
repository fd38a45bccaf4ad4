package config

import (
	"strings"
	"testing"
	"time"
)

// scaleJob is a keyed job in group mode; cases replace its lines.
const scaleJob = `name: job
kafka:
  brokers: [localhost:9092]
sources:
  - topics: [in]
steps:
  - key_by: k
  - aggregate: {values: {n: count()}}
sinks:
  - topic: out
scale:
  mode: group
`

func TestScaleDefaults(t *testing.T) {
	c, err := Parse("c.yaml", []byte(scaleJob), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.Scale != (Scale{Mode: ScaleGroup, Partitions: 32, SessionTimeout: 10 * time.Second}) {
		t.Fatalf("defaults: %+v", c.Scale)
	}
	few, err := Parse("c.yaml", []byte(strings.Replace(scaleJob, "kafka:", "checkpoint: {key_groups: 8}\nkafka:", 1)), env(nil))
	if err != nil || few.Scale.Partitions != 8 {
		t.Fatalf("with 8 key groups: %v %+v", err, few)
	}
	single, err := Parse("c.yaml", []byte(strings.Replace(scaleJob, "scale:\n  mode: group\n", "", 1)), env(nil))
	if err != nil || single.Scale.Mode != ScaleSingle {
		t.Fatalf("without scale: %v %+v", err, single)
	}
}

// The exact problems of a bad scale section.
func TestScaleErrors(t *testing.T) {
	for _, tc := range []struct {
		name, old, new string
		want           []string
	}{
		{"unknown mode", "  mode: group\n", "  mode: cluster\n", []string{
			`c.yaml:12:9: scale.mode: unknown mode "cluster"; allowed: single, group`}},
		{"typo", "  mode: group\n", "  mode: grop\n", []string{
			`c.yaml:12:9: scale.mode: unknown mode "grop"; did you mean group?`}},
		{"too many partitions", "  mode: group\n", "  mode: group\n  partitions: 200\n", []string{
			"c.yaml:13:15: scale.partitions: 200 is out of range: want 1 to checkpoint.key_groups (128), since each partition owns at least one key group"}},
		{"no partitions", "  mode: group\n", "  mode: group\n  partitions: 0\n", []string{
			"c.yaml:13:15: scale.partitions: 0 is out of range: want 1 to checkpoint.key_groups (128), since each partition owns at least one key group"}},
		{"short session", "  mode: group\n", "  mode: group\n  session_timeout: 500ms\n", []string{
			"c.yaml:13:20: scale.session_timeout: 500ms is too short: at least 1s (the brokers' default minimum is 6s)"}},
		{"at most once", "name: job\n", "name: job\nguarantee: at_most_once\n", []string{
			"c.yaml:13:9: scale.mode: group mode needs checkpoints, which at_most_once does not take; an at_most_once job already shares its partitions among every process started with the same name (its consumer group): use scale.mode: single"}},
		{"event time and a window", "  - topics: [in]\nsteps:\n  - key_by: k\n  - aggregate: {values: {n: count()}}\n",
			"  - topics: [in]\n    event_time: {}\nsteps:\n  - key_by: k\n  - window: {tumbling: 10s, values: {n: count()}}\n", []string{}},
		{"event time", "  - topics: [in]\n", "  - topics: [in]\n    event_time: {}\n", []string{}},
		{"a sink on the repartition topic", "  - topic: out\n", "  - topic: job-repartition\n", []string{
			`c.yaml:10:12: sinks[0].topic: "job-repartition" is the job's internal repartition topic`}},
		{"co-partitioned", "  mode: group\n", "  mode: group\n  key_by_is_record_key: true\n", []string{}},
		{"co-partitioned in single mode", "  mode: group\n", "  mode: single\n  key_by_is_record_key: true\n", []string{
			"c.yaml:13:25: scale.key_by_is_record_key: only group mode repartitions: set scale.mode: group, or remove it"}},
		{"co-partitioned without key_by", "  - key_by: k\n  - aggregate: {values: {n: count()}}\nsinks:\n  - topic: out\nscale:\n  mode: group\n",
			"  - filter: n > 0\nsinks:\n  - topic: out\nscale:\n  mode: group\n  key_by_is_record_key: true\n", []string{
				"c.yaml:12:25: scale.key_by_is_record_key: the job has no key_by step: nothing is repartitioned, remove it"}},
		{"co-partitioned over two topics", "  - topics: [in]\n", "  - topics: [in, in2]\n", nil},
		{"co-partitioned with event time", "  - topics: [in]\n", "  - topics: [in]\n    event_time: {}\n", nil},
		{"co-partitioned with windows", "  - topics: [in]\nsteps:\n  - key_by: k\n  - aggregate: {values: {n: count()}}\n",
			"  - topics: [in]\n    event_time: {idle_timeout: 1m}\nsteps:\n  - key_by: k\n  - window: {session: {gap: 10s}, allowed_lateness: 1s, late_records: side_output, late_topic: late, values: {n: count()}}\n", nil},
		{"stateless group job", "  - key_by: k\n  - aggregate: {values: {n: count()}}\n", "  - filter: n > 0\n", []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			yaml := strings.Replace(scaleJob, tc.old, tc.new, 1)
			if strings.HasPrefix(tc.name, "co-partitioned ") && tc.want == nil {
				yaml = strings.Replace(yaml, "  mode: group\n", "  mode: group\n  key_by_is_record_key: true\n", 1)
				tc.want = map[string][]string{
					"co-partitioned over two topics": {"c.yaml:13:25: scale.key_by_is_record_key: needs exactly one source topic (the job reads 2): the group deals each topic's partitions out on its own, so one key's partitions of two topics could go to two processes"},
					"co-partitioned with event time": {},
					"co-partitioned with windows":    {},
				}[tc.name]
			}
			if yaml == scaleJob {
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
}

// TestScaleSummarySaysWhatRepartitions: pipeline validate's line tells a
// group-mode job that repartitions from one that does not.
func TestScaleSummarySaysWhatRepartitions(t *testing.T) {
	for _, tc := range []struct{ name, old, new, want string }{
		{"keyed", "", "", "; repartitions every keyed record through job-repartition (32 partitions)"},
		{"co-partitioned", "  mode: group\n", "  mode: group\n  key_by_is_record_key: true\n",
			"; no repartition: the record key is the key_by value (scale.key_by_is_record_key, checked per record)"},
		{"stateless", "  - key_by: k\n  - aggregate: {values: {n: count()}}\n", "  - filter: n > 0\n",
			"; no key_by: no repartition (each process runs the steps on the partitions it reads)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse("c.yaml", []byte(strings.Replace(scaleJob, tc.old, tc.new, 1)), env(nil))
			if err != nil {
				t.Fatal(err)
			}
			if s := c.Summary(); !strings.HasSuffix(s, tc.want) {
				t.Fatalf("summary %q does not end with %q", s, tc.want)
			}
		})
	}
	windows := strings.NewReplacer("  mode: group\n", "  mode: group\n  key_by_is_record_key: true\n",
		"  - topics: [in]\n", "  - topics: [in]\n    event_time: {}\n",
		"  - aggregate: {values: {n: count()}}\n", "  - window: {tumbling: 10s, values: {n: count()}}\n").Replace(scaleJob)
	cw, err := Parse("c.yaml", []byte(windows), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if s, want := cw.Summary(), "; no repartition: the record key is the key_by value (scale.key_by_is_record_key, checked per record); each process fires its windows at the least watermark of the source partitions it reads; tumbling 10s windows"; !strings.Contains(s, want) {
		t.Fatalf("co-partitioned windows: summary %q does not say %q", s, want)
	}
	single, err := Parse("c.yaml", []byte(strings.Replace(scaleJob, "  mode: group\n", "  mode: single\n", 1)), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if s := single.Summary(); strings.Contains(s, "repartition") {
		t.Fatalf("single mode's summary speaks of repartitioning: %q", s)
	}
}

// A co-partitioned job runs a join as of event time: validate takes it,
// and with windows behind it the summary says the watermark waits for
// what the join holds.
func TestCopartitionedJoinAsOfEventTime(t *testing.T) {
	timed := strings.Replace(enriched, "topics: [orders]\n", "topics: [orders]\n    event_time: {}\n", 1)
	asOf := strings.Replace(timed, "how: left}", "how: left, time: event_time, history: 1h}", 1)
	group := "scale:\n  mode: group\n  key_by_is_record_key: true\n"
	c, err := Parse("c.yaml", []byte(asOf+group), env(nil))
	if err != nil {
		t.Fatalf("a co-partitioned join as of event time: %v", err)
	}
	if s, want := c.Summary(), "no repartition: the record key is the key_by value"; !strings.Contains(s, want) {
		t.Fatalf("summary %q does not say %q", s, want)
	}
	windowed := strings.Replace(asOf, "  - aggregate: {values: {n: count()}}\n", "  - window: {tumbling: 10s, values: {n: count()}}\n", 1)
	cw, err := Parse("c.yaml", []byte(windowed+group), env(nil))
	if err != nil {
		t.Fatalf("co-partitioned windows behind a join as of event time: %v", err)
	}
	if s, want := cw.Summary(), "each process fires its windows at the least watermark of the source partitions it reads, never past a record its join as of event time holds"; !strings.Contains(s, want) {
		t.Fatalf("summary %q does not say %q", s, want)
	}
	inProcessingTime := timed + group
	if _, err := Parse("c.yaml", []byte(inProcessingTime), env(nil)); err != nil {
		t.Fatalf("a join in processing time with event time on the stream: %v", err)
	}
}
