package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/internal/kread"
	"github.com/eoflow/pipeline/internal/mutant"
)

// The local shuffle. A record of a source partition this process reads,
// whose key group belongs to a repartition partition q this process also
// owns, need not cross the repartition topic: the source task hands it to
// the worker that owns its key group, as single mode does, and the
// keyed operator evaluates it there. That skips the frame's encoding, the
// producer, the broker and the consumer, which is most of what group mode
// costs over single mode (bench/results/2026-12-06-model.md).
//
// Why it stays exactly-once: the record's source offset and the keyed
// state it changed are committed in one transaction, the process's own,
// by the checkpoint whose barrier follows it on the source task's
// channel, exactly as in single mode. The repartition topic decoupled
// the two sides of a record's path so that different processes could
// commit them; within one process they commit together. A crash aborts
// both; a revocation commits both (the final checkpoint); a member the
// group moved on from cannot commit either (its offsets are refused).
// The next owners find a committed source offset and a state that agree,
// whoever they are, and go on by the topic or locally as they decide.
//
// Why the order of a key's records holds: the keyed side reads the
// records of a source partition p from q in p's order, and a key's
// records are all in one p. The local path carries p's records in order
// too, but both paths must not carry p's records to q at once: records
// of p an earlier owner of p wrote to q, still unread, would reach the
// keyed operator after p's later records sent locally ("last" would take
// the wrong one). So an attempt takes the local path for q only when q
// has no input left to read after its committed offset and no
// transaction open on it (Unread; event-time records do not count):
// then no record of p is in q ahead of those this attempt reads, and
// none arrives later, since only p's owner writes p's records and that
// is this process, for the generation.
// Otherwise q goes through the topic for the whole attempt (for a
// process that is alone in the group, q is always empty after its
// first attempt).
//
// Event time (groupeventtime.go): lateness is judged on the source side,
// against p's own watermark, on either path. The keyed side learns p's
// time from the event-time records p's owner writes to every q at each
// barrier, through the topic even when q is local: such a record is read
// only after its epoch committed, so after every record of p before its
// barrier reached the operator in memory. What q reported of p is then
// at most the watermark of p at any later record of p, which is the
// condition that makes a window's contents depend on the input alone;
// the order condition above keeps it across owners.

// localShufflePartitions is the repartition partitions, among those
// attempt a of a repartitioning job owns (starting at a.offsets), whose
// records from the attempt's own source partitions take the local path:
// nil when none do.
func (j *Job) localShufflePartitions(ctx context.Context, a *attempt) ([]int32, error) {
	sh := j.shuffle
	from := map[int32]int64{}
	for tp, off := range a.offsets {
		if tp.Topic == sh.repartition {
			from[tp.Partition] = off
		}
	}
	if len(from) == 0 {
		return nil, nil
	}
	unread, err := a.cluster.Unread(ctx, sh.repartition, from)
	if err != nil {
		return nil, fmt.Errorf("looking for records left in %s: %w", sh.repartition, err)
	}
	var local []int32
	for q := range from {
		if !unread[q] || j.plantedBug == plantedLocalShuffleOverBacklog || mutant.On("local-shuffle-over-backlog") {
			local = append(local, q)
		}
	}
	slices.Sort(local)
	return local, nil
}

// localSet is the repartition partitions of the local path, by
// partition (nil: none): what the routers look a key group's partition
// up in.
func localSet(local []int32, partitions int) []bool {
	if len(local) == 0 {
		return nil
	}
	set := make([]bool, partitions)
	for _, q := range local {
		set[q] = true
	}
	return set
}

// unread is kafkaCluster.Unread: the high watermark and last stable
// offset of each partition, and a read from its offset to the latter.
func unread(ctx context.Context, adm *kadm.Client, conn []kgo.Opt, topic string, from map[int32]int64) (map[int32]bool, error) {
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return nil, err
	}
	stable, err := adm.ListCommittedOffsets(ctx, topic)
	if err != nil {
		return nil, err
	}
	out := map[int32]bool{}
	for p, off := range from {
		end, ok := ends.Lookup(topic, p)
		lso, ok2 := stable.Lookup(topic, p)
		if !ok || !ok2 || end.Err != nil || lso.Err != nil {
			return nil, fmt.Errorf("partition %d: its offsets are not listed", p)
		}
		switch {
		case lso.Offset < end.Offset:
			out[p] = true // a transaction is open on it
			continue
		case lso.Offset <= off:
			out[p] = false // nothing after off: no read
			continue
		}
		// Records after off, or only transaction markers, aborted
		// records and event-time records: a read tells.
		err := kread.Range(ctx, conn, topic, p, off, lso.Offset, func(r *kgo.Record) error {
			if isInput(r) {
				return errFound
			}
			return nil
		})
		switch {
		case errors.Is(err, errFound):
			out[p] = true
		case err != nil:
			return nil, err
		default:
			out[p] = false
		}
	}
	return out, nil
}

// errFound stops unread's read at the first input.
var errFound = errors.New("found")

// isInput reports whether rec, a repartition record, carries inputs (a
// bundle or a frame), not source partitions' event times: those may be
// read after later inputs sent locally, since what they report only
// grows (groupeventtime.go), and every attempt after the first finds the
// last epoch's still unread.
func isInput(rec *kgo.Record) bool {
	for _, h := range rec.Headers {
		if h.Key == headerEventTimes {
			return false
		}
	}
	return true
}

// countTrue is how many of set are true.
func countTrue(set []bool) int {
	n := 0
	for _, b := range set {
		if b {
			n++
		}
	}
	return n
}
