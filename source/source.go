package source

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/checkpoint"
	"github.com/eoflow/pipeline/config"
	"github.com/eoflow/pipeline/internal/mutant"
)

// TopicPartition names one partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

func (tp TopicPartition) String() string { return fmt.Sprintf("%s/%d", tp.Topic, tp.Partition) }

// Discover lists every partition of the topics, sorted. A missing topic is
// an error: a job must not silently read nothing.
func Discover(ctx context.Context, adm *kadm.Client, topics []string) ([]TopicPartition, error) {
	md, err := adm.Metadata(ctx, topics...)
	if err != nil {
		return nil, fmt.Errorf("metadata for source topics %v: %w", topics, err)
	}
	var tps []TopicPartition
	for _, topic := range topics {
		td, ok := md.Topics[topic]
		if !ok || td.Err != nil {
			reason := "not found"
			if ok {
				reason = td.Err.Error()
			}
			return nil, fmt.Errorf("source topic %q: %s", topic, reason)
		}
		for p := range td.Partitions {
			tps = append(tps, TopicPartition{topic, p})
		}
	}
	sort.Slice(tps, func(i, j int) bool {
		if tps[i].Topic != tps[j].Topic {
			return tps[i].Topic < tps[j].Topic
		}
		return tps[i].Partition < tps[j].Partition
	})
	return tps, nil
}

// ResolveStart turns the configured start position into a concrete offset
// for every partition without a checkpointed one. Resolving once, up front,
// makes every partition's position known from the first checkpoint on: a
// "latest" job that restarts before reading anything resumes where it first
// looked, not at a later end.
func ResolveStart(ctx context.Context, adm *kadm.Client, tps []TopicPartition, start config.StartPosition) (map[TopicPartition]int64, error) {
	topics := topicsOf(tps)
	var (
		listed kadm.ListedOffsets
		err    error
	)
	switch start.Kind {
	case config.StartEarliest, "":
		listed, err = adm.ListStartOffsets(ctx, topics...)
	case config.StartLatest:
		listed, err = adm.ListEndOffsets(ctx, topics...)
	case config.StartAtTimestamp:
		listed, err = adm.ListOffsetsAfterMilli(ctx, start.At.UnixMilli(), topics...)
	default:
		return nil, fmt.Errorf("unknown start position %q", start.Kind)
	}
	if err != nil {
		return nil, fmt.Errorf("listing %s offsets of %v: %w", start.Kind, topics, err)
	}
	out := make(map[TopicPartition]int64, len(tps))
	for _, tp := range tps {
		lo, ok := listed.Lookup(tp.Topic, tp.Partition)
		if !ok {
			return nil, fmt.Errorf("no %s offset listed for %s", start.Kind, tp)
		}
		if lo.Err != nil {
			return nil, fmt.Errorf("listing %s offset of %s: %w", start.Kind, tp, lo.Err)
		}
		out[tp] = lo.Offset
	}
	return out, nil
}

func topicsOf(tps []TopicPartition) []string {
	seen := map[string]bool{}
	var topics []string
	for _, tp := range tps {
		if !seen[tp.Topic] {
			seen[tp.Topic] = true
			topics = append(topics, tp.Topic)
		}
	}
	return topics
}

// Reader reads a fixed set of partitions from given offsets with
// read_committed, and tracks the next offset of each: the source's state.
// It is used by one goroutine.
type Reader struct {
	cl   ReaderClient
	next map[TopicPartition]int64
	// stable is the last stable offset each partition's latest fetch
	// reported: the end a read_committed reader can reach, for lag.
	stable map[TopicPartition]int64
	// polled is the offset of the last data record polled of each
	// partition, and passed the offset after the last transaction marker
	// polled after it: for lag, the reader is past the markers once every
	// record polled has been handed on (Lags).
	polled, passed map[TopicPartition]int64
}

// FetchMaxBytes bounds one fetch response (Kafka's fetch.max.bytes,
// franz-go's FetchMaxBytes, whose default is 50 MiB). franz-go
// decompresses a whole response as it arrives and keeps it, decoded, until
// it is polled, besides the one being processed: at the default, a 64- or
// 256-partition input of compressible JSON held 600 MB of decoded records
// and decompressed batches, and the process 1.3 GB. At 8 MiB the fetched
// input was still three quarters of the keyed sum's live heap (57 MB of
// kgo.Records, dense in pointers for the collector to mark, and 34 MB of
// decompressed batches); at 2 MiB it holds half as much, with no loss of
// throughput at 8 partitions, and the memory saved goes to the
// collector's headroom instead (internal/gcfloor). A batch larger than
// the bound is still fetched whole.
const FetchMaxBytes = 2 << 20

// FetchOpts are the fetch options of every consumer of a job's inputs.
func FetchOpts() []kgo.Opt {
	return []kgo.Opt{
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.FetchMaxBytes(FetchMaxBytes),
	}
}

// NewReader starts reading each partition at its offset. conn are the
// connection options (kclient.Options).
func NewReader(conn []kgo.Opt, offsets map[TopicPartition]int64, extra ...kgo.Opt) (*Reader, error) {
	opts := append(append(append([]kgo.Opt{}, conn...), FetchOpts()...),
		// A checkpointed offset below the log start means retention removed
		// the data: resume at the earliest record that still exists.
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		// The markers that end transactions, for the lag only (Poll
		// never hands them out).
		kgo.KeepControlRecords(),
	)
	cl, err := kgo.NewClient(append(opts, extra...)...)
	if err != nil {
		return nil, err
	}
	return NewReaderOn(cl, offsets), nil
}

// NewReaderOn is NewReader on a client made by the caller: one that
// consumes no partition yet, with FetchOpts' settings, control records
// kept and a reset to the log start. It assigns the partitions; the
// Reader owns cl.
func NewReaderOn(cl ReaderClient, offsets map[TopicPartition]int64) *Reader {
	assign := map[string]map[int32]kgo.Offset{}
	next := make(map[TopicPartition]int64, len(offsets))
	for tp, off := range offsets {
		if assign[tp.Topic] == nil {
			assign[tp.Topic] = map[int32]kgo.Offset{}
		}
		assign[tp.Topic][tp.Partition] = kgo.NewOffset().At(off)
		next[tp] = off
	}
	cl.AddConsumePartitions(assign)
	return &Reader{cl: cl, next: next, stable: map[TopicPartition]int64{},
		polled: map[TopicPartition]int64{}, passed: map[TopicPartition]int64{}}
}

// Poll waits for up to max records (all partitions together). Errors are
// returned only when reading cannot go on; data-loss notices (offsets
// reset after retention) are skipped, as the reset already happened.
func (r *Reader) Poll(ctx context.Context, max int) ([]*kgo.Record, error) {
	fs := r.cl.PollRecords(ctx, max)
	if fs.IsClientClosed() {
		return nil, kgo.ErrClientClosed
	}
	if mutant.On("reader-poll-drops-on-cancel") && ctx.Err() != nil {
		// The bug: records the client handed over are dropped when a
		// barrier trigger cancelled the poll; its position is past them.
		return nil, ctx.Err()
	}
	if err := fetchErrors(fs); err != nil {
		return nil, err
	}
	var recs []*kgo.Record
	markers := false
	fs.EachPartition(func(p kgo.FetchTopicPartition) {
		tp := TopicPartition{p.Topic, p.Partition}
		// A partition with an error reports no offsets; among them is the
		// client's pseudo-partition (topic "", partition -1) that carries a
		// poll's own error, such as a barrier trigger's cancellation.
		if p.Err == nil && p.Partition >= 0 && p.LastStableOffset >= 0 {
			r.stable[tp] = p.LastStableOffset
		}
		for _, rec := range p.Records {
			if rec.Attrs.IsControl() {
				r.passed[tp], markers = rec.Offset+1, true
				continue
			}
			r.polled[tp] = rec.Offset
			recs = append(recs, rec)
		}
	})
	// Records the client handed over are consumed: its fetch position is
	// past them. Return them even if ctx ended meanwhile (a barrier
	// trigger wakes a poll by cancelling it): dropping them here would
	// skip them for good, and the next checkpoint would record the skip.
	// A poll of markers alone is news too: the lag may have changed.
	if len(recs) > 0 || markers {
		return recs, nil
	}
	return nil, ctx.Err()
}

// fetchErrors returns the errors of a poll that stop reading. Data-loss
// notices (an offset reset after retention, already done) and the poll's
// own context ending are not among them.
func fetchErrors(fs kgo.Fetches) error {
	var errs []error
	fs.EachError(func(topic string, p int32, err error) {
		var loss *kgo.ErrDataLoss
		if errors.As(err, &loss) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return
		}
		errs = append(errs, fmt.Errorf("reading %s/%d: %w", topic, p, err))
	})
	return errors.Join(errs...)
}

// Advance records that rec has been handed downstream: its partition's
// position moves past it.
func (r *Reader) Advance(rec *kgo.Record) {
	if mutant.On("reader-advance-offset") {
		// The bug: the position is the record's offset, not the next
		// one to read; a restore reads the record again.
		r.next[TopicPartition{rec.Topic, rec.Partition}] = rec.Offset
		return
	}
	r.next[TopicPartition{rec.Topic, rec.Partition}] = rec.Offset + 1
}

// Positions returns the next offset of every partition, sorted.
func (r *Reader) Positions() []Position {
	ps := make([]Position, 0, len(r.next))
	for tp, off := range r.next {
		ps = append(ps, Position{Topic: tp.Topic, Partition: tp.Partition, Offset: off})
	}
	slices.SortFunc(ps, checkpoint.CompareOffsets)
	return ps
}

// Lag is how far one partition's position is behind its last stable
// offset, as of the latest fetch.
type Lag struct {
	TopicPartition
	Records int64
}

// Lags reports the lag of every partition a fetch has reported on: the
// offsets a read_committed reader would still go through, from the
// position to the last stable offset. Transaction markers are not
// records, yet they hold offsets: the last data record of a partition
// written in transactions is followed by one marker per producer whose
// transaction wrote to it (several, for a repartition partition), so the
// position after it is short of the last stable offset for good. Once
// every data record polled has been handed on, the position counts as
// past the markers polled after them. (The position itself, which
// checkpoints keep, stays after the last data record.)
func (r *Reader) Lags() []Lag {
	lags := make([]Lag, 0, len(r.stable))
	for tp, end := range r.stable {
		pos := r.next[tp]
		if last, ok := r.polled[tp]; !ok || pos > last {
			pos = max(pos, r.passed[tp])
		}
		lags = append(lags, Lag{tp, max(0, end-pos)})
	}
	return lags
}

// Position is the next offset to read of one partition.
type Position = checkpoint.SourceOffset

// Close stops reading.
func (r *Reader) Close() { r.cl.Close() }
