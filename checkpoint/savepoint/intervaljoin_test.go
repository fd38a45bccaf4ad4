package savepoint

import (
	"strings"
	"testing"
)

// intervalJob is a job with an interval join of its two sources.
const intervalJob = `name: j
kafka: {brokers: [localhost:9092]}
sources:
  - {id: numbers, topics: [numbers], event_time: {}}
  - {id: more, topics: [more], event_time: {}}
steps:
  - id: pairs
    from: numbers
    join: {stream: more, key: k, other_key: k, within: {before: 1m, after: 2m}, as: m, how: left}
sinks:
  - topic: out
`

// An interval join's buffers are keyed state: a checkpoint describes the
// join, and a restart that would read them as something else (other
// keys, other bounds, the other stream, another name) is refused, one
// that changes nothing about them is not.
func TestCheckRestartIntervalJoin(t *testing.T) {
	rec := timedRecordOf(t, intervalJob)
	var described bool
	for _, op := range rec.Operators {
		if op.ID == "pairs" && op.KeyBy == "k | k" && len(op.Values) == 1 && op.Values[0].Func == IntervalJoinFunc {
			described = true
		}
	}
	if !described {
		t.Fatalf("the checkpoint does not describe the join: %+v", rec.Operators)
	}
	if _, err := CheckRestart(rec, DescribeConfig(parseConfig(t, strings.Replace(intervalJob, "name: j\n", "name: j\ncheckpoint: {interval: 5s}\n", 1)))); err != nil {
		t.Errorf("a restart with the join unchanged: %v", err)
	}
	for name, changed := range map[string]string{
		"bounds":    strings.Replace(intervalJob, "after: 2m", "after: 3m", 1),
		"other key": strings.Replace(intervalJob, "other_key: k", "other_key: j", 1),
		"how":       strings.Replace(intervalJob, "how: left", "how: inner", 1),
		"as":        strings.Replace(intervalJob, "as: m", "as: n", 1),
	} {
		if _, err := CheckRestart(rec, DescribeConfig(parseConfig(t, changed))); err == nil || !strings.Contains(err.Error(), `"pairs"`) {
			t.Errorf("%s changed: %v, want the join refused", name, err)
		}
	}
}
