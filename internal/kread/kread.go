package kread

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// All calls fn for every committed data record of topic, partition by
// partition in offset order within each, up to the last stable offset as of
// the call, and returns when every partition reached it. conn are the
// connection options (kclient.Options). It reads every partition of the
// topic, or just the given ones.
func All(ctx context.Context, conn []kgo.Opt, topic string, fn func(*kgo.Record) error, partitions ...int32) error {
	admCl, err := kgo.NewClient(conn...)
	if err != nil {
		return err
	}
	defer admCl.Close()
	ends, err := kadm.NewClient(admCl).ListCommittedOffsets(ctx, topic)
	if err != nil {
		return fmt.Errorf("listing last stable offsets of %s: %w", topic, err)
	}
	starts, err := kadm.NewClient(admCl).ListStartOffsets(ctx, topic)
	if err != nil {
		return fmt.Errorf("listing start offsets of %s: %w", topic, err)
	}
	want := map[int32]bool{}
	for _, p := range partitions {
		want[p] = true
	}
	// remaining: partition -> last stable offset still to reach.
	remaining := map[int32]int64{}
	assign := map[int32]kgo.Offset{}
	var listErr error
	ends.Each(func(o kadm.ListedOffset) {
		if len(want) > 0 && !want[o.Partition] {
			return
		}
		if o.Err != nil {
			listErr = fmt.Errorf("last stable offset of %s/%d: %w", topic, o.Partition, o.Err)
			return
		}
		start, ok := starts.Lookup(topic, o.Partition)
		if !ok || start.Err != nil {
			listErr = fmt.Errorf("no start offset for %s/%d", topic, o.Partition)
			return
		}
		if o.Offset > start.Offset {
			remaining[o.Partition] = o.Offset
			assign[o.Partition] = kgo.NewOffset().At(start.Offset)
		}
	})
	if listErr != nil {
		return listErr
	}
	if len(remaining) == 0 {
		return nil
	}
	opts := append(append([]kgo.Opt{}, conn...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: assign}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(),
	)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	for len(remaining) > 0 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("reading %s to its end (%d partitions left): %w", topic, len(remaining), err)
		}
		var fetchErr error
		fs.EachError(func(t string, p int32, err error) {
			fetchErr = fmt.Errorf("reading %s/%d: %w", t, p, err)
		})
		if fetchErr != nil {
			return fetchErr
		}
		var fnErr error
		fs.EachRecord(func(r *kgo.Record) {
			end, ok := remaining[r.Partition]
			if !ok || fnErr != nil {
				return // partition done; later records are past the end
			}
			if !r.Attrs.IsControl() && r.Offset < end {
				fnErr = fn(r)
			}
			if r.Offset >= end-1 {
				delete(remaining, r.Partition)
			}
		})
		if fnErr != nil {
			return fnErr
		}
	}
	return nil
}
