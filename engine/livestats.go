package engine

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/eoflow/pipeline/metrics"
	"github.com/eoflow/pipeline/operator"
)

// The live numbers of the job graph's nodes that the per-topic metrics do
// not give (the web UI's job graph reads them from the metrics): records
// handed to each target, dead letters by the node they failed at, and how
// long each task waited for room downstream (backpressure). Everything
// here is counted off the per-record path: a worker counts a batch's
// records in a slice and adds them to the metric once per batch, and a
// blocked send is timed only when the channel is full.

// targetCounts counts the records a worker handed to each target, by
// target index; flush adds them to the metrics.
type targetCounts struct {
	counters []prometheus.Counter
	n        []int64
}

// newTargetCounts counts for p's targets in m (nil: counts nothing).
func newTargetCounts(m *metrics.Metrics, p *plan) *targetCounts {
	if m == nil {
		return nil
	}
	c := &targetCounts{counters: make([]prometheus.Counter, len(p.targets)), n: make([]int64, len(p.targets))}
	for i, t := range p.targets {
		c.counters[i] = m.OperatorRecords(t.id)
	}
	return c
}

func (c *targetCounts) add(target uint16) {
	if c != nil && int(target) < len(c.n) {
		c.n[target]++
	}
}

func (c *targetCounts) flush() {
	if c == nil {
		return
	}
	for i, n := range c.n {
		if n > 0 {
			c.counters[i].Add(float64(n))
			c.n[i] = 0
		}
	}
}

// stepCounts counts what each stateless step of the job graph did with
// records (operator.StepCount): the router's branches tally it per record,
// and flush, once per poll, adds it to the metrics. Only the source side
// counts (in group mode the keyed side runs a route again, uncounted), so
// each record a process reads is counted once.
type stepCounts struct {
	taken []operator.StepCount // by index in config.Steps
	// passed, dropped and failed are each stateless step's counters (nil
	// for a keyed step).
	passed, dropped, failed []prometheus.Counter
}

// newStepCounts counts for p's stateless steps in m (nil: counts nothing).
func newStepCounts(m *metrics.Metrics, p *plan) *stepCounts {
	if m == nil || len(p.cfg.Steps) == 0 {
		return nil
	}
	n := len(p.cfg.Steps)
	c := &stepCounts{taken: make([]operator.StepCount, n),
		passed: make([]prometheus.Counter, n), dropped: make([]prometheus.Counter, n), failed: make([]prometheus.Counter, n)}
	for i, s := range p.cfg.Steps {
		if s.Aggregate != nil || s.Window != nil {
			continue
		}
		c.passed[i] = m.StepRecords(s.ID, "passed")
		c.dropped[i] = m.StepRecords(s.ID, "dropped")
		c.failed[i] = m.StepRecords(s.ID, "failed")
	}
	return c
}

// flush adds what b's routes counted since the last flush to the metrics.
func (c *stepCounts) flush(b *operator.Branches) {
	if c == nil {
		return
	}
	b.TakeStepCounts(c.taken)
	for i, sc := range c.taken {
		if c.passed[i] == nil {
			continue
		}
		for _, x := range []struct {
			counter prometheus.Counter
			n       int64
		}{{c.passed[i], sc.Out}, {c.dropped[i], sc.Dropped}, {c.failed[i], sc.Failed}} {
			if x.n > 0 {
				x.counter.Add(float64(x.n))
			}
		}
		c.taken[i] = operator.StepCount{}
	}
}

// taskBlocked is task's backpressure counter in m (a zero Blocked, which
// counts nothing, without metrics).
func taskBlocked(m *metrics.Metrics, task string) metrics.Blocked {
	if m == nil {
		return metrics.Blocked{}
	}
	return m.TaskBlocked(task)
}

// send hands b to ch, counting the time it waited for room in blocked. It
// reports false if ctx ended first.
func send(ctx context.Context, ch chan<- batch, b batch, blocked metrics.Blocked) bool {
	select {
	case ch <- b:
		return true
	default:
	}
	start := time.Now()
	select {
	case ch <- b:
		blocked.Add(time.Since(start))
		return true
	case <-ctx.Done():
		blocked.Add(time.Since(start))
		return false
	}
}

// operatorOf is the id of the node of the job graph that a record error's
// step names: "steps[2].key_by" is steps[2]'s id, "sources[0]..." the
// source's. Anything else (group mode's "route") is "job".
func (p *plan) operatorOf(step string) string {
	for _, kind := range []string{"steps[", "sources[", "tables["} {
		rest, ok := strings.CutPrefix(step, kind)
		if !ok {
			continue
		}
		end := strings.IndexByte(rest, ']')
		if end < 0 {
			break
		}
		i, err := strconv.Atoi(rest[:end])
		if err != nil || i < 0 {
			break
		}
		switch {
		case kind == "steps[" && i < len(p.cfg.Steps):
			return p.cfg.Steps[i].ID
		case kind == "sources[" && i < len(p.cfg.Sources):
			return p.cfg.Sources[i].ID
		case kind == "tables[" && i < len(p.cfg.Tables):
			return p.cfg.Tables[i].ID
		}
	}
	return "job"
}
