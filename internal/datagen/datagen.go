package datagen

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/internal/kclient"
)

// Options say what to write.
type Options struct {
	Topic string
	// Partitions of the topic when it has to be created. Default 4.
	Partitions int32
	// From is the first number; Count how many (0: until ctx ends).
	From, Count int64
	// Resume continues after the highest number the topic holds (From
	// only applies to a topic that holds none), and writes in
	// transactions so that a crash leaves no gap (resume.go): a generator
	// restarted any number of times writes 1..n each once. A second
	// resuming generator of the same topic fences the first.
	Resume bool
	// Rate is records per second; 0 writes as fast as the broker takes them.
	Rate float64
	// Progress, when set, is called about once a second with the count
	// written so far.
	Progress func(written int64)
	// Started, when set, is called once with the first number to write
	// (From, or where Resume continues).
	Started func(from int64)
	// EventTime adds "ts": the wall-clock time of writing in epoch
	// milliseconds, moved back by a uniformly random amount up to
	// Disorder: the input of an event-time job (parity-windows).
	EventTime bool
	Disorder  time.Duration
	// Parity adds "parity": "even" or "odd", the number's parity as a
	// field: the input of a job that keys by a field (key_by: parity),
	// such as examples/parity-sum-by-field.
	Parity bool
	// KeyParity keys each record by its number's parity ("even" or
	// "odd") and places it where Kafka's default partitioner puts that
	// key (murmur2), instead of round-robin: the input of a group-mode
	// job with scale.key_by_is_record_key keyed by parity
	// (parity-windows, parity-sum).
	KeyParity bool
	// Avro writes Avro records instead of JSON (avro.go).
	Avro *Avro

	avro *avroEncoder
}

// value is number n's record value under o: Value(n) with "ts" and
// "parity" added as o asks, or its Avro record.
func (o *Options) value(n int64) []byte {
	if o.avro != nil {
		return o.avro.encode(n, time.Now())
	}
	if !o.EventTime && !o.Parity {
		return Value(n)
	}
	b := make([]byte, 0, 56)
	b = append(b, `{"n":`...)
	b = strconv.AppendInt(b, n, 10)
	if o.EventTime {
		ts := time.Now().UnixMilli()
		if d := o.Disorder.Milliseconds(); d > 0 {
			ts -= rand.Int64N(d + 1)
		}
		b = append(b, `,"ts":`...)
		b = strconv.AppendInt(b, ts, 10)
	}
	if o.Parity {
		b = append(b, `,"parity":"`...)
		b = append(b, Parity(n)...)
		b = append(b, '"')
	}
	return append(b, '}')
}

// record is number n's record under o.
func (o *Options) record(n int64) *kgo.Record {
	r := &kgo.Record{Value: o.value(n)}
	if o.KeyParity {
		r.Key = []byte(Parity(n))
	}
	return r
}

// partitioner is where o's records go: by key (Kafka's murmur2, as Java
// producers and franz-go's default do) when they have one, else
// round-robin.
func (o *Options) partitioner() kgo.Partitioner {
	if o.KeyParity {
		return kgo.StickyKeyPartitioner(nil)
	}
	return kgo.RoundRobinPartitioner()
}

// Parity is "even" or "odd": the key parity-sum gives n.
func Parity(n int64) string {
	if n%2 == 0 {
		return "even"
	}
	return "odd"
}

// Value is the JSON value of number n: {"n":n}.
func Value(n int64) []byte {
	b := make([]byte, 0, 24)
	b = append(b, `{"n":`...)
	b = strconv.AppendInt(b, n, 10)
	return append(b, '}')
}

// EnsureTopic creates topic with the given partitions unless it exists.
func EnsureTopic(ctx context.Context, adm *kadm.Client, topic string, partitions int32) error {
	resp, err := adm.CreateTopic(ctx, partitions, -1, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("creating topic %s: %w", topic, err)
	}
	return nil
}

// Numbers writes From, From+1, ... to the topic (creating it if needed) and
// returns how many it wrote once every one is acknowledged (committed, with
// Resume). conn are the connection options.
func Numbers(ctx context.Context, conn []kgo.Opt, o Options) (int64, error) {
	if o.Partitions == 0 {
		o.Partitions = 4
	}
	opts := append(append([]kgo.Opt{}, conn...),
		kgo.DefaultProduceTopic(o.Topic),
		kgo.ProducerLinger(5*time.Millisecond),
		kgo.RecordPartitioner(o.partitioner()),
	)
	if o.Resume {
		opts = append(opts, kgo.TransactionalID(transactionalID(o.Topic)),
			kgo.MetadataMinAge(kclient.ConcurrentTransactionsRetry))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if err := EnsureTopic(ctx, adm, o.Topic, o.Partitions); err != nil {
		return 0, err
	}
	if o.Avro != nil {
		if o.avro, err = o.Avro.encoder(ctx, o.Topic); err != nil {
			return 0, err
		}
	}
	if o.Resume {
		// Fence first: a predecessor's open transaction is aborted, and a
		// live one can commit nothing more, before the end is read.
		if _, _, err := cl.ProducerID(ctx); err != nil {
			return 0, fmt.Errorf("taking over transactional id %s: %w", transactionalID(o.Topic), err)
		}
		last, ok, err := lastNumber(ctx, conn, adm, o.Topic)
		if err != nil {
			return 0, err
		}
		if ok {
			o.From = last + 1
		}
		if o.Started != nil {
			o.Started(o.From)
		}
		return numbersInTransactions(ctx, cl, o)
	}
	if o.Started != nil {
		o.Started(o.From)
	}

	var (
		failed  = make(chan error, 1)
		written int64
		start   = time.Now()
		report  = start
	)
	for i := int64(0); o.Count == 0 || i < o.Count; i++ {
		pace(ctx, start, i, o.Rate)
		if ctx.Err() != nil {
			break
		}
		select {
		case err := <-failed:
			return written, err
		default:
		}
		// Not ctx: a record handed over must not be dropped by the stop,
		// or the count returned would lie.
		cl.Produce(context.Background(), o.record(o.From+i), func(_ *kgo.Record, err error) {
			if err != nil {
				select {
				case failed <- err:
				default:
				}
			}
		})
		written++
		if o.Progress != nil && time.Since(report) >= time.Second {
			report = time.Now()
			o.Progress(written)
		}
	}
	// Flush with a fresh context: what was handed to the producer must be
	// acknowledged (or fail) before we say how many were written.
	flushCtx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := cl.Flush(flushCtx); err != nil {
		return written, err
	}
	select {
	case err := <-failed:
		return written, err
	default:
	}
	return written, nil
}

// commitEvery bounds a resuming generator's transactions: what it wrote
// becomes visible to read_committed readers at least this often.
const commitEvery = 100 * time.Millisecond

// numbersInTransactions is Numbers for Resume: the same numbers at the
// same rate, committed in transactions of at most commitEvery. It returns
// how many it committed. When ctx ends it commits what it wrote.
func numbersInTransactions(ctx context.Context, cl *kgo.Client, o Options) (int64, error) {
	var (
		failed           = make(chan error, 1)
		committed, inTxn int64
		start            = time.Now()
		report           = start
		began            time.Time
	)
	commit := func() error {
		if inTxn == 0 {
			return nil
		}
		// Not ctx: ending on a stop must still commit what was written.
		endCtx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		err := cl.Flush(endCtx)
		if err == nil {
			select {
			case err = <-failed:
			default:
			}
		}
		if err != nil {
			_ = cl.EndTransaction(endCtx, kgo.TryAbort)
			return err
		}
		if err := cl.EndTransaction(endCtx, kgo.TryCommit); err != nil {
			return err
		}
		committed, inTxn = committed+inTxn, 0
		return nil
	}
	for i := int64(0); o.Count == 0 || i < o.Count; i++ {
		pace(ctx, start, i, o.Rate)
		if ctx.Err() != nil {
			break
		}
		if inTxn > 0 && time.Since(began) >= commitEvery {
			if err := commit(); err != nil {
				return committed, err
			}
		}
		if inTxn == 0 {
			if err := cl.BeginTransaction(); err != nil {
				return committed, err
			}
			began = time.Now()
		}
		cl.Produce(context.Background(), o.record(o.From+i), func(_ *kgo.Record, err error) {
			if err != nil {
				select {
				case failed <- err:
				default:
				}
			}
		})
		inTxn++
		if o.Progress != nil && time.Since(report) >= time.Second {
			report = time.Now()
			o.Progress(committed + inTxn)
		}
	}
	return committed, commit()
}

// pace waits until record i of a run begun at start is due at rate
// records per second (0: at once), or ctx ends.
func pace(ctx context.Context, start time.Time, i int64, rate float64) {
	if rate <= 0 {
		return
	}
	due := start.Add(time.Duration(float64(i) / rate * float64(time.Second)))
	if d := time.Until(due); d > 0 {
		select {
		case <-ctx.Done():
		case <-time.After(d):
		}
	}
}
