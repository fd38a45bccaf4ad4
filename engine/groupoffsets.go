package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/eoflow/pipeline/checkpoint"
)

// groupOffsets publishes the source offsets of each committed checkpoint to
// the consumer group named after the job, so that standard lag tools
// (kafka-consumer-groups, Burrow, exporters) show the job's real lag. The
// checkpoint, not the group, stays the source of truth: these commits are
// best effort, off the hot path, and only the newest is ever sent.
type groupOffsets struct {
	adm    *kadm.Client
	group  string
	log    *slog.Logger
	latest chan []checkpoint.SourceOffset // capacity 1: newest wins
}

func newGroupOffsets(adm *kadm.Client, group string, log *slog.Logger) *groupOffsets {
	return &groupOffsets{adm: adm, group: group, log: log, latest: make(chan []checkpoint.SourceOffset, 1)}
}

// publish hands over the offsets of a committed checkpoint, replacing any
// not yet sent. It never blocks.
func (g *groupOffsets) publish(offsets []checkpoint.SourceOffset) {
	for {
		select {
		case g.latest <- offsets:
			return
		default:
		}
		select {
		case <-g.latest: // drop the older one
		default:
		}
	}
}

// run sends the offsets handed over until ctx ends. The commit has no
// member: the group coordinator takes it only while the group is empty.
// A group with members means that processes of this job run in group mode
// (or that another consumer uses the job's name): the coordinator answers
// UNKNOWN_MEMBER_ID, and run ends the attempt with ErrOtherMode, since
// both modes would read every input and write every output.
func (g *groupOffsets) run(ctx context.Context) error {
	warned := false
	for {
		select {
		case <-ctx.Done():
			return nil
		case offs := <-g.latest:
			var os kadm.Offsets
			for _, o := range offs {
				os.Add(kadm.Offset{Topic: o.Topic, Partition: o.Partition, At: o.Offset, LeaderEpoch: -1})
			}
			resp, err := g.adm.CommitOffsets(ctx, g.group, os)
			if err == nil {
				err = resp.Error()
			}
			if groupHasMembers(err) {
				return g.otherMode(ctx, err)
			}
			if err != nil && ctx.Err() == nil && !warned {
				// Lag tools go stale, the job is fine: say it once.
				g.log.Warn("committing checkpointed offsets to the consumer group failed; lag tools will lag", "group", g.group, "err", err)
				warned = true
			}
		}
	}
}

// ErrOtherMode means that the job's consumer group has members while this
// single-mode process runs the job: processes of it in group mode, which
// would write every output a second time. Restarting cannot help, so the
// process stops.
var ErrOtherMode = errors.New("the job's consumer group has members")

// groupHasMembers reports whether err is the group coordinator's answer to
// a commit without a member while the group has members.
func groupHasMembers(err error) bool {
	return errors.Is(err, kerr.UnknownMemberID) || errors.Is(err, kerr.IllegalGeneration) ||
		errors.Is(err, kerr.FencedInstanceID) || errors.Is(err, kerr.RebalanceInProgress)
}

// otherMode is the error that stops a single-mode process whose commit
// found members in the job's group (err), naming them if it can.
func (g *groupOffsets) otherMode(ctx context.Context, err error) error {
	var members []string
	if described, derr := g.adm.DescribeGroups(ctx, g.group); derr == nil {
		for _, d := range described {
			for _, m := range d.Members {
				id := m.ClientID
				if m.InstanceID != nil {
					id = *m.InstanceID
				}
				members = append(members, id)
			}
		}
	}
	sort.Strings(members)
	return fmt.Errorf("%w (%v) while this process runs the job in single mode: processes of the job in group mode (or another consumer using the group's name %s) "+
		"read the same input and would write every output again, so this one stops (its last checkpoint stands). "+
		"Stop the others, or run every process in one mode (a job moves between modes only through a savepoint); "+
		"members killed without leaving are forgotten after their scale.session_timeout: %w",
		ErrOtherMode, members, g.group, err)
}
