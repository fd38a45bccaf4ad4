package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/eoflow/pipeline/source"
)

// errPartitionsAdded ends an attempt after a checkpoint once partitions
// were added to a source topic: the next attempt reads them, from their
// earliest offset (Job.startOffsets), with every other partition resuming
// at that checkpoint.
var errPartitionsAdded = errors.New("partitions were added to a source topic")

// partitionDiscoveryInterval is how often a running job looks for
// partitions added to its source topics (Flink's
// partition.discovery.interval.ms).
const partitionDiscoveryInterval = 10 * time.Second

// partitionWatch looks for partitions added to the source topics while an
// attempt runs, and tells the coordinator loop once it found some. Adding
// a reader for them mid-epoch would put their records into a checkpoint
// whose offsets do not cover them; ending the attempt at a checkpoint and
// restoring keeps offsets and state describing the same input.
type partitionWatch struct {
	adm    *kadm.Client
	topics []string
	known  map[source.TopicPartition]bool
	every  time.Duration
	found  chan<- []source.TopicPartition
	log    *slog.Logger
}

func newPartitionWatch(j *Job, adm *kadm.Client, assigned map[source.TopicPartition]int64, found chan<- []source.TopicPartition) *partitionWatch {
	w := &partitionWatch{adm: adm, known: map[source.TopicPartition]bool{}, every: j.discoverEvery, found: found, log: j.log}
	for _, src := range j.cfg.Sources {
		w.topics = append(w.topics, src.Topics...)
	}
	for tp := range assigned {
		w.known[tp] = true
	}
	return w
}

func (w *partitionWatch) run(ctx context.Context) error {
	t := time.NewTicker(w.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		tps, err := source.Discover(ctx, w.adm, w.topics)
		if err != nil {
			// A reader meets a real problem itself; here, look again.
			w.log.Debug("looking for added partitions", "err", err)
			continue
		}
		var added []source.TopicPartition
		for _, tp := range tps {
			if !w.known[tp] {
				added = append(added, tp)
			}
		}
		if len(added) > 0 {
			w.found <- added // room for one: the watch sends once
			return nil
		}
	}
}

// partitionsAddedError names the partitions that end the attempt.
func partitionsAddedError(added []source.TopicPartition) error {
	return fmt.Errorf("%w: %v", errPartitionsAdded, added)
}
