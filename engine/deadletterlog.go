package engine

import (
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/operator"
)

// deadLetterLogEvery is the least time between two logged dead letters: a
// flood of bad input costs a log line a second, not a line per record.
const deadLetterLogEvery = time.Second

// deadLetterLog logs dead letters at warn level, at most one line per
// deadLetterLogEvery; each line counts the dead letters held back since the
// previous one. The metric pipeline_dead_letter_records_total counts them
// all; the log says why they happen.
type deadLetterLog struct {
	log *slog.Logger
	now func() time.Time

	mu struct {
		sync.Mutex
		next       time.Time // no line before this
		suppressed int       // dead letters not logged since the last line
	}
}

func newDeadLetterLog(log *slog.Logger, now func() time.Time) *deadLetterLog {
	return &deadLetterLog{log: log, now: now}
}

// allow reports whether a dead letter happening now is logged, and if so
// how many were held back before it.
func (d *deadLetterLog) allow() (ok bool, suppressed int) {
	now := d.now()
	d.mu.Lock()
	defer d.mu.Unlock()
	if now.Before(d.mu.next) {
		d.mu.suppressed++
		return false, 0
	}
	suppressed, d.mu.suppressed = d.mu.suppressed, 0
	d.mu.next = now.Add(deadLetterLogEvery)
	return true, suppressed
}

// record logs src's dead letter, unless the rate limit holds it back.
func (d *deadLetterLog) record(src *kgo.Record, rerr *operator.RecordError) {
	ok, suppressed := d.allow()
	if !ok {
		return
	}
	d.log.Warn("dead letter: record sent to the dead-letter topic",
		"code", string(rerr.Code), "step", rerr.Step, "reason", rerr.Reason,
		"topic", src.Topic, "partition", src.Partition, "offset", src.Offset,
		"suppressed", suppressed)
}
