package jobtest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/eoflow/pipeline/checkpoint"
	"github.com/eoflow/pipeline/internal/kread"
)

// tp is a topic partition.
type tp struct {
	topic     string
	partition int32
}

// newCluster starts an in-memory Kafka (franz-go's kfake) holding the
// input topics with their partitions. A topic created with the brokers'
// default partition count gets one, as on a broker with Kafka's default
// num.partitions.
func newCluster(inputs map[string]int32) (*kfake.Cluster, error) {
	opts := []kfake.Opt{kfake.NumBrokers(1), kfake.DefaultNumPartitions(1)}
	for _, t := range slices.Sorted(maps.Keys(inputs)) {
		opts = append(opts, kfake.SeedTopics(inputs[t], t))
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		return nil, fmt.Errorf("starting the in-memory Kafka: %w", err)
	}
	return c, nil
}

// produce writes the case's input, topic by topic in the order the file
// gives, with an idempotent producer, and returns the end offset of every
// partition written to. Nothing is transactional, so the end offset is
// one past the last record: where a job that read everything has its
// checkpointed offset.
//
// A value or key written with a schema is framed with the id ids gives
// its registration (startRegistry's).
func produce(ctx context.Context, conn []kgo.Opt, writes []inputWrite, ids []int) (map[tp]int64, error) {
	ends := map[tp]int64{}
	frame := func(f *framedBytes, plain []byte) []byte {
		if f == nil {
			return plain
		}
		b, _ := (&sr.ConfluentHeader{}).AppendEncode(make([]byte, 0, 5+len(f.body)), ids[f.reg], nil)
		return append(b, f.body...)
	}
	var recs []*kgo.Record
	for _, w := range writes {
		r := w.rec
		rec := &kgo.Record{Topic: w.topic, Partition: r.Partition, Key: frame(w.key, r.Key), Value: frame(w.value, r.Value), Timestamp: r.Timestamp}
		for _, h := range r.Headers {
			rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: h.Key, Value: h.Value})
		}
		recs = append(recs, rec)
	}
	if len(recs) == 0 {
		return ends, nil
	}
	cl, err := kgo.NewClient(append(slices.Clone(conn), kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	for _, res := range cl.ProduceSync(ctx, recs...) {
		if res.Err != nil {
			return nil, fmt.Errorf("writing the input to %s/%d: %w", res.Record.Topic, res.Record.Partition, res.Err)
		}
		k := tp{res.Record.Topic, res.Record.Partition}
		ends[k] = max(ends[k], res.Record.Offset+1)
	}
	return ends, nil
}

// lastCheckpoint reads the job's newest committed checkpoint record from
// its checkpoint topic; nil when there is none yet.
func lastCheckpoint(ctx context.Context, conn []kgo.Opt, job string) (*checkpoint.Record, error) {
	var last []byte
	err := kread.All(ctx, conn, checkpoint.TopicName(job), func(r *kgo.Record) error {
		if r.Value != nil {
			last = r.Value
		}
		return nil
	})
	if err != nil || last == nil {
		return nil, err
	}
	return checkpoint.DecodeRecord(last)
}

// behind lists the input partitions a checkpoint has not read through:
// "numbers/0 at 3 of 5". Empty: every input record is in it.
func behind(rec *checkpoint.Record, ends map[tp]int64) []string {
	at := map[tp]int64{}
	if rec != nil {
		for _, o := range rec.Offsets {
			at[tp{o.Topic, o.Partition}] = o.Offset
		}
		for _, t := range rec.Tables {
			for _, o := range t.Offsets {
				at[tp{t.Topic, o.Partition}] = o.Offset
			}
		}
	}
	var out []string
	for _, k := range slices.SortedFunc(maps.Keys(ends), func(a, b tp) int {
		if c := strings.Compare(a.topic, b.topic); c != 0 {
			return c
		}
		return int(a.partition - b.partition)
	}) {
		if at[k] < ends[k] {
			out = append(out, fmt.Sprintf("%s/%d at %d of %d", k.topic, k.partition, at[k], ends[k]))
		}
	}
	return out
}

// readOutputs reads every committed record of the topics (read_committed,
// to their last stable offsets), partition by partition in offset order,
// and how many partitions each has. A topic the job never created holds
// nothing.
func readOutputs(ctx context.Context, conn []kgo.Opt, topics []string) (map[string][]Record, map[string]int, error) {
	cl, err := kgo.NewClient(conn...)
	if err != nil {
		return nil, nil, err
	}
	defer cl.Close()
	details, err := kadm.NewClient(cl).ListTopics(ctx, topics...)
	if err != nil {
		return nil, nil, fmt.Errorf("listing the output topics: %w", err)
	}
	out, partitions := map[string][]Record{}, map[string]int{}
	for _, t := range topics {
		d, ok := details[t]
		if !ok || errors.Is(d.Err, kerr.UnknownTopicOrPartition) {
			continue
		}
		if d.Err != nil {
			return nil, nil, fmt.Errorf("describing %s: %w", t, d.Err)
		}
		partitions[t] = len(d.Partitions)
		var recs []Record
		err := kread.All(ctx, conn, t, func(r *kgo.Record) error {
			rec := Record{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Key: r.Key, Value: r.Value, Timestamp: r.Timestamp.UTC()}
			for _, h := range r.Headers {
				rec.Headers = append(rec.Headers, Header{Key: h.Key, Value: h.Value})
			}
			recs = append(recs, rec)
			return nil
		})
		if err != nil {
			return nil, nil, err
		}
		slices.SortStableFunc(recs, func(a, b Record) int {
			if a.Partition != b.Partition {
				return int(a.Partition - b.Partition)
			}
			return int(a.Offset - b.Offset)
		})
		out[t] = recs
	}
	return out, partitions, nil
}
