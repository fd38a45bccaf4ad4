package checkpoint

import (
	"fmt"
	"slices"
	"strings"
)

// Ready is what the coordinator asks its caller to do, collected since the
// last Advance. The package documentation says in which order to act.
type Ready struct {
	// Fail, when set, is a *FailError: the job must stop and restart from
	// the last completed checkpoint. Reported once.
	Fail error
	// Aborted checkpoints, in id order: their snapshots and transactions
	// are discarded; they will never commit.
	Aborted []Abort
	// Trigger lists new checkpoints, in id order: inject barrier N at every
	// source, for each N.
	Trigger []ID
	// Commit, when not 0, is the one checkpoint to commit now: every task
	// acked it and every earlier checkpoint committed. Report the outcome
	// with Committed or CommitFailed. At most one commit is outstanding.
	Commit ID
	// Completed checkpoints, in id order: their commit succeeded.
	Completed []ID
}

// Empty reports whether rd asks for nothing.
func (rd Ready) Empty() bool {
	return rd.Fail == nil && len(rd.Aborted) == 0 && len(rd.Trigger) == 0 &&
		rd.Commit == 0 && len(rd.Completed) == 0
}

// String renders rd on one line for logs and test transcripts, e.g.
// "trigger=[3] commit=2 completed=[1]"; "" when empty.
func (rd Ready) String() string {
	var parts []string
	if len(rd.Trigger) > 0 {
		parts = append(parts, fmt.Sprintf("trigger=%v", rd.Trigger))
	}
	if rd.Commit != 0 {
		parts = append(parts, fmt.Sprintf("commit=%d", rd.Commit))
	}
	if len(rd.Completed) > 0 {
		parts = append(parts, fmt.Sprintf("completed=%v", rd.Completed))
	}
	if len(rd.Aborted) > 0 {
		ab := make([]string, len(rd.Aborted))
		for i, a := range rd.Aborted {
			ab[i] = fmt.Sprintf("%d:%v", a.ID, a.Reason)
		}
		parts = append(parts, "aborted=["+strings.Join(ab, " ")+"]")
	}
	if rd.Fail != nil {
		parts = append(parts, fmt.Sprintf("fail=%q", rd.Fail.Error()))
	}
	return strings.Join(parts, " ")
}

// outbox accumulates outputs between Advances and remembers how much of
// them the last Ready handed out, so that inputs arriving between Ready and
// Advance are kept for the next Ready instead of being dropped.
type outbox struct {
	rd     Ready
	handed struct {
		aborted, trigger, completed int
		commit                      ID
		fail                        bool
	}
}

// HasReady reports whether Ready would ask for anything.
func (c *Coordinator) HasReady() bool { return !c.out.rd.Empty() }

// Ready returns the outputs collected since the last Advance. The caller
// acts on them in the documented order and then calls Advance. A commit
// returned here counts as handed out: from now on only the caller knows
// whether it lands, so a failure leaves it in doubt instead of aborting it.
func (c *Coordinator) Ready() Ready {
	rd := Ready{
		Fail:      c.out.rd.Fail,
		Aborted:   slices.Clone(c.out.rd.Aborted),
		Trigger:   slices.Clone(c.out.rd.Trigger),
		Commit:    c.out.rd.Commit,
		Completed: slices.Clone(c.out.rd.Completed),
	}
	h := &c.out.handed
	h.aborted, h.trigger, h.completed = len(rd.Aborted), len(rd.Trigger), len(rd.Completed)
	h.commit, h.fail = rd.Commit, rd.Fail != nil
	if p := c.find(rd.Commit); p != nil {
		p.handedOut = true
	}
	return rd
}

// Advance acknowledges the last Ready: exactly what it returned is
// dropped; anything produced by inputs since then stays for the next Ready.
func (c *Coordinator) Advance() {
	o := &c.out
	o.rd.Aborted = slices.Delete(o.rd.Aborted, 0, o.handed.aborted)
	o.rd.Trigger = slices.Delete(o.rd.Trigger, 0, o.handed.trigger)
	o.rd.Completed = slices.Delete(o.rd.Completed, 0, o.handed.completed)
	if o.rd.Commit == o.handed.commit {
		o.rd.Commit = 0
	}
	if o.handed.fail {
		o.rd.Fail = nil
	}
	o.handed = outbox{}.handed
}
