package twophasev1_test

import (
	"context"
	"errors"
	"fmt"
	"slices"

	twophase "github.com/eoflow/pipeline/internal/twophasev1"
)

// ledger is a toy database with prepared transactions (PREPARE TRANSACTION
// / COMMIT PREPARED in PostgreSQL): what an epoch wrote survives a crash
// once prepared, and stays invisible until committed.
type ledger struct {
	name     string
	open     map[twophase.Epoch][]string // begun, not prepared: lost in a crash
	prepared map[twophase.Epoch][]string // durable, invisible
	rows     []string                    // committed: visible
}

func newLedger(name string) *ledger {
	return &ledger{name: name, open: map[twophase.Epoch][]string{}, prepared: map[twophase.Epoch][]string{}}
}

func (l *ledger) Name() string { return l.name }

func (l *ledger) Begin(_ context.Context, e twophase.Epoch) error {
	l.open[e] = nil
	return nil
}

func (l *ledger) write(e twophase.Epoch, row string) { l.open[e] = append(l.open[e], row) }

func (l *ledger) Prepare(_ context.Context, e twophase.Epoch) error {
	l.prepared[e] = l.open[e]
	delete(l.open, e)
	return nil
}

func (l *ledger) Commit(_ context.Context, e twophase.Epoch) error {
	l.rows = append(l.rows, l.prepared[e]...) // nothing for an epoch already committed
	delete(l.prepared, e)
	return nil
}

func (l *ledger) Abort(_ context.Context, e twophase.Epoch) error {
	delete(l.open, e)
	delete(l.prepared, e)
	return nil
}

// Recover reports the prepared transactions: a crash lost the open ones.
func (l *ledger) Recover(context.Context) ([]twophase.Epoch, error) {
	clear(l.open)
	var inDoubt []twophase.Epoch
	for e := range l.prepared {
		inDoubt = append(inDoubt, e)
	}
	slices.Sort(inDoubt)
	return inDoubt, nil
}

// decisions stands in for the Kafka transaction that carries checkpoint
// record N: its commit of N is the decision. crashAfterCommit makes the
// process die right after its commit landed, before anyone else
// committed.
type decisions struct {
	committed        []twophase.Epoch
	crashAfterCommit twophase.Epoch
}

var errCrash = errors.New("kill -9")

func (d *decisions) Name() string                                  { return "kafka" }
func (d *decisions) Begin(context.Context, twophase.Epoch) error   { return nil }
func (d *decisions) Prepare(context.Context, twophase.Epoch) error { return nil }
func (d *decisions) Abort(context.Context, twophase.Epoch) error   { return nil }
func (d *decisions) Recover(context.Context) ([]twophase.Epoch, error) {
	return nil, nil // a decision log keeps nothing prepared across a crash
}

func (d *decisions) Commit(_ context.Context, e twophase.Epoch) error {
	d.committed = append(d.committed, e)
	if e == d.crashAfterCommit {
		return errCrash
	}
	return nil
}

func (d *decisions) LastDecided(context.Context) (twophase.Epoch, error) {
	if len(d.committed) == 0 {
		return 0, nil
	}
	return d.committed[len(d.committed)-1], nil
}

// A database joins the Kafka transaction as a second participant, with the
// checkpoint record as its decision log. The process dies after the
// decision of epoch 2 landed but before the database committed it; the
// next process's recovery finds epoch 2 prepared in the database, reads
// the decision log and commits it there: nothing lost, nothing twice.
func ExampleDriver_database() {
	ctx := context.Background()
	kafka, db := &decisions{crashAfterCommit: 2}, newLedger("db")
	process := func() *twophase.Driver {
		d, err := twophase.NewDriver(twophase.DriverConfig{DecisionLog: kafka, Participants: []twophase.Participant{db}})
		if err != nil {
			panic(err)
		}
		last, err := d.Recover(ctx)
		if err != nil {
			panic(err)
		}
		fmt.Printf("recovered: resume after checkpoint %d, rows %v\n", last, db.rows)
		return d
	}

	d := process()
	for e := d.Open(); e <= 2; e = d.Open() {
		db.write(e, fmt.Sprintf("row of epoch %d", e))
		if err := d.Prepare(ctx, e); err != nil {
			panic(err)
		}
		if err := d.Commit(ctx, e); err != nil {
			fmt.Printf("commit %d: %v\n", e, errors.Is(err, errCrash))
			break
		}
		fmt.Printf("committed %d: rows %v\n", e, db.rows)
	}

	// The process died; the next one settles epoch 2 by the decision log.
	d = process()
	fmt.Printf("next epoch %d\n", d.Open())
	// Output:
	// recovered: resume after checkpoint 0, rows []
	// committed 1: rows [row of epoch 1]
	// commit 2: true
	// recovered: resume after checkpoint 2, rows [row of epoch 1 row of epoch 2]
	// next epoch 3
}
