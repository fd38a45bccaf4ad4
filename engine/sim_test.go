package engine

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/checkpoint"
	"github.com/eoflow/pipeline/checkpoint/kstore"
	"github.com/eoflow/pipeline/config"
	"github.com/eoflow/pipeline/internal/kread"
	"github.com/eoflow/pipeline/internal/testkit/memkafka"
	"github.com/eoflow/pipeline/sink"
	"github.com/eoflow/pipeline/source"
)

// This file is the broker-free simulation's world: the seam's
// implementations over the Kafka model (internal/testkit/memkafka), and the crash
// that any call into them may be. simulation_test.go drives real jobs
// through it.

// simCrash is a kill -9: panicked from a call into the model, recovered by
// the scheduler, which drops everything the process held. What the model
// (the brokers) holds stays.
type simCrash struct{ at string }

// world is the cluster and the dice of one seeded run.
type world struct {
	rng   *rand.Rand
	kafka *memkafka.Cluster
	// crashP is the chance that a call into the model kills the process,
	// before (odd draws) or after (even draws) it took effect.
	crashP float64
	// trace is what happened, for a failing seed's report; hash sums it,
	// so two runs of one seed can be compared.
	trace []string
	hash  uint64
	// root is the run's directory, written $DIR in the trace.
	root string
	// maxBytes is each topic's max.message.bytes (none: no limit): the
	// model refuses a larger record as the brokers do, and the job reads
	// the limits as it reads them from the brokers (limits).
	maxBytes map[string]int32
	// pieces counts the records produced that are pieces of a value or of
	// a checkpoint record (nil: not counted).
	pieces *simPieces
	// manual are the topics whose records the runtime places in a
	// partition itself (group mode's repartition and state topics).
	manual map[string]bool
	// who is the process that makes the calls now, for the trace ("": the
	// only one).
	who string
}

// limits are the job's sink.Limits of the model: its topics' settings.
func (w *world) limits() sink.Limits {
	if w.maxBytes == nil {
		return sink.Limits{}
	}
	return sink.NewLimits(0, 0, w.maxBytes)
}

func (w *world) log(format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	if w.root != "" {
		// Temporary directories differ from run to run; schedules must not.
		line = strings.ReplaceAll(line, w.root, "$DIR")
	}
	w.trace = append(w.trace, line)
	h := fnv.New64a()
	fmt.Fprintf(h, "%d|%s", w.hash, line)
	w.hash = h.Sum64()
}

// io is a call into the model at point at: it may crash the process
// before the call takes effect. The returned func is called after it took
// effect, and may crash then.
func (w *world) io(at string) (after func()) {
	if w.crashP > 0 && w.rng.Float64() < w.crashP/2 {
		w.log("%scrash before %s", w.prefix(), at)
		panic(simCrash{at: "before " + at})
	}
	return func() {
		if w.crashP > 0 && w.rng.Float64() < w.crashP/2 {
			w.log("%scrash after %s", w.prefix(), at)
			panic(simCrash{at: "after " + at})
		}
	}
}

// prefix names the process that makes the calls, if there are several.
func (w *world) prefix() string {
	if w.who == "" {
		return ""
	}
	return w.who + ": "
}

// toModel converts a record the runtime produces; the partition is the
// key's hash (like franz-go's default partitioner: any stable choice
// does), partition 0 for a record without a key.
func (w *world) toModel(r *kgo.Record) memkafka.Record {
	m := memkafka.Record{Topic: r.Topic, Partition: r.Partition, Key: r.Key, Value: r.Value, Timestamp: r.Timestamp}
	if w.manual[r.Topic] {
		// As the runtime placed it.
	} else if n, err := w.kafka.Partitions(r.Topic); err == nil && n > 1 {
		h := fnv.New32a()
		h.Write(r.Key)
		m.Partition = int32(h.Sum32() % uint32(n))
	} else {
		m.Partition = 0
	}
	for _, h := range r.Headers {
		m.Headers = append(m.Headers, memkafka.Header{Key: h.Key, Value: h.Value})
	}
	return m
}

func fromModel(r memkafka.Record) *kgo.Record {
	k := &kgo.Record{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Key: r.Key, Value: r.Value, Timestamp: r.Timestamp}
	for _, h := range r.Headers {
		k.Headers = append(k.Headers, kgo.RecordHeader{Key: h.Key, Value: h.Value})
	}
	return k
}

// readAll returns every committed record of topic, partition by
// partition, in offset order.
func (w *world) readAll(topic string) []*kgo.Record {
	n, err := w.kafka.Partitions(topic)
	if err != nil {
		return nil
	}
	var out []*kgo.Record
	for p := range int32(n) {
		tp := memkafka.TP{Topic: topic, Partition: p}
		for from := int64(0); ; {
			recs, next, err := w.kafka.ReadCommitted(tp, from, 1<<20)
			if err != nil || next == from {
				break
			}
			for _, r := range recs {
				out = append(out, fromModel(r))
			}
			from = next
		}
	}
	return out
}

// latestCheckpoint is the newest committed checkpoint of job, as
// kstore.Latest decides it.
func (w *world) latestCheckpoint(job string) (*checkpoint.Record, error) {
	return w.latestKeyed(job, job)
}

// latestKeyed is the newest committed checkpoint record of job under key
// (a group member's own: sink.MemberRecordKey), as kstore.LatestKeyed
// decides it.
func (w *world) latestKeyed(job, key string) (*checkpoint.Record, error) {
	n := kstore.Newest{Job: key, Member: key != job}
	for _, r := range w.readAll(checkpoint.TopicName(job)) {
		if err := n.Add(r); err != nil {
			return nil, err
		}
	}
	return n.Record, nil
}

// simCluster is what a restore reads of the model.
type simCluster struct {
	w   *world
	job string
	// members are the group's instance ids (group mode; nil: none), and
	// unstable, if set, is told who holds offsets a stable fetch waits for.
	members  func() []string
	unstable func(holders []string)
	// wait, if set, is what a call that waits does: it lets the rest of
	// the world go on until ready holds, and reports whether it does (no:
	// it gave up). Without it such a call returns errSimWait instead, to
	// be asked again later.
	wait func(ready func() bool) bool
	// seen, if set, holds the high watermark of each partition an
	// AwaitSettled asked about first: as Kafka's (awaitSettled), it then
	// waits for the transactions that wrote before that look only, not
	// for those begun since (the attempt's retries share it). Without
	// it, it waits until no transaction is unmarked at all.
	seen map[memkafka.TP]int64
}

var _ cluster = simCluster{}

// errSimWait is what a call of the model returns where Kafka's would
// wait (for a transaction to be decided, or its markers written): the
// simulation runs on one goroutine, so the caller is asked again at a
// later step, which is what waiting amounts to.
var errSimWait = errors.New("waiting")

func (c simCluster) Partitions(_ context.Context, topics []string) ([]source.TopicPartition, error) {
	var tps []source.TopicPartition
	for _, t := range topics {
		n, err := c.w.kafka.Partitions(t)
		if err != nil {
			return nil, err
		}
		for p := range int32(n) {
			tps = append(tps, source.TopicPartition{Topic: t, Partition: p})
		}
	}
	return tps, nil
}

func (c simCluster) ResolveStart(_ context.Context, tps []source.TopicPartition, start config.StartPosition) (map[source.TopicPartition]int64, error) {
	out := map[source.TopicPartition]int64{}
	for _, tp := range tps {
		switch start.Kind {
		case config.StartEarliest:
			out[tp] = 0
		case config.StartLatest:
			o, err := c.w.kafka.EndOffsets(memkafka.TP{Topic: tp.Topic, Partition: tp.Partition})
			if err != nil {
				return nil, err
			}
			out[tp] = o.HighWatermark
		default:
			return nil, fmt.Errorf("the simulation has no start position %v", start.Kind)
		}
	}
	return out, nil
}

// ReadState and Read are the job's own reads (kstore, kread) on the
// model, as the decision log's.
func (c simCluster) ReadState(ctx context.Context, fn func(key, value []byte) error) error {
	return kstore.ReadStateOn(ctx, simLog{c.w}, c.job, fn)
}

func (c simCluster) Read(ctx context.Context, topic string, fn func(*kgo.Record) error, partitions ...int32) error {
	return kread.AllOn(ctx, simLog{c.w}, topic, fn, partitions...)
}

func (c simCluster) FetchOffsets(_ context.Context, group string) (map[source.TopicPartition]int64, error) {
	c.w.io("fetch the offsets of " + group)()
	out := map[source.TopicPartition]int64{}
	for tp, o := range c.w.kafka.GroupOffsets(group) {
		out[source.TopicPartition{Topic: tp.Topic, Partition: tp.Partition}] = o
	}
	return out, nil
}

func (c simCluster) FetchStableOffsets(ctx context.Context, group string, tps []source.TopicPartition, _ time.Duration) (map[source.TopicPartition]int64, error) {
	var m []memkafka.TP
	for _, tp := range tps {
		m = append(m, memkafka.TP{Topic: tp.Topic, Partition: tp.Partition})
	}
	stable := func() bool {
		return !c.w.kafka.PendingOffsets(group, m) && len(c.w.kafka.UnstableOffsets(group, m)) == 0
	}
	if !stable() && (c.wait == nil || !c.wait(stable)) {
		if holders := c.w.kafka.UnstableOffsets(group, m); len(holders) > 0 && c.unstable != nil {
			c.unstable(holders)
		}
		return nil, fmt.Errorf("offsets of group %s: a transaction holding them is open or unmarked: %w", group, errSimWait)
	}
	all, err := c.FetchOffsets(ctx, group)
	if err != nil {
		return nil, err
	}
	out := map[source.TopicPartition]int64{}
	for _, tp := range tps {
		if o, ok := all[tp]; ok {
			out[tp] = o
		}
	}
	return out, nil
}

func (c simCluster) AwaitSettled(_ context.Context, topic string, partitions []int32, _ time.Duration) error {
	settled := func() bool {
		for _, p := range partitions {
			tp := memkafka.TP{Topic: topic, Partition: p}
			o, err := c.w.kafka.EndOffsets(tp)
			if err != nil {
				return false
			}
			upTo := o.HighWatermark
			if c.seen != nil {
				if first, ok := c.seen[tp]; ok {
					upTo = first
				} else {
					c.seen[tp] = upTo
				}
			}
			if o.LastStable < upTo {
				return false
			}
		}
		return true
	}
	if !settled() && (c.wait == nil || !c.wait(settled)) {
		return fmt.Errorf("%s %v: a transaction is undecided or unmarked there: %w", topic, partitions, errSimWait)
	}
	return nil
}

func (c simCluster) RepartitionDrained(_ context.Context, topic string, position func(partition int32) (int64, bool)) (bool, string, error) {
	after := c.w.io("look for records left in " + topic)
	defer after()
	n, err := c.w.kafka.Partitions(topic)
	if err != nil {
		return false, "", err
	}
	for p := range int32(n) {
		tp := memkafka.TP{Topic: topic, Partition: p}
		o, err := c.w.kafka.EndOffsets(tp)
		if err != nil {
			return false, "", err
		}
		if o.LastStable < o.HighWatermark {
			return false, "a transaction is open on the repartition topic", nil
		}
		from, ok := position(p)
		if !ok {
			return false, fmt.Sprintf("partition %d of the repartition topic is not read", p), nil
		}
		if recs, _, err := c.w.kafka.ReadCommitted(tp, from, 1); err != nil || len(recs) > 0 {
			return false, "records are left in the repartition topic", err
		}
	}
	return true, "", nil
}

func (c simCluster) Unread(_ context.Context, topic string, from map[int32]int64) (map[int32]bool, error) {
	after := c.w.io("look for records left in " + topic)
	defer after()
	out := map[int32]bool{}
	for p, off := range from {
		tp := memkafka.TP{Topic: topic, Partition: p}
		o, err := c.w.kafka.EndOffsets(tp)
		if err != nil {
			return nil, err
		}
		out[p] = o.LastStable < o.HighWatermark
		for !out[p] {
			recs, next, err := c.w.kafka.ReadCommitted(tp, off, 100)
			if err != nil {
				return nil, err
			}
			for _, r := range recs {
				out[p] = out[p] || isInput(fromModel(r))
			}
			if len(recs) == 0 || next <= off {
				break
			}
			off = next
		}
	}
	return out, nil
}

func (c simCluster) EndOffsets(_ context.Context, topic string) (map[int32]int64, error) {
	c.w.io("list the end offsets of " + topic)()
	n, err := c.w.kafka.Partitions(topic)
	if err != nil {
		return nil, err
	}
	out := map[int32]int64{}
	for p := range int32(n) {
		o, err := c.w.kafka.EndOffsets(memkafka.TP{Topic: topic, Partition: p})
		if err != nil {
			return nil, err
		}
		out[p] = o.HighWatermark
	}
	return out, nil
}

func (c simCluster) Members(context.Context, string) ([]string, error) {
	c.w.io("describe the group")()
	if c.members == nil {
		return nil, nil
	}
	return c.members(), nil
}

func (c simCluster) Write(_ context.Context, rec *kgo.Record) error {
	after := c.w.io("write to " + rec.Topic)
	if _, err := c.w.kafka.Append(c.w.toModel(rec)); err != nil {
		return err
	}
	after()
	return nil
}
