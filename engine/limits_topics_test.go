package engine

import (
	"io"
	"log/slog"
	"slices"
	"testing"
)

// The topics whose record limits an attempt reads are those the job
// writes: a group-mode job without key_by has no state topic, and asking
// for one held each of its attempts for 10 s until the question gave up.
func TestWrittenTopics(t *testing.T) {
	for _, c := range []struct {
		name, mode, steps string
		want              []string
	}{
		{"single, keyed", "single", `[{key_by: 'n % 2'}, {aggregate: {values: {c: count()}}}]`, []string{"out", "j-dead-letter", "j-checkpoints", "j-state"}},
		{"single, stateless", "single", `[{filter: 'n > 1'}]`, []string{"out", "j-dead-letter", "j-checkpoints", "j-state"}},
		{"group, keyed", "group", `[{key_by: 'n % 2'}, {aggregate: {values: {c: count()}}}]`, []string{"out", "j-dead-letter", "j-checkpoints", "j-group-state"}},
		{"group, stateless", "group", `[{filter: 'n > 1'}]`, []string{"out", "j-dead-letter", "j-checkpoints"}},
	} {
		cfg := parseConfig(t, []byte(`
name: j
kafka: {brokers: ["127.0.0.1:9092"]}
scale: {mode: `+c.mode+`}
sources: [{id: numbers, topics: [numbers]}]
steps: `+c.steps+`
sinks: [{topic: out}]
`), nil)
		j, err := New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), WithInstanceID("a"))
		if err != nil {
			t.Fatal(err)
		}
		if got := j.writtenTopics(); !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}
