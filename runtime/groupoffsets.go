package runtime

import (
	"context"
	"log/slog"

	"github.com/twmb/franz-go/pkg/kadm"

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
			if err != nil && ctx.Err() == nil && !warned {
				// Lag tools go stale, the job is fine: say it once.
				g.log.Warn("committing checkpointed offsets to the consumer group failed; lag tools will lag", "group", g.group, "err", err)
				warned = true
			}
		}
	}
}
