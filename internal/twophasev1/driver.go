package twophasev1

import (
	"context"
	"errors"
	"fmt"
)

// Driver runs the Protocol against real participants, synchronously and
// one epoch at a time (MaxInFlight 1), so the runtime can commit an epoch
// with one call. It is thin on purpose: it takes each Ready, calls what the
// actions say, in order, and feeds each outcome back; every decision stays
// in Protocol. Not safe for concurrent use.
//
// Life cycle: Recover, which also opens epoch lastDecided+1 (Begin at
// every participant); then for each epoch e, Prepare(e) (optional: at the
// barrier) and Commit(e) (at the checkpoint coordinator's go), which also
// opens e+1 once e is done; or Abort(e). Open says which epoch receives
// records. Once a call returned a *FailError the Driver refuses new epochs
// until Recover ran again, which starts a new Protocol; if errors.Is(err,
// ErrFenced), exit instead.
//
// A Begin that fails inside Commit(e) does not fail that Commit: epoch e
// is committed everywhere and checkpoint e is complete, which the caller
// must learn. The Driver keeps the failure (a *FailError with StageBegin;
// epoch e+1 is aborted everywhere) and returns it from the next Prepare,
// Commit or Abort instead; Open returns 0 meanwhile.
type Driver struct {
	cfg   Config
	log   DecisionLog
	parts map[string]Participant
	m     *Protocol
	// pending is a failure that happened after the call it belongs to had
	// succeeded (a Begin after Done), for the next call to return.
	pending error
}

// DriverConfig configures a Driver.
type DriverConfig struct {
	// DecisionLog is the participant whose commit is the decision. Required.
	DecisionLog DecisionLog
	// Participants are the others, called in this order.
	Participants []Participant
	// IsFenced: see Config.IsFenced.
	IsFenced func(error) bool
}

// NewDriver checks cfg and returns a Driver that must Recover before the
// first epoch.
func NewDriver(cfg DriverConfig) (*Driver, error) {
	if cfg.DecisionLog == nil {
		return nil, errors.New("two-phase commit driver: decision log: required")
	}
	d := &Driver{log: cfg.DecisionLog, parts: map[string]Participant{}}
	d.cfg = Config{DecisionLog: cfg.DecisionLog.Name(), MaxInFlight: 1, IsFenced: cfg.IsFenced}
	d.parts[d.cfg.DecisionLog] = cfg.DecisionLog
	for _, p := range cfg.Participants {
		d.cfg.Participants = append(d.cfg.Participants, p.Name())
		d.parts[p.Name()] = p
	}
	if _, err := d.cfg.withDefaults(); err != nil { // names empty or duplicated
		return nil, err
	}
	return d, nil
}

// Recover fences every participant's predecessor, settles every in-doubt
// epoch by the decision log, opens epoch lastDecided+1 at every participant
// (Begin) and returns the last decided epoch: restore the job from that
// checkpoint and hand the participants epoch lastDecided+1's records. If a
// Begin fails, Recover returns its *FailError (StageBegin) and the epoch
// was aborted everywhere; recover again.
func (d *Driver) Recover(ctx context.Context) (lastDecided Epoch, err error) {
	m, err := NewProtocol(d.cfg)
	if err != nil {
		return 0, err
	}
	d.m, d.pending = m, nil
	if err := m.Start(); err != nil {
		return 0, err
	}
	res, err := d.run(ctx)
	if err != nil {
		return 0, err
	}
	if !res.resumed {
		return 0, fmt.Errorf("two-phase commit driver: recovery stopped without settling (state %v)", m.State())
	}
	return res.resume, nil
}

// Prepare reports that barrier e reached the sink and prepares epoch e at
// every participant: call it before acking the checkpoint, so a failure
// declines it. On error, e was aborted everywhere and the job must recover.
// If the Begin of e failed (in the Commit of e-1), Prepare returns that
// failure.
func (d *Driver) Prepare(ctx context.Context, e Epoch) error {
	if err := d.ready("prepare", e); err != nil {
		return err
	}
	if err := d.m.Barrier(e); err != nil {
		return err
	}
	_, err := d.run(ctx)
	return err
}

// Commit commits epoch e everywhere: it prepares e if Prepare was not
// called, commits the decision log (the decision), then every other
// participant, and opens epoch e+1 (Begin at every participant). nil means
// e is done (visible everywhere), even if a Begin of e+1 failed: see
// Driver. A *FailError says what happened; if its Decided is set, e is
// decided (checkpoint e is complete) even though a participant has yet to
// commit it, which the next Recover does.
func (d *Driver) Commit(ctx context.Context, e Epoch) error {
	if err := d.ready("commit", e); err != nil {
		return err
	}
	if d.m.LastBarrier() < e {
		if err := d.m.Barrier(e); err != nil {
			return err
		}
	}
	if err := d.m.Decide(e); err != nil {
		// Nothing was emitted by Decide; the Barrier's Prepares are
		// still queued and run with the next call.
		return err
	}
	res, err := d.run(ctx)
	if res.done[e] {
		if fe, ok := errors.AsType[*FailError](err); ok && fe.Stage == StageBegin {
			d.pending = err
			return nil
		}
	}
	if err != nil {
		return err
	}
	if !res.done[e] {
		return fmt.Errorf("two-phase commit driver: epoch %d not done (state %v)", e, d.m.State())
	}
	return nil
}

// Abort aborts epoch e everywhere (a declined or timed-out checkpoint, a
// shutdown, the end of the attempt that fed the open epoch): e may be the
// open epoch, whose barrier never came. Afterwards the Driver takes no new
// epoch until Recover. The error joins the aborts that failed; recovery
// aborts those epochs again.
func (d *Driver) Abort(ctx context.Context, e Epoch) error {
	if err := d.ready("abort", e); err != nil {
		return err
	}
	if err := d.m.Abort(e, errors.New("aborted by the runtime")); err != nil {
		return err
	}
	res, err := d.run(ctx)
	if fe, ok := errors.AsType[*FailError](err); ok && fe.Stage == StageRequested {
		return errors.Join(res.abortErrs...)
	}
	return err
}

// Open returns the epoch open for records: the newest epoch opened at
// every participant (Begin) and neither done nor aborted. 0 before Recover
// and after a failure.
func (d *Driver) Open() Epoch {
	if d.m == nil || d.m.State() != StateRunning || len(d.m.inFlight) == 0 {
		return 0
	}
	return d.m.inFlight[len(d.m.inFlight)-1].epoch
}

// LastDecided returns the newest epoch known decided.
func (d *Driver) LastDecided() Epoch {
	if d.m == nil {
		return 0
	}
	return d.m.LastDecided()
}

// ready returns why op on epoch e cannot run: no Recover yet, or a failure
// kept from an earlier call (returned once).
func (d *Driver) ready(op string, e Epoch) error {
	if d.m == nil {
		return fmt.Errorf("%s epoch %d: %w", op, e, ErrNotRecovered)
	}
	if err := d.pending; err != nil {
		d.pending = nil
		return err
	}
	return nil
}

// result is what a run of actions led to.
type result struct {
	done      map[Epoch]bool
	resumed   bool
	resume    Epoch
	abortErrs []error
}

// run takes every Ready the Protocol has, acts on its actions in order and
// feeds each outcome back, until nothing is left. It returns the
// *FailError of an ActFail, joined with the errors of the aborts that
// followed it.
func (d *Driver) run(ctx context.Context) (result, error) {
	res := result{done: map[Epoch]bool{}}
	var fail *FailError
	m := d.m
	for m.HasReady() {
		rd := m.Ready()
		m.Advance()
		for _, a := range rd.Actions {
			if m.State() == StateFailed && a.Calls() && a.Kind != ActAbort {
				// After a failure (maybe reported by an earlier action of
				// this Ready, its Fail still in the outbox) only aborts are
				// worth making; recovery settles everything else.
				continue
			}
			var err error
			switch a.Kind {
			case ActRecover:
				inDoubt, perr := d.parts[a.Participant].Recover(ctx)
				if perr != nil {
					err = m.RecoverFailed(a.Participant, perr)
				} else {
					err = m.Recovered(a.Participant, inDoubt)
				}
			case ActReadDecision:
				last, perr := d.log.LastDecided(ctx)
				if perr != nil {
					err = m.DecisionReadFailed(perr)
				} else {
					err = m.DecisionRead(last)
				}
			case ActBegin:
				if perr := d.parts[a.Participant].Begin(ctx, a.Epoch); perr != nil {
					err = m.BeginFailed(a.Participant, a.Epoch, perr)
				} else {
					err = m.Begun(a.Participant, a.Epoch)
				}
			case ActPrepare:
				if perr := d.parts[a.Participant].Prepare(ctx, a.Epoch); perr != nil {
					err = m.PrepareFailed(a.Participant, a.Epoch, perr)
				} else {
					err = m.Prepared(a.Participant, a.Epoch)
				}
			case ActCommit:
				if perr := d.parts[a.Participant].Commit(ctx, a.Epoch); perr != nil {
					err = m.CommitFailed(a.Participant, a.Epoch, perr)
				} else {
					err = m.Committed(a.Participant, a.Epoch)
				}
			case ActAbort:
				if perr := d.parts[a.Participant].Abort(ctx, a.Epoch); perr != nil {
					res.abortErrs = append(res.abortErrs, fmt.Errorf("aborting epoch %d at %q: %w", a.Epoch, a.Participant, perr))
					err = m.AbortFailed(a.Participant, a.Epoch, perr)
				} else {
					err = m.Aborted(a.Participant, a.Epoch)
				}
			case ActDone:
				res.done[a.Epoch] = true
			case ActResume:
				res.resumed, res.resume = true, a.Epoch
			case ActFail:
				if fail == nil {
					fail = a.Err
				}
			}
			if err != nil {
				// The Protocol rejected an outcome of its own action: a bug.
				return res, fmt.Errorf("two-phase commit driver: %v: %w", a, err)
			}
		}
	}
	switch {
	case fail == nil:
		return res, nil
	case len(res.abortErrs) == 0:
		return res, fail
	}
	return res, errors.Join(append([]error{fail}, res.abortErrs...)...)
}
