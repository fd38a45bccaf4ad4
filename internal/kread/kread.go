package kread

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Cluster is what a read asks of Kafka: where each partition of a topic
// starts and where its committed data ends, and a read_committed
// consumer of some of its partitions. Dial gives Kafka's (franz-go
// clients made from connection options); the in-memory model of the
// broker-free tests is another (internal/testkit/memkafka).
type Cluster interface {
	// Offsets lists the log start and the last stable offset of every
	// partition of topic; a partition whose offsets could not be listed
	// has its Err set.
	Offsets(ctx context.Context, topic string) (map[int32]Offsets, error)
	// Consume starts a consumer of the given partitions of topic, each at
	// its offset, with read_committed and control records kept (the
	// markers that end transactions), so a read can tell where it is.
	Consume(topic string, from map[int32]int64) (Consumer, error)
}

// Offsets are where one partition's log starts and where its committed
// data ends: the last stable offset; or why they are not known.
type Offsets struct {
	Start, LastStable int64
	Err               error
}

// Consumer is a consumer that Cluster.Consume started; *kgo.Client is
// one.
type Consumer interface {
	PollFetches(ctx context.Context) kgo.Fetches
	Close()
}

// Dial is the Kafka cluster that conn (kclient.Options) connects to: each
// Offsets and Consume makes a client of its own.
func Dial(conn []kgo.Opt) Cluster { return kafka(conn) }

type kafka []kgo.Opt

func (k kafka) Offsets(ctx context.Context, topic string) (map[int32]Offsets, error) {
	admCl, err := kgo.NewClient(k...)
	if err != nil {
		return nil, err
	}
	defer admCl.Close()
	adm := kadm.NewClient(admCl)
	ends, err := adm.ListCommittedOffsets(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("listing last stable offsets of %s: %w", topic, err)
	}
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("listing start offsets of %s: %w", topic, err)
	}
	out := map[int32]Offsets{}
	ends.Each(func(o kadm.ListedOffset) {
		start, ok := starts.Lookup(topic, o.Partition)
		switch {
		case o.Err != nil:
			out[o.Partition] = Offsets{Err: fmt.Errorf("last stable offset of %s/%d: %w", topic, o.Partition, o.Err)}
		case !ok || start.Err != nil:
			out[o.Partition] = Offsets{Err: fmt.Errorf("no start offset for %s/%d", topic, o.Partition)}
		default:
			out[o.Partition] = Offsets{Start: start.Offset, LastStable: o.Offset}
		}
	})
	return out, nil
}

func (k kafka) Consume(topic string, from map[int32]int64) (Consumer, error) {
	assign := make(map[int32]kgo.Offset, len(from))
	for p, off := range from {
		assign[p] = kgo.NewOffset().At(off)
	}
	opts := append(append([]kgo.Opt{}, k...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: assign}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(),
	)
	return kgo.NewClient(opts...)
}

// All calls fn for every committed data record of topic, partition by
// partition in offset order within each, up to the last stable offset as of
// the call, and returns when every partition reached it. conn are the
// connection options (kclient.Options). It reads every partition of the
// topic, or just the given ones.
func All(ctx context.Context, conn []kgo.Opt, topic string, fn func(*kgo.Record) error, partitions ...int32) error {
	return AllOn(ctx, Dial(conn), topic, fn, partitions...)
}

// AllOn is All on cl.
func AllOn(ctx context.Context, cl Cluster, topic string, fn func(*kgo.Record) error, partitions ...int32) error {
	want := map[int32]bool{}
	for _, p := range partitions {
		want[p] = true
	}
	ranges, err := listRanges(ctx, cl, topic, func(p int32) (int64, bool) {
		return 0, len(want) == 0 || want[p]
	})
	if err != nil {
		return err
	}
	return scan(ctx, cl, topic, ranges, func(r *kgo.Record) (bool, error) { return false, fn(r) })
}

// AllTo is All over every partition, and returns where it stopped: the
// last stable offset of each partition as of the call, the offset a
// reader that goes on reading the topic continues from (how a job reads
// a table to its end, then follows its updates).
func AllTo(ctx context.Context, conn []kgo.Opt, topic string, fn func(*kgo.Record) error) (map[int32]int64, error) {
	return AllToOn(ctx, Dial(conn), topic, fn)
}

// AllToOn is AllTo on cl.
func AllToOn(ctx context.Context, cl Cluster, topic string, fn func(*kgo.Record) error) (map[int32]int64, error) {
	return AllToOfOn(ctx, cl, topic, nil, fn)
}

// AllToOf is AllTo over the partitions keep keeps (nil: all): the ends it
// returns are theirs only.
func AllToOf(ctx context.Context, conn []kgo.Opt, topic string, keep func(partition int32) bool, fn func(*kgo.Record) error) (map[int32]int64, error) {
	return AllToOfOn(ctx, Dial(conn), topic, keep, fn)
}

// AllToOfOn is AllToOf on cl.
func AllToOfOn(ctx context.Context, cl Cluster, topic string, keep func(partition int32) bool, fn func(*kgo.Record) error) (map[int32]int64, error) {
	return FromToOn(ctx, cl, topic, func(p int32) (int64, bool) { return 0, keep == nil || keep(p) }, fn)
}

// FromTo is AllToOf from a position of each partition: from gives where
// to start reading a partition (raised to its log start), and whether to
// read it at all. It returns the last stable offset as of the call of
// every partition it reads (how a table kept across a rebalance reads on
// from where it stood).
func FromTo(ctx context.Context, conn []kgo.Opt, topic string, from func(partition int32) (int64, bool), fn func(*kgo.Record) error) (map[int32]int64, error) {
	return FromToOn(ctx, Dial(conn), topic, from, fn)
}

// FromToOn is FromTo on cl.
func FromToOn(ctx context.Context, cl Cluster, topic string, from func(partition int32) (int64, bool), fn func(*kgo.Record) error) (map[int32]int64, error) {
	ranges, ends, err := listRangesTo(ctx, cl, topic, from)
	if err != nil {
		return nil, err
	}
	if err := scan(ctx, cl, topic, ranges, func(r *kgo.Record) (bool, error) { return false, fn(r) }); err != nil {
		return nil, err
	}
	return ends, nil
}

// After reports whether topic holds a committed data record at or after
// from (per partition; the partitions not in from are not looked at)
// and before the last stable offset as of the call. Unlike a poll that
// waits a while for a record, its answer does not depend on how fast the
// broker answers: it reads each partition through to the end it listed.
func After(ctx context.Context, conn []kgo.Opt, topic string, from map[int32]int64) (bool, error) {
	return AfterOn(ctx, Dial(conn), topic, from)
}

// AfterOn is After on cl.
func AfterOn(ctx context.Context, cl Cluster, topic string, from map[int32]int64) (bool, error) {
	ranges, err := listRanges(ctx, cl, topic, func(p int32) (int64, bool) {
		off, ok := from[p]
		return off, ok
	})
	if err != nil {
		return false, err
	}
	found := false
	err = scan(ctx, cl, topic, ranges, func(*kgo.Record) (bool, error) {
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
	return RangeOn(ctx, Dial(conn), topic, partition, from, end, fn)
}

// RangeOn is Range on cl.
func RangeOn(ctx context.Context, cl Cluster, topic string, partition int32, from, end int64, fn func(*kgo.Record) error) error {
	if from >= end {
		return nil
	}
	return scan(ctx, cl, topic, map[int32]span{partition: {from: from, end: end}}, func(r *kgo.Record) (bool, error) {
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
	return TailOn(ctx, Dial(conn), topic, n, fn)
}

// TailOn is Tail on cl.
func TailOn(ctx context.Context, cl Cluster, topic string, n int64, fn func(*kgo.Record) error) error {
	ranges, err := listRanges(ctx, cl, topic, func(int32) (int64, bool) { return 0, true })
	if err != nil {
		return err
	}
	for p, s := range ranges {
		s.from = max(s.from, s.end-n)
		ranges[p] = s
	}
	return scan(ctx, cl, topic, ranges, func(r *kgo.Record) (bool, error) { return false, fn(r) })
}

// span is what is left to read of one partition: from offset from up to
// (not including) the last stable offset end.
type span struct{ from, end int64 }

// listRanges lists the start and last stable offsets of topic and returns
// the span of every partition that first names (with the offset to read
// from, raised to the log start) and that holds anything there.
func listRanges(ctx context.Context, cl Cluster, topic string, first func(p int32) (int64, bool)) (map[int32]span, error) {
	ranges, _, err := listRangesTo(ctx, cl, topic, first)
	return ranges, err
}

// listRangesTo is listRanges, and also returns the last stable offset of
// every partition first names.
func listRangesTo(ctx context.Context, cl Cluster, topic string, first func(p int32) (int64, bool)) (map[int32]span, map[int32]int64, error) {
	listed, err := cl.Offsets(ctx, topic)
	if err != nil {
		return nil, nil, err
	}
	ranges, stable := map[int32]span{}, map[int32]int64{}
	for p, o := range listed {
		from, ok := first(p)
		if !ok {
			continue
		}
		if o.Err != nil {
			return nil, nil, o.Err
		}
		stable[p] = o.LastStable
		from = max(from, o.Start)
		if o.LastStable > from {
			ranges[p] = span{from: from, end: o.LastStable}
		}
	}
	return ranges, stable, nil
}

// scan reads the spans with read_committed and calls fn for every data
// record in them, until every span is read through or fn says stop.
func scan(ctx context.Context, cl Cluster, topic string, spans map[int32]span, fn func(*kgo.Record) (stop bool, err error)) error {
	if len(spans) == 0 {
		return nil
	}
	// remaining: partition -> last stable offset still to reach.
	remaining := map[int32]int64{}
	from := map[int32]int64{}
	for p, s := range spans {
		remaining[p] = s.end
		from[p] = s.from
	}
	cons, err := cl.Consume(topic, from)
	if err != nil {
		return err
	}
	defer cons.Close()
	for len(remaining) > 0 {
		fs := cons.PollFetches(ctx)
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
