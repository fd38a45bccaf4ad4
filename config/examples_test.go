package config

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// The jobs in the repository (config.yaml and examples/*) can be followed
// in the README's order on one cluster: a job with event time reads a
// topic no job without it reads. The quick start fills numbers with
// {"n": ...}, no ts: a window example reading it would dead-letter every
// record (missing_field ts), and creating it again fails.
func TestExamplesWithEventTimeReadTopicsOfTheirOwn(t *testing.T) {
	files, err := filepath.Glob("../examples/*/config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, "../config.yaml")
	timed, untimed := map[string][]string{}, map[string][]string{} // topic: files
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		c, err := Parse(f, data, nil) // every ${VAR} at its default
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, s := range c.Sources {
			for _, topic := range s.Topics {
				if s.EventTime != nil {
					timed[topic] = append(timed[topic], f)
				} else {
					untimed[topic] = append(untimed[topic], f)
				}
			}
		}
	}
	if len(timed) == 0 || len(untimed) == 0 {
		t.Fatalf("nothing to compare: %v, %v", timed, untimed)
	}
	for topic, fs := range timed {
		if others := untimed[topic]; len(others) > 0 {
			t.Errorf("topic %s is read by %v with event time and by %v without: give the event-time examples a topic of their own", topic, slices.Sorted(slices.Values(fs)), others)
		}
	}
}
