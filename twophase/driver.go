package twophase

import (
	"context"
	"errors"
	"fmt"
)

// Driver runs the Protocol against real participants, synchronously and
// one epoch at a time (MaxInFlight 1), so the runtime can commit an epoch
// with one call. It is thin on purpose: it calls what the actions say, in
// order, and feeds each outcome back; every decision stays in Protocol. Not
// safe for concurrent use.
//
// Life cycle: Recover, then for each epoch Prepare (optional: at the
// barrier) and Commit (at the checkpoint coordinator's go), or Abort. Once
// a call returned a *FailError the Driver refuses new epochs until Recover
// ran again, which starts a new Protocol; if errors.Is(err, ErrFenced),
// exit instead.
type Driver struct {
	cfg   Config
	log   DecisionLog
	parts map[string]Participant
	m     *Protocol
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
// epoch by the decision log and returns the last decided epoch: restore
// the job from that checkpoint and continue with epoch lastDecided+1.
func (d *Driver) Recover(ctx context.Context) (lastDecided Epoch, err error) {
	m, err := NewProtocol(d.cfg)
	if err != nil {
		return 0, err
	}
	d.m = m
	acts, err := m.Start()
	if err != nil {
		return 0, err
	}
	res, err := d.run(ctx, acts)
	if err != nil {
		return 0, err
	}
	if !res.resumed {
		return 0, fmt.Errorf("two-phase commit driver: recovery stopped without settling (state %v)", m.State())
	}
	return res.resume, nil
}

// Prepare begins epoch e and prepares it at every participant: call it when
// barrier e reached the sink, before acking the checkpoint, so a failure
// declines it. On error, e was aborted everywhere and the job must recover.
func (d *Driver) Prepare(ctx context.Context, e Epoch) error {
	if d.m == nil {
		return fmt.Errorf("prepare epoch %d: %w", e, ErrNotRecovered)
	}
	acts, err := d.m.Begin(e)
	if err != nil {
		return err
	}
	_, err = d.run(ctx, acts)
	return err
}

// Commit commits epoch e everywhere: it prepares e if Prepare was not
// called, commits the decision log (the decision), then every other
// participant. nil means e is done (visible everywhere). A *FailError
// says what happened; if its Decided is set, e is decided (checkpoint e is
// complete) even though a participant has yet to commit it, which the next
// Recover does.
func (d *Driver) Commit(ctx context.Context, e Epoch) error {
	if d.m == nil {
		return fmt.Errorf("commit epoch %d: %w", e, ErrNotRecovered)
	}
	var acts []Action
	if d.m.LastBegun() < e {
		begin, err := d.m.Begin(e)
		if err != nil {
			return err
		}
		acts = begin
	}
	decide, err := d.m.Decide(e)
	if err != nil {
		return err
	}
	res, err := d.run(ctx, append(acts, decide...))
	if err != nil {
		return err
	}
	if !res.done[e] {
		return fmt.Errorf("two-phase commit driver: epoch %d not done (state %v)", e, d.m.State())
	}
	return nil
}

// Abort aborts epoch e everywhere (a declined or timed-out checkpoint, a
// shutdown). Afterwards the Driver takes no new epoch until Recover. The
// error joins the aborts that failed; recovery aborts those epochs again.
func (d *Driver) Abort(ctx context.Context, e Epoch) error {
	if d.m == nil {
		return fmt.Errorf("abort epoch %d: %w", e, ErrNotRecovered)
	}
	acts, err := d.m.Abort(e, errors.New("aborted by the runtime"))
	if err != nil {
		return err
	}
	res, err := d.run(ctx, acts)
	if fe, ok := errors.AsType[*FailError](err); ok && fe.Stage == StageRequested {
		return errors.Join(res.abortErrs...)
	}
	return err
}

// LastDecided returns the newest epoch known decided.
func (d *Driver) LastDecided() Epoch {
	if d.m == nil {
		return 0
	}
	return d.m.LastDecided()
}

// result is what a run of actions led to.
type result struct {
	done      map[Epoch]bool
	resumed   bool
	resume    Epoch
	abortErrs []error
}

// run executes acts and every action they lead to, in order, until none is
// left. It returns the *FailError of an ActFail, joined with the errors of
// the aborts that followed it.
func (d *Driver) run(ctx context.Context, acts []Action) (result, error) {
	res := result{done: map[Epoch]bool{}}
	var fail *FailError
	queue := acts
	for len(queue) > 0 {
		a := queue[0]
		queue = queue[1:]
		if fail != nil && a.Calls() && a.Kind != ActAbort {
			// After a failure only aborts are worth making; recovery
			// settles everything else.
			continue
		}
		var next []Action
		var err error
		switch a.Kind {
		case ActRecover:
			inDoubt, perr := d.parts[a.Participant].Recover(ctx)
			if perr != nil {
				next, err = d.m.RecoverFailed(a.Participant, perr)
			} else {
				next, err = d.m.Recovered(a.Participant, inDoubt)
			}
		case ActReadDecision:
			last, perr := d.log.LastDecided(ctx)
			if perr != nil {
				next, err = d.m.DecisionReadFailed(perr)
			} else {
				next, err = d.m.DecisionRead(last)
			}
		case ActPrepare:
			if perr := d.parts[a.Participant].Prepare(ctx, a.Epoch); perr != nil {
				next, err = d.m.PrepareFailed(a.Participant, a.Epoch, perr)
			} else {
				next, err = d.m.Prepared(a.Participant, a.Epoch)
			}
		case ActCommit:
			if perr := d.parts[a.Participant].Commit(ctx, a.Epoch); perr != nil {
				next, err = d.m.CommitFailed(a.Participant, a.Epoch, perr)
			} else {
				next, err = d.m.Committed(a.Participant, a.Epoch)
			}
		case ActAbort:
			if perr := d.parts[a.Participant].Abort(ctx, a.Epoch); perr != nil {
				res.abortErrs = append(res.abortErrs, fmt.Errorf("aborting epoch %d at %q: %w", a.Epoch, a.Participant, perr))
				next, err = d.m.AbortFailed(a.Participant, a.Epoch, perr)
			} else {
				next, err = d.m.Aborted(a.Participant, a.Epoch)
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
		queue = append(queue, next...)
	}
	switch {
	case fail == nil:
		return res, nil
	case len(res.abortErrs) == 0:
		return res, fail
	}
	return res, errors.Join(append([]error{fail}, res.abortErrs...)...)
}
