package source

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/config"
	"github.com/eoflow/pipeline/internal/testkit/kafkatest"
)

func TestMain(m *testing.M) { kafkatest.Main(m) }

// produce writes n records "p<partition>-<i>" to each partition, the ones
// in [abortFrom, n) of partition 0 inside an aborted transaction.
func produce(ctx context.Context, t *testing.T, brokers []string, topic string, partitions int32, n int) {
	t.Helper()
	cl := kafkatest.Client(t, brokers, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for p := int32(0); p < partitions; p++ {
		for i := 0; i < n; i++ {
			r := &kgo.Record{Partition: p, Value: []byte(fmt.Sprintf("p%d-%d", p, i)), Timestamp: time.UnixMilli(int64(1_000_000 + i))}
			if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func TestReaderReadsCommittedAndTracksPositions(t *testing.T) {
	k := kafkatest.Broker(t)
	topic := kafkatest.Topic(t, "in")
	kafkatest.CreateTopic(t, k.Bootstrap(), topic, 3, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	produce(ctx, t, k.Bootstrap(), topic, 3, 5)

	// An aborted transaction on partition 1 must never be read.
	txn := kafkatest.Client(t, k.Bootstrap(), kgo.TransactionalID(topic+"-txn"), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := txn.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := txn.ProduceSync(ctx, &kgo.Record{Partition: 1, Value: []byte("aborted")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := txn.EndTransaction(ctx, kgo.TryAbort); err != nil {
		t.Fatal(err)
	}

	adm := kadm.NewClient(kafkatest.Client(t, k.Bootstrap()))
	tps, err := Discover(ctx, adm, []string{topic})
	if err != nil {
		t.Fatal(err)
	}
	if len(tps) != 3 || tps[0].Partition != 0 || tps[2].Partition != 2 {
		t.Fatalf("Discover = %v", tps)
	}
	offsets, err := ResolveStart(ctx, adm, tps, config.StartPosition{Kind: config.StartEarliest})
	if err != nil {
		t.Fatal(err)
	}
	// Resume partition 0 as a checkpoint would: after its first 2 records.
	offsets[TopicPartition{topic, 0}] = 2

	r, err := NewReader([]kgo.Opt{kgo.SeedBrokers(k.Bootstrap()...)}, offsets)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var got []string
	for len(got) < 3+5+5 {
		recs, err := r.Poll(ctx, 100)
		if err != nil {
			t.Fatal(err)
		}
		for _, rec := range recs {
			got = append(got, string(rec.Value))
			r.Advance(rec)
		}
	}
	all := strings.Join(got, ",")
	if strings.Contains(all, "aborted") || strings.Contains(all, "p0-0") || strings.Contains(all, "p0-1") {
		t.Fatalf("read %v: aborted or skipped records came through", got)
	}
	want := fmt.Sprint([]Position{{Topic: topic, Partition: 0, Offset: 5}, {Topic: topic, Partition: 1, Offset: 5}, {Topic: topic, Partition: 2, Offset: 5}})
	if got := fmt.Sprint(r.Positions()); got != want {
		t.Fatalf("Positions = %s, want %s", got, want)
	}

	// A reader restored from the positions reads what came after them,
	// and nothing it read before.
	cl := kafkatest.Client(t, k.Bootstrap(), kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for p := range int32(3) {
		if err := cl.ProduceSync(ctx, &kgo.Record{Partition: p, Value: fmt.Appendf(nil, "new%d", p)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	restored := map[TopicPartition]int64{}
	for _, p := range r.Positions() {
		restored[TopicPartition{p.Topic, p.Partition}] = p.Offset
	}
	r2, err := NewReader([]kgo.Opt{kgo.SeedBrokers(k.Bootstrap()...)}, restored)
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	got = nil
	for len(got) < 3 {
		recs, err := r2.Poll(ctx, 100)
		if err != nil {
			t.Fatal(err)
		}
		for _, rec := range recs {
			got = append(got, string(rec.Value))
		}
	}
	slices.Sort(got)
	if fmt.Sprint(got) != "[new0 new1 new2]" {
		t.Fatalf("the restored reader read %v, want the three records written after the positions", got)
	}
}

func TestResolveStart(t *testing.T) {
	k := kafkatest.Broker(t)
	topic := kafkatest.Topic(t, "in")
	kafkatest.CreateTopic(t, k.Bootstrap(), topic, 2, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	produce(ctx, t, k.Bootstrap(), topic, 2, 4) // timestamps 1_000_000 .. 1_000_003 ms
	adm := kadm.NewClient(kafkatest.Client(t, k.Bootstrap()))
	tps, err := Discover(ctx, adm, []string{topic})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		start config.StartPosition
		want  int64
	}{
		{config.StartPosition{Kind: config.StartEarliest}, 0},
		{config.StartPosition{Kind: config.StartLatest}, 4},
		{config.StartPosition{Kind: config.StartAtTimestamp, At: time.UnixMilli(1_000_002)}, 2},
	} {
		got, err := ResolveStart(ctx, adm, tps, tc.start)
		if err != nil {
			t.Fatal(err)
		}
		for _, tp := range tps {
			if got[tp] != tc.want {
				t.Errorf("%s: %s starts at %d, want %d", tc.start.Kind, tp, got[tp], tc.want)
			}
		}
	}
}

func TestDiscoverMissingTopic(t *testing.T) {
	k := kafkatest.Broker(t)
	adm := kadm.NewClient(kafkatest.Client(t, k.Bootstrap()))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := Discover(ctx, adm, []string{"no-such-topic-" + kafkatest.Topic(t, "x")})
	if err == nil || !strings.Contains(err.Error(), "source topic") {
		t.Fatalf("got %v, want a clear missing-topic error", err)
	}
}

// A poll woken by a cancelled context (how a barrier trigger interrupts an
// idle source) must not drop records the client already handed over: the
// client's position is past them, so dropping them skips them for good and
// the next checkpoint records the gap. The race — records returned, then the
// context found cancelled — is made certain with a context that reports
// cancellation but never signals it.
func TestPollNeverDropsRecordsOnCancel(t *testing.T) {
	k := kafkatest.Broker(t)
	topic := kafkatest.Topic(t, "in")
	kafkatest.CreateTopic(t, k.Bootstrap(), topic, 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	produce(ctx, t, k.Bootstrap(), topic, 1, 50)

	r, err := NewReader([]kgo.Opt{kgo.SeedBrokers(k.Bootstrap()...)}, map[TopicPartition]int64{{topic, 0}: 0})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var got []int64
	for len(got) < 50 {
		recs, err := r.Poll(cancelledLate{ctx}, 10)
		if err != nil && len(recs) == 0 {
			t.Fatalf("Poll returned no records and %v after reading %d", err, len(got))
		}
		for _, rec := range recs {
			got = append(got, rec.Offset)
			r.Advance(rec)
		}
	}
	for i, off := range got {
		if off != int64(i) {
			t.Fatalf("offsets read %v: a gap at %d", got, i)
		}
	}
}

// cancelledLate says it is cancelled, but its Done channel is its parent's:
// a poll waits normally and finds the cancellation only after it returns.
type cancelledLate struct{ context.Context }

func (cancelledLate) Err() error { return context.Canceled }

// A poll that ends with an error hands back franz-go's pseudo-partition
// (topic "", partition -1) carrying the error. It is no partition of the
// job: Lags must not report it, or the lag metric grows a bogus
// {topic="",partition="-1"} series in every run (barrier triggers cancel
// polls all the time).
func TestLagsSkipTheErrorPseudoPartition(t *testing.T) {
	k := kafkatest.Broker(t)
	topic := kafkatest.Topic(t, "in")
	kafkatest.CreateTopic(t, k.Bootstrap(), topic, 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	produce(ctx, t, k.Bootstrap(), topic, 1, 3)

	r, err := NewReader([]kgo.Opt{kgo.SeedBrokers(k.Bootstrap()...)}, map[TopicPartition]int64{{topic, 0}: 0})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	read := 0
	for read < 3 {
		recs, err := r.Poll(ctx, 10)
		if err != nil {
			t.Fatal(err)
		}
		for _, rec := range recs {
			r.Advance(rec)
			read++
		}
	}
	cancelled, stop := context.WithCancel(ctx)
	stop()
	if recs, err := r.Poll(cancelled, 10); len(recs) != 0 || err == nil {
		t.Fatalf("Poll with a cancelled context = %d records, %v; want none and the context's error", len(recs), err)
	}
	lags := r.Lags()
	if len(lags) != 1 || lags[0].TopicPartition != (TopicPartition{topic, 0}) || lags[0].Records != 0 {
		t.Fatalf("Lags = %+v, want only %s/0 with 0 records", lags, topic)
	}
}

// The group reader hands out a record only once its offset is committed,
// in batches of the size asked for, however many one commit covered.
func TestGroupReaderCommitsBeforeHandingOut(t *testing.T) {
	k := kafkatest.Broker(t)
	topic := kafkatest.Topic(t, "in")
	kafkatest.CreateTopic(t, k.Bootstrap(), topic, 2, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	produce(ctx, t, k.Bootstrap(), topic, 2, 50)
	group := topic + "-group"
	r, err := NewGroupReader([]kgo.Opt{kgo.SeedBrokers(k.Bootstrap()...)}, group, []string{topic}, config.StartPosition{Kind: config.StartEarliest})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	adm := kadm.NewClient(kafkatest.Client(t, k.Bootstrap()))
	seen := 0
	for seen < 100 {
		recs, err := r.Poll(ctx, 7)
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) > 7 {
			t.Fatalf("%d records for a poll of 7", len(recs))
		}
		committed, err := adm.FetchOffsets(ctx, group)
		if err != nil {
			t.Fatal(err)
		}
		for _, rec := range recs {
			if c, ok := committed.Lookup(rec.Topic, rec.Partition); !ok || c.At <= rec.Offset {
				t.Fatalf("record %s/%d@%d handed out before its offset was committed (committed: %v)", rec.Topic, rec.Partition, rec.Offset, c.At)
			}
		}
		seen += len(recs)
	}
	if seen != 100 {
		t.Fatalf("%d records, want 100", seen)
	}
}

// Both readers bound a fetch response: franz-go keeps a whole response
// decompressed and decoded until it is polled, so its 50 MiB default held
// over a gigabyte for a 256-partition input.
func TestReadersBoundTheirFetches(t *testing.T) {
	conn := []kgo.Opt{kgo.SeedBrokers("127.0.0.1:1")} // never dialled
	r, err := NewReader(conn, map[TopicPartition]int64{{Topic: "in", Partition: 0}: 0})
	if err != nil {
		t.Fatal(err)
	}
	defer r.cl.Close()
	g, err := NewGroupReader(conn, "job", []string{"in"}, config.StartPosition{})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	for name, cl := range map[string]*kgo.Client{"reader": r.cl.(*kgo.Client), "group reader": g.cl.(*kgo.Client)} {
		if got := cl.OptValue(kgo.FetchMaxBytes); got != int32(FetchMaxBytes) {
			t.Errorf("%s: fetch max bytes %v, want %d", name, got, FetchMaxBytes)
		}
	}
}
