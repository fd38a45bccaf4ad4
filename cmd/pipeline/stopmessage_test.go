package main

import (
	"strings"
	"testing"
)

// A graceful stop under at_most_once says what it really does: there is no
// final checkpoint to take (issue 11, item 8).
func TestAtMostOnceStopSaysWhatHappens(t *testing.T) {
	j := newJob(t, "at_most_once")
	j.numbers(1, 500)
	j.start()
	if rep := j.awaitFinal(500, false); !rep.Exact() {
		t.Fatalf("at_most_once without failures: %v", rep)
	}
	j.terminate()
	out := j.output()
	if strings.Contains(out, "final checkpoint") {
		t.Errorf("an at_most_once stop mentions a final checkpoint:\n%s", out)
	}
	for _, want := range []string{
		`msg="stopping: flushing the outputs written so far; at_most_once keeps no checkpoints`,
		"records read but not yet written are lost",
		"the next run resumes at the offsets committed to the consumer group, with empty state",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the stop's log line lacks %q:\n%s", want, out)
		}
	}
}
