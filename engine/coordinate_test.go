package engine

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/checkpoint"
	"github.com/eoflow/pipeline/metrics"
	"github.com/eoflow/pipeline/twophase"
)

// nopTxn is a decision log whose every call succeeds at once and that has
// decided nothing: enough for the coordinator loop's own tests.
type nopTxn struct{}

var _ transaction = nopTxn{}

func (nopTxn) Name() string                                            { return "kafka:nop" }
func (nopTxn) Begin(context.Context, twophase.Epoch) error             { return nil }
func (nopTxn) Prepare(context.Context, twophase.Epoch) error           { return nil }
func (nopTxn) Commit(context.Context, twophase.Epoch) error            { return nil }
func (nopTxn) Abort(context.Context, twophase.Epoch) error             { return nil }
func (nopTxn) Recover(context.Context) ([]twophase.Epoch, error)       { return nil, nil }
func (nopTxn) LastDecided(context.Context) (*checkpoint.Record, error) { return nil, nil }
func (nopTxn) Produce(context.Context, *kgo.Record)                    {}

// runningLoop is a coordinator loop over nopTxn whose recovery is over and
// whose task graph runs with tasks, its schedule starting at start.
func runningLoop(t *testing.T, cfg twophase.Config, now func() time.Time, start time.Time, tasks ...checkpoint.TaskID) *coordinatorLoop {
	t.Helper()
	cfg.DecisionLog = nopTxn{}.Name()
	m, err := twophase.NewMachine(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c := newCommitter(nopTxn{})
	c.now = now
	l := newCoordinatorLoop(m, c, slog.New(slog.NewTextHandler(io.Discard, nil)), now, metrics.New(nil, "t"))
	if err := l.recover(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := l.start(start, tasks); err != nil {
		t.Fatal(err)
	}
	return l
}

// settleCalls makes every participant call the loop queued, as its
// committer would, and carries out what follows.
func settleCalls(t *testing.T, l *coordinatorLoop) {
	t.Helper()
	for {
		if err := l.act(); err != nil {
			t.Fatal(err)
		}
		if len(l.c.queue) == 0 {
			return
		}
		c := l.c.queue[0]
		l.c.queue = l.c.queue[1:]
		l.feed(l.c.do(context.Background(), c))
	}
}
