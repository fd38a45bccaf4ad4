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
	want := map[int32]bool{}
	for _, p := range partitions {
		want[p] = true
	}
	ranges, err := listRanges(ctx, conn, topic, func(p int32) (int64, bool) {
		return 0, len(want) == 0 || want[p]
	})
	if err != nil {
		return err
	}
	return scan(ctx, conn, topic, ranges, func(r *kgo.Record) (bool, error) { return false, fn(r) })
}

// After reports whether topic holds a committed data record at or after
// from (per partition; the partitions not in from are not looked at)
// and before the last stable offset as of the call. Unlike a poll that
// waits a while for a record, its answer does not depend on how fast the
// broker answers: it reads each partition through to the end it listed.
func After(ctx context.Context, conn []kgo.Opt, topic string, from map[int32]int64) (bool, error) {
	ranges, err := listRanges(ctx, conn, topic, func(p int32) (int64, bool) {
		off, ok := from[p]
		return off, ok
	})
	if err != nil {
		return false, err
	}
	found := false
	err = scan(ctx, conn, topic, ranges, func(*kgo.Record) (bool, error) {
		found = true
		return true, nil
	})
	return found, err
}

// Range calls fn for every committed data record of one partition of
// topic in [from, end), in offset order, end being a last stable offset
// listed before: the read stops there, past markers and aborted records
// it never returns.
func Range(ctx context.Context, conn []kgo.Opt, topic string, partition int32, from, end int64, fn func(*kgo.Record) error) error {
	if from >= end {
		return nil
	}
	return scan(ctx, conn, topic, map[int32]span{partition: {from: from, end: end}}, func(r *kgo.Record) (bool, error) {
		return false, fn(r)
	})
}

// Tail calls fn for the committed data records among the last n offsets
// before the last stable offset of every partition of topic, partition by
// partition in offset order: the newest committed records, n at most per
// partition (fewer where some of those offsets are transaction markers or
// aborted records). It reads at most n offsets of each partition, however
// long the topic: how the admin API shows the newest dead letters.
func Tail(ctx context.Context, conn []kgo.Opt, topic string, n int64, fn func(*kgo.Record) error) error {
	ranges, err := listRanges(ctx, conn, topic, func(int32) (int64, bool) { return 0, true })
	if err != nil {
		return err
	}
	for p, s := range ranges {
		s.from = max(s.from, s.end-n)
		ranges[p] = s
	}
	return scan(ctx, conn, topic, ranges, func(r *kgo.Record) (bool, error) { return false, fn(r) })
}

// span is what is left to read of one partition: from offset from up to
// (not including) the last stable offset end.
type span struct{ from, end int64 }

// listRanges lists the start and last stable offsets of topic and returns
// the span of every partition that first names (with the offset to read
// from, raised to the log start) and that holds anything there.
func listRanges(ctx context.Context, conn []kgo.Opt, topic string, first func(p int32) (int64, bool)) (map[int32]span, error) {
	admCl, err := kgo.NewClient(conn...)
	if err != nil {
		return nil, err
	}
	defer admCl.Close()
	ends, err := kadm.NewClient(admCl).ListCommittedOffsets(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("listing last stable offsets of %s: %w", topic, err)
	}
	starts, err := kadm.NewClient(admCl).ListStartOffsets(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("listing start offsets of %s: %w", topic, err)
	}
	ranges := map[int32]span{}
	var listErr error
	ends.Each(func(o kadm.ListedOffset) {
		from, ok := first(o.Partition)
		if !ok || listErr != nil {
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
		from = max(from, start.Offset)
		if o.Offset > from {
			ranges[o.Partition] = span{from: from, end: o.Offset}
		}
	})
	return ranges, listErr
}

// scan reads the spans with read_committed and calls fn for every data
// record in them, until every span is read through or fn says stop.
func scan(ctx context.Context, conn []kgo.Opt, topic string, spans map[int32]span, fn func(*kgo.Record) (stop bool, err error)) error {
	if len(spans) == 0 {
		return nil
	}
	// remaining: partition -> last stable offset still to reach.
	remaining := map[int32]int64{}
	assign := map[int32]kgo.Offset{}
	for p, s := range spans {
		remaining[p] = s.end
		assign[p] = kgo.NewOffset().At(s.from)
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
		stop := false
		fs.EachRecord(func(r *kgo.Record) {
			end, ok := remaining[r.Partition]
			if !ok || fnErr != nil || stop {
				return // partition done; later records are past the end
			}
			if !r.Attrs.IsControl() && r.Offset < end {
				stop, fnErr = fn(r)
			}
			if r.Offset >= end-1 {
				delete(remaining, r.Partition)
			}
		})
		if fnErr != nil || stop {
			return fnErr
		}
	}
	return nil
}
