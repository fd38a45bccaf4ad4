package engine

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/eoflow/pipeline/checkpoint"
	"github.com/eoflow/pipeline/source"
	"github.com/eoflow/pipeline/twophase"
)

// The coordinator loop's phases: besides taking checkpoints, an attempt
// ends on purpose in two ways (a graceful stop, a restart to read added
// partitions), and a group-mode stop with a savepoint goes through a step
// of its own first. Every change of phase goes through enter, every event
// that changes it is below.
//
//	running --partitions added--> restarting --a checkpoint done--> restart due --savepoints written--> errPartitionsAdded
//	running, restarting --stop--> stopping --final checkpoint done, savepoints written--> errStopped
//	running, restarting --stop with a savepoint, group, this process alone--> draining --repartition topic drained--> stopping
//	running, restarting --stop with a savepoint, group, others running--> group savepoint --written or failed--> stopping
//	running, restarting, restart due --the group revokes the assignment--> yielding --final checkpoint done--> errYielded
//
// A stop wins over a restart: added partitions are read by the next start
// anyway, and over a revocation: its final checkpoint commits all the
// same, and the process ends.
type loopPhase int

const (
	// phaseRunning: checkpoints on schedule and on request.
	phaseRunning loopPhase = 1 + iota
	// phaseRestarting: partitions were added to a source topic (added); a
	// checkpoint was asked for, and the attempt ends once one is done, so
	// that the next one reads them from a checkpoint that covers the
	// others.
	phaseRestarting
	// phaseRestartDue: a checkpoint was done since; the attempt ends once
	// no savepoint waits (errPartitionsAdded).
	phaseRestartDue
	// phaseDraining: a stop with a savepoint in group mode, this process
	// owning every partition: its sources stopped after pausedAfter, and
	// the final checkpoint is taken once a later checkpoint shows the
	// repartition topic drained.
	phaseDraining
	// phaseGroupSavepoint: a stop with a savepoint in group mode while
	// other processes run: the group's savepoint is taken on a goroutine
	// of the loop's (remote says how it went), then the final checkpoint.
	phaseGroupSavepoint
	// phaseStopping: the final checkpoint (final) was asked for; the
	// attempt ends once it is done everywhere (the machine is Stopped)
	// and no savepoint waits (errStopped).
	phaseStopping
	// phaseYielding: the consumer group revoked the assignment (group
	// mode): a final checkpoint (final) commits what the attempt did so
	// far, in the generation that is ending, and the attempt ends once it
	// is done (errYielded), without waiting for savepoints.
	phaseYielding
)

var loopPhaseNames = [...]string{
	phaseRunning: "running", phaseRestarting: "restarting", phaseRestartDue: "restart due",
	phaseDraining: "draining", phaseGroupSavepoint: "group savepoint", phaseStopping: "stopping",
	phaseYielding: "yielding",
}

func (m loopPhase) String() string {
	if m > 0 && int(m) < len(loopPhaseNames) {
		return loopPhaseNames[m]
	}
	return "loopPhase(" + strconv.Itoa(int(m)) + ")"
}

// loopState is the loop's phase and what that phase needs.
type loopState struct {
	phase       loopPhase
	added       []source.TopicPartition // restarting, restart due
	pausedAfter checkpoint.ID           // draining
	remote      chan error              // group savepoint
	final       checkpoint.ID           // stopping, yielding
}

// allowed lists the phases each phase may change to.
var allowed = map[loopPhase][]loopPhase{
	phaseRunning:        {phaseRestarting, phaseDraining, phaseGroupSavepoint, phaseStopping, phaseYielding},
	phaseRestarting:     {phaseRestarting, phaseRestartDue, phaseDraining, phaseGroupSavepoint, phaseStopping, phaseYielding},
	phaseRestartDue:     {phaseDraining, phaseGroupSavepoint, phaseStopping, phaseYielding},
	phaseDraining:       {phaseStopping},
	phaseGroupSavepoint: {phaseStopping},
	phaseStopping:       {},
	phaseYielding:       {phaseStopping},
}

// enter changes the loop's phase to next, if the diagram allows it.
func (l *coordinatorLoop) enter(next loopState) error {
	from := l.state.phase
	for _, to := range allowed[from] {
		if to == next.phase {
			l.log.Debug("coordinator loop", "from", from.String(), "to", next.phase.String())
			l.state = next
			return nil
		}
	}
	return fmt.Errorf("coordinator loop: %v cannot become %v", from, next.phase)
}

// stopping reports whether a stop is under way: no savepoint of its own is
// taken then, and added partitions wait for the next start.
func (l *coordinatorLoop) stopping() bool {
	switch l.state.phase {
	case phaseDraining, phaseGroupSavepoint, phaseStopping, phaseYielding:
		return true
	}
	return false
}

// onStop takes the final checkpoint of a graceful stop, as a savepoint if
// one was asked for.
func (l *coordinatorLoop) onStop() error {
	if l.state.phase == phaseYielding {
		// The final checkpoint of the revocation is under way: it is the
		// stop's. A savepoint would need the group's (the assignment is
		// being taken back): the stop goes on without it.
		if l.stopSavepoint() != "" {
			l.sp.finalErr = errors.New("the consumer group rebalanced as the stop began: no savepoint was taken; start the job again and stop it with a savepoint once it runs")
		}
		return l.enter(loopState{phase: phaseStopping, final: l.state.final})
	}
	if l.group == nil || l.stopSavepoint() == "" {
		return l.finalCheckpoint(true)
	}
	// A savepoint of a group-mode job must hold every record read from
	// the sources in its state: the sources stop, the keyed side reads the
	// repartition topic to its end, then the final checkpoint is taken.
	if !l.group.soleOwner {
		// Other processes run: every member pauses while this one writes
		// the savepoint from Kafka (groupsavepoint.go), then this one
		// stops. The loop goes on meanwhile: it is a member that must
		// pause and ack too.
		remote := make(chan error, 1)
		if err := l.enter(loopState{phase: phaseGroupSavepoint, remote: remote}); err != nil {
			return err
		}
		dir := l.stopSavepoint()
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			remote <- l.group.savepoint(l.ctx, dir)
		}()
		return nil
	}
	l.log.Info("stopping with a savepoint: the sources stop, and the repartition topic drains first")
	if err := l.enter(loopState{phase: phaseDraining, pausedAfter: l.lastTriggered}); err != nil {
		return err
	}
	l.group.pause()
	l.step(twophase.Msg{Type: twophase.MsgTriggerNow, Now: l.now()})
	return nil
}

// onGroupSavepoint: the group's savepoint of a stop was written, or
// failed; the final checkpoint follows either way.
func (l *coordinatorLoop) onGroupSavepoint(err error) error {
	if err != nil {
		l.sp.finalErr = err
		l.log.Error("the group savepoint failed; stopping without it", "err", err)
	}
	return l.finalCheckpoint(false)
}

// onDrainedCheck looks, at checkpoint id (offsets), whether the
// repartition topic is drained, while draining: only a checkpoint after
// the one the sources stopped after shows it (an earlier barrier may
// precede records the sources read before they stopped, which reach the
// repartition topic only in a later epoch's transaction). Then the final
// checkpoint follows.
func (l *coordinatorLoop) onDrainedCheck(id checkpoint.ID, offsets []checkpoint.SourceOffset) error {
	if l.state.phase != phaseDraining || id <= l.state.pausedAfter {
		return nil
	}
	// A failure to tell (the broker slow or away for a moment) is asked
	// again at the next checkpoint.
	switch drained, err := l.group.drained(offsets); {
	case err != nil:
		l.log.Warn("could not tell whether the repartition topic is drained; the next checkpoint looks again", "checkpoint", id, "err", err)
	case drained:
		l.log.Info("the repartition topic is drained", "checkpoint", id)
		return l.finalCheckpoint(true)
	}
	return nil
}

// finalCheckpoint takes the final checkpoint of a graceful stop, as a
// savepoint when one was asked for and withSavepoint.
func (l *coordinatorLoop) finalCheckpoint(withSavepoint bool) error {
	if err := l.m.Step(twophase.Msg{Type: twophase.MsgStop, Now: l.now()}); err != nil {
		return err
	}
	id := l.m.Promised()
	if err := l.enter(loopState{phase: phaseStopping, final: id}); err != nil {
		return err
	}
	l.log.Info("stopping: taking a final checkpoint", "checkpoint", id)
	if dir := l.stopSavepoint(); dir != "" && withSavepoint {
		if err := l.sp.start(id, dir, nil, l.now()); err != nil {
			l.log.Error("the final checkpoint will not be a savepoint", "err", err)
			l.sp.finalErr = err
		}
	}
	return nil
}

// finalBarrier reports whether barrier id is the last of the attempt: the
// final checkpoint of a stop or a revocation. No epoch opens after it,
// so the sources read nothing more: what they would read belongs to no
// checkpoint, and a revoked member's kept state (groupmode.go) must be
// exactly what that checkpoint committed.
func (l *coordinatorLoop) finalBarrier(id checkpoint.ID) bool {
	switch l.state.phase {
	case phaseStopping, phaseYielding:
		return id == l.state.final
	}
	return false
}

// onYield: the consumer group revokes the assignment (membership's
// onRevoked, group mode). Rather than abort the open epoch and leave its
// work to be done again, the attempt commits it as a final checkpoint
// while its generation still holds (the coordinator accepts the commit
// until the group's next generation is formed, and waits for this member
// to rejoin), then ends: the staying processes lose no work to the
// rebalance, and their committed output pauses for the rebalance and
// the restore only. A stop under way wins (its final checkpoint commits
// too); so does a failure (the epoch aborts).
func (l *coordinatorLoop) onYield() error {
	if l.stopping() { // yielding already, or stopping
		return nil
	}
	if err := l.m.Step(twophase.Msg{Type: twophase.MsgStop, Now: l.now()}); err != nil {
		return err
	}
	id := l.m.Promised()
	l.log.Info("the consumer group revoked the assignment: committing a final checkpoint before the rebalance", "checkpoint", id)
	return l.enter(loopState{phase: phaseYielding, final: id})
}

// onPartitionsAdded ends the attempt after the next checkpoint, so that
// the next one reads the added partitions. A stop under way wins.
func (l *coordinatorLoop) onPartitionsAdded(added []source.TopicPartition) error {
	if l.stopping() {
		l.log.Info("partitions were added to a source topic; the job is stopping, and its next start reads them", "partitions", added)
		return nil
	}
	if err := l.enter(loopState{phase: phaseRestarting, added: added}); err != nil {
		return err
	}
	l.log.Info("partitions were added to a source topic; restarting after the next checkpoint to read them", "partitions", added)
	l.step(twophase.Msg{Type: twophase.MsgTriggerNow, Now: l.now()})
	return nil
}

// epochDone: epoch id is committed everywhere.
func (l *coordinatorLoop) epochDone(id checkpoint.ID) error {
	switch l.state.phase {
	case phaseStopping, phaseYielding:
		if id == l.state.final {
			l.log.Info("final checkpoint committed", "checkpoint", id)
		}
	case phaseRestarting:
		return l.enter(loopState{phase: phaseRestartDue, added: l.state.added})
	}
	return nil
}

// done ends the attempt once what it waited for happened and no savepoint
// is pending on it: the final checkpoint of a graceful stop is done, or a
// checkpoint after partitions were added. A revoked attempt ends once its
// final checkpoint is done: the group waits for it, and a savepoint in
// progress is abandoned (its asker is told to take it again).
func (l *coordinatorLoop) done() error {
	if l.state.phase == phaseYielding && l.m.State() == twophase.StateStopped {
		return errYielded
	}
	if len(l.sp.pending) > 0 {
		return nil
	}
	switch {
	case l.state.phase == phaseStopping && l.m.State() == twophase.StateStopped:
		return &stoppedError{savepoint: l.sp.finalErr}
	case l.state.phase == phaseRestartDue:
		return partitionsAddedError(l.state.added)
	}
	return nil
}
