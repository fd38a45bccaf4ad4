package twophasev1

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
)

// driverWorld is a decision log "k" and a participant "db" with durable
// stores, and a way to start instances (Drivers) against them.
type driverWorld struct {
	t        *testing.T
	log, db  *store
	instance int
	// failNext makes the next call of op at a store fail in the given way.
	failNext map[string]faultMode // "db commit" -> failBefore
}

func newDriverWorld(t *testing.T) *driverWorld {
	t.Helper()
	w := &driverWorld{t: t, failNext: map[string]faultMode{}}
	violation := func(format string, args ...any) { t.Helper(); t.Fatalf("violation: "+format, args...) }
	w.log = newStore("k", nil, violation)
	w.db = newStore("db", w.log, violation)
	for _, s := range []*store{w.log, w.db} {
		s.maxOpen = 1
		s.fault = func(op string, _ Epoch) faultMode {
			key := s.name + " " + op
			mode := w.failNext[key]
			delete(w.failNext, key)
			return mode
		}
	}
	return w
}

// unrecovered starts a new instance of the job, not yet recovered.
func (w *driverWorld) unrecovered() *Driver {
	w.t.Helper()
	w.instance++
	d, err := NewDriver(DriverConfig{
		DecisionLog:  &handle{s: w.log, inc: w.instance},
		Participants: []Participant{&handle{s: w.db, inc: w.instance}},
	})
	if err != nil {
		w.t.Fatal(err)
	}
	return d
}

// driver starts a new instance of the job and recovers it.
func (w *driverWorld) driver(wantDecided Epoch) *Driver {
	w.t.Helper()
	d := w.unrecovered()
	got, err := d.Recover(context.Background())
	if err != nil {
		w.t.Fatalf("recover: %v", err)
	}
	if got != wantDecided || d.LastDecided() != wantDecided {
		w.t.Fatalf("recovered to %d (LastDecided %d), want %d", got, d.LastDecided(), wantDecided)
	}
	if d.Open() != wantDecided+1 {
		w.t.Fatalf("recovered to %d, open epoch %d", got, d.Open())
	}
	w.settled()
	return d
}

// settled checks that both stores committed the same epochs and hold
// nothing in doubt, and that every open transaction is the same one.
func (w *driverWorld) settled() {
	w.t.Helper()
	if len(w.log.prepared)+len(w.db.prepared) > 0 || !slices.Equal(w.log.committed, w.db.committed) ||
		!maps.Equal(w.log.begun, w.db.begun) {
		w.t.Fatalf("not settled:\n  %s begun %v\n  %s begun %v", w.log, w.log.begun, w.db, w.db.begun)
	}
}

func committedEpochs(s *store) []Epoch {
	var out []Epoch
	for _, c := range s.committed {
		out = append(out, c.epoch)
	}
	return out
}

func failErr(t *testing.T, err error, stage Stage) *FailError {
	t.Helper()
	fe, ok := errors.AsType[*FailError](err)
	if !ok || fe.Stage != stage {
		t.Fatalf("err = %v, want a *FailError at stage %v", err, stage)
	}
	return fe
}

func TestDriverCommitsInOrder(t *testing.T) {
	w := newDriverWorld(t)
	d := w.driver(0)
	ctx := context.Background()
	if err := d.Commit(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if err := d.Prepare(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if err := d.Commit(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if err := d.Commit(ctx, 4); !errors.Is(err, ErrOutOfOrder) {
		t.Fatalf("commit 4 after 2: %v, want ErrOutOfOrder", err)
	}
	w.settled()
	if got := committedEpochs(w.db); !slices.Equal(got, []Epoch{1, 2}) {
		t.Fatalf("db committed %v", got)
	}
	// The decision log decides before anyone else commits.
	want := "recover by 1; last_decided by 1; begin 1 by 1; prepare 1 by 1; commit 1 by 1; begin 2 by 1; prepare 2 by 1; commit 2 by 1; begin 3 by 1"
	if got := strings.Join(w.log.calls, "; "); got != want {
		t.Fatalf("decision log calls:\n got  %s\n want %s", got, want)
	}
	if got, want := strings.Join(w.db.calls, "; "), "recover by 1; begin 1 by 1; prepare 1 by 1; commit 1 by 1; begin 2 by 1; prepare 2 by 1; commit 2 by 1; begin 3 by 1"; got != want {
		t.Fatalf("db calls:\n got  %s\n want %s", got, want)
	}
	if d.Open() != 3 {
		t.Fatalf("open epoch %d, want 3", d.Open())
	}
}

func TestDriverPrepareFailureAbortsEverywhere(t *testing.T) {
	w := newDriverWorld(t)
	d := w.driver(0)
	ctx := context.Background()
	w.failNext["db prepare"] = failAfter // prepared, but reported failed
	fe := failErr(t, d.Commit(ctx, 1), StagePrepare)
	if fe.Decided || fe.Permanent || fe.LastDecided != 0 {
		t.Fatalf("%+v", fe)
	}
	if len(w.log.prepared)+len(w.db.prepared) > 0 || len(w.log.committed) > 0 {
		t.Fatalf("epoch 1 not aborted everywhere:\n  %s\n  %s", w.log, w.db)
	}
	if err := d.Commit(ctx, 2); !errors.Is(err, ErrFailed) {
		t.Fatalf("commit after a failure: %v, want ErrFailed", err)
	}
	d = w.driver(0) // the restart
	if err := d.Commit(ctx, 1); err != nil {
		t.Fatal(err)
	}
	w.settled()
}

func TestDriverCommitFailureAfterTheDecision(t *testing.T) {
	w := newDriverWorld(t)
	d := w.driver(0)
	ctx := context.Background()
	w.failNext["db commit"] = failBefore
	fe := failErr(t, d.Commit(ctx, 1), StageCommit)
	if !fe.Decided || fe.LastDecided != 1 || fe.Participant != "db" {
		t.Fatalf("%+v", fe)
	}
	if !strings.Contains(fe.Error(), `recovery must commit epoch 1 at "db"`) {
		t.Fatalf("unclear: %v", fe)
	}
	w.driver(1) // recovery commits epoch 1 at db
	if got := committedEpochs(w.db); !slices.Equal(got, []Epoch{1}) {
		t.Fatalf("db committed %v", got)
	}
}

func TestDriverDecisionInDoubt(t *testing.T) {
	for _, tc := range []struct {
		mode   faultMode
		decide Epoch // what recovery must find
	}{
		{failAfter, 1},  // the commit landed, its reply was lost
		{failBefore, 0}, // the commit never happened
	} {
		w := newDriverWorld(t)
		d := w.driver(0)
		w.failNext["k commit"] = tc.mode
		fe := failErr(t, d.Commit(context.Background(), 1), StageDecide)
		if fe.Decided || fe.InDoubt != 1 {
			t.Fatalf("%+v", fe)
		}
		// db still holds epoch 1 prepared: nobody may abort it before
		// recovery read the decision.
		if _, ok := w.db.prepared[1]; !ok {
			t.Fatalf("db lost epoch 1 before recovery: %s", w.db)
		}
		w.driver(tc.decide)
	}
}

func TestDriverFencedInstanceCommitsNothing(t *testing.T) {
	w := newDriverWorld(t)
	ctx := context.Background()
	old := w.driver(0)
	if err := old.Prepare(ctx, 1); err != nil {
		t.Fatal(err)
	}
	w.driver(0) // a second instance takes over and aborts epoch 1
	err := old.Commit(ctx, 1)
	// Epoch 1 was prepared before the takeover; the decision is refused.
	fe := failErr(t, err, StageDecide)
	if !fe.Permanent {
		t.Fatalf("%+v: not permanent", fe)
	}
	if !errors.Is(err, ErrFenced) {
		t.Fatalf("%v: not ErrFenced", err)
	}
	if len(w.log.committed) > 0 || len(w.db.committed) > 0 {
		t.Fatalf("fenced instance committed:\n  %s\n  %s", w.log, w.db)
	}
}

func TestDriverAbort(t *testing.T) {
	w := newDriverWorld(t)
	ctx := context.Background()
	d := w.driver(0)
	if err := d.Commit(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if err := d.Prepare(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if err := d.Abort(ctx, 2); err != nil {
		t.Fatal(err)
	}
	w.settled()
	if err := d.Prepare(ctx, 3); !errors.Is(err, ErrFailed) {
		t.Fatalf("prepare after abort: %v, want ErrFailed", err)
	}
	if err := d.Abort(ctx, 1); !errors.Is(err, ErrFailed) {
		t.Fatalf("abort after abort: %v, want ErrFailed", err)
	}
	d = w.driver(1)
	w.failNext["db abort"] = failBefore
	if err := d.Prepare(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if err := d.Abort(ctx, 2); !errors.Is(err, errInjected) {
		t.Fatalf("abort with a failing participant: %v", err)
	}
	w.driver(1) // recovery aborts what the failed abort left
}

func TestDriverRecoveryFailureIsRetried(t *testing.T) {
	w := newDriverWorld(t)
	d := w.unrecovered()
	ctx := context.Background()
	if err := d.Commit(ctx, 1); !errors.Is(err, ErrNotRecovered) {
		t.Fatalf("commit before recovery: %v", err)
	}
	w.failNext["db recover"] = failBefore
	fe := failErr(t, func() error { _, err := d.Recover(ctx); return err }(), StageRecover)
	if !fe.Recovering || fe.Permanent {
		t.Fatalf("%+v", fe)
	}
	if _, err := d.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	if err := d.Commit(ctx, 1); err != nil {
		t.Fatal(err)
	}
}

func TestNewDriverRefusesBadParticipants(t *testing.T) {
	s := newStore("k", nil, func(string, ...any) {})
	if _, err := NewDriver(DriverConfig{}); err == nil {
		t.Fatal("no decision log accepted")
	}
	_, err := NewDriver(DriverConfig{DecisionLog: &handle{s: s}, Participants: []Participant{&handle{s: s}}})
	if err == nil || !strings.Contains(err.Error(), "is the decision log") {
		t.Fatalf("duplicate name: %v", err)
	}
}

func TestDriverAbortsTheOpenEpoch(t *testing.T) {
	w := newDriverWorld(t)
	ctx := context.Background()
	d := w.driver(0)
	if err := d.Commit(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if d.Open() != 2 || w.db.begun[2] != 1 {
		t.Fatalf("open %d, db begun %v", d.Open(), w.db.begun)
	}
	// The attempt ends before barrier 2: its open epoch is aborted.
	if err := d.Abort(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if d.Open() != 0 || len(w.log.begun)+len(w.db.begun) > 0 {
		t.Fatalf("after abort: open %d, begun %v %v", d.Open(), w.log.begun, w.db.begun)
	}
	if err := d.Prepare(ctx, 2); !errors.Is(err, ErrFailed) {
		t.Fatalf("prepare after abort: %v, want ErrFailed", err)
	}
	d = w.driver(1)
	if err := d.Commit(ctx, 2); err != nil {
		t.Fatal(err)
	}
	w.settled()
}

func TestDriverBeginFailureAtRecovery(t *testing.T) {
	w := newDriverWorld(t)
	d := w.unrecovered()
	ctx := context.Background()
	w.failNext["db begin"] = failAfter // begun, but reported failed
	_, err := d.Recover(ctx)
	fe := failErr(t, err, StageBegin)
	if fe.Epoch != 1 || fe.Participant != "db" || fe.Recovering || fe.Permanent {
		t.Fatalf("%+v", fe)
	}
	if d.Open() != 0 || len(w.log.begun)+len(w.db.begun) > 0 {
		t.Fatalf("epoch 1 not aborted everywhere: open %d, begun %v %v", d.Open(), w.log.begun, w.db.begun)
	}
	if _, err := d.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	if err := d.Commit(ctx, 1); err != nil {
		t.Fatal(err)
	}
	w.settled()
}

// A Begin that fails after the commit of the previous epoch does not undo
// that commit: Commit reports success, and the next call the failure.
func TestDriverBeginFailureAfterCommit(t *testing.T) {
	for _, next := range []string{"prepare", "commit", "abort"} {
		t.Run(next, func(t *testing.T) {
			w := newDriverWorld(t)
			ctx := context.Background()
			d := w.driver(0)
			w.failNext["k begin"] = failBefore
			if err := d.Commit(ctx, 1); err != nil {
				t.Fatalf("commit 1: %v; the failed begin of 2 must not fail it", err)
			}
			if got := committedEpochs(w.db); !slices.Equal(got, []Epoch{1}) || d.LastDecided() != 1 {
				t.Fatalf("db committed %v, last decided %d", got, d.LastDecided())
			}
			if d.Open() != 0 || len(w.log.begun)+len(w.db.begun) > 0 {
				t.Fatalf("epoch 2 not aborted: open %d, begun %v %v", d.Open(), w.log.begun, w.db.begun)
			}
			var err error
			switch next {
			case "prepare":
				err = d.Prepare(ctx, 2)
			case "commit":
				err = d.Commit(ctx, 2)
			case "abort":
				err = d.Abort(ctx, 2)
			}
			fe := failErr(t, err, StageBegin)
			if fe.Epoch != 2 || fe.Participant != "k" || fe.LastDecided != 1 {
				t.Fatalf("%+v", fe)
			}
			if err := d.Commit(ctx, 2); !errors.Is(err, ErrFailed) {
				t.Fatalf("second call after the failure: %v, want ErrFailed", err)
			}
			d = w.driver(1)
			if err := d.Commit(ctx, 2); err != nil {
				t.Fatal(err)
			}
			w.settled()
		})
	}
}
