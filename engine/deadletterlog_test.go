package engine

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Dead letters are logged at warn level with their reason, at most one
// line a second; the next line counts the ones held back.
func TestDeadLettersAreLoggedRateLimited(t *testing.T) {
	cfg := parseConfig(t, []byte(`name: dl
kafka:
  brokers: [127.0.0.1:9092]
sources:
  - topics: [in]
steps:
  - filter: 'n > 0'
sinks:
  - topic: out
`), nil)
	p, err := compile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	p.deadLetterLog = newDeadLetterLog(slog.New(slog.NewTextHandler(&logs, nil)), func() time.Time { return now })
	r := p.newRouter(1)
	bad := func(offset int64) {
		t.Helper()
		msgs, _ := r.route1(&kgo.Record{Topic: "in", Partition: 2, Offset: offset, Value: []byte("not json")})
		if len(msgs) != 1 || msgs[0].kind != msgDeadLetter {
			t.Fatalf("offset %d: %d messages, want one dead letter", offset, len(msgs))
		}
	}
	lines := func() []string {
		return strings.Split(strings.TrimSuffix(logs.String(), "\n"), "\n")
	}

	bad(10) // logged
	bad(11) // held back
	bad(12) // held back
	now = now.Add(999 * time.Millisecond)
	bad(13) // held back: not a second yet
	if got := lines(); len(got) != 1 {
		t.Fatalf("%d lines within a second, want 1:\n%s", len(got), logs.String())
	}
	now = now.Add(time.Millisecond)
	bad(14) // logged, counting the three held back
	got := lines()
	if len(got) != 2 {
		t.Fatalf("%d lines, want 2:\n%s", len(got), logs.String())
	}
	for i, want := range []struct {
		offset, suppressed string
	}{{"10", "0"}, {"14", "3"}} {
		line := got[i]
		for _, part := range []string{"level=WARN", "code=decode", "step=", "reason=", "topic=in", "partition=2", "offset=" + want.offset, "suppressed=" + want.suppressed} {
			if !strings.Contains(line, part) {
				t.Errorf("line %d has no %q: %s", i, part, line)
			}
		}
	}
}
