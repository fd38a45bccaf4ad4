package datagen

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/internal/kread"
)

// A resuming generator (Options.Resume) writes in transactions, under one
// transactional id per topic, and starts after the highest number the
// topic holds committed. Together that keeps "the numbers 1..n, each once"
// true across any restart, a crash included:
//
//   - transactions are sequential and each holds the next numbers in
//     order, so what is committed is always a prefix 1..m: the highest
//     committed number is m, and nothing below it is missing;
//   - the new instance fences the transactional id before it reads, which
//     aborts what a crashed one left open (never to be seen under
//     read_committed) and stops a live one from committing more.

// transactionalID is the id every resuming generator of topic shares.
func transactionalID(topic string) string { return "pipeline-datagen-" + topic }

// lastWindow is the first stretch of offsets read back from each
// partition's end looking for its last number; it grows until a number is
// found or the partition's start is reached.
const lastWindow = 256

// lastNumber is the highest n of the committed {"n": n} records of topic,
// and false when it holds none. Records that are not such a number are
// skipped. It reads each partition back from its last stable offset, so
// its cost does not grow with the topic.
func lastNumber(ctx context.Context, conn []kgo.Opt, adm *kadm.Client, topic string) (int64, bool, error) {
	ends, err := adm.ListCommittedOffsets(ctx, topic)
	if err != nil {
		return 0, false, fmt.Errorf("listing last stable offsets of %s: %w", topic, err)
	}
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err != nil {
		return 0, false, fmt.Errorf("listing start offsets of %s: %w", topic, err)
	}
	var (
		last  int64
		found bool
	)
	var listed []kadm.ListedOffset
	ends.Each(func(o kadm.ListedOffset) { listed = append(listed, o) })
	for _, end := range listed {
		if end.Err != nil {
			return 0, false, fmt.Errorf("last stable offset of %s/%d: %w", topic, end.Partition, end.Err)
		}
		start, ok := starts.Lookup(topic, end.Partition)
		if !ok || start.Err != nil {
			return 0, false, fmt.Errorf("no start offset for %s/%d", topic, end.Partition)
		}
		for w := int64(lastWindow); ; w *= 4 {
			from := max(start.Offset, end.Offset-w)
			if from >= end.Offset {
				break // empty
			}
			n, ok, err := highestIn(ctx, conn, topic, end.Partition, from, end.Offset)
			if err != nil {
				return 0, false, err
			}
			if ok {
				if !found || n > last {
					last, found = n, true
				}
				break
			}
			if from == start.Offset {
				break
			}
		}
	}
	return last, found, nil
}

// highestIn is the highest number among the committed records of one
// partition in [from, end), end being its last stable offset.
func highestIn(ctx context.Context, conn []kgo.Opt, topic string, partition int32, from, end int64) (int64, bool, error) {
	var (
		highest int64
		found   bool
	)
	err := kread.Range(ctx, conn, topic, partition, from, end, func(r *kgo.Record) error {
		var v struct {
			N *int64 `json:"n"`
		}
		if n, ok := avroNumber(r.Value); ok {
			v.N = &n
		} else if json.Unmarshal(r.Value, &v) != nil {
			v.N = nil
		}
		if v.N != nil && (!found || *v.N > highest) {
			highest, found = *v.N, true
		}
		return nil
	})
	if err != nil {
		return 0, false, fmt.Errorf("reading the end of %s/%d: %w", topic, partition, err)
	}
	return highest, found, nil
}
