package source

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/internal/testkit/memkafka"
)

// The real readers on the in-memory model of Kafka
// (internal/testkit/memkafka), which the conformance tests hold to the
// broker.

var (
	_ ReaderClient = (*memkafka.Client)(nil)
	_ GroupClient  = (*memkafka.Client)(nil)
)

// modelInput is topic "in" of two partitions. Partition 0 is written in
// transactions, so markers and aborted records sit between its data
// records: 0-2 committed (marker 3), 4 plain, 5 aborted (marker 6), 7-8
// committed (marker 9). Partition 1 holds plain records 0-4.
func modelInput(t *testing.T) *memkafka.Cluster {
	t.Helper()
	k := memkafka.New(time.Unix(1_800_000_000, 0))
	if err := k.CreateTopic("in", 2); err != nil {
		t.Fatal(err)
	}
	p, err := k.InitProducer("writer", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	txn := func(commit bool, values ...string) {
		t.Helper()
		if err := p.Begin(); err != nil {
			t.Fatal(err)
		}
		for _, v := range values {
			if _, err := p.Produce(memkafka.Record{Topic: "in", Partition: 0, Value: []byte(v)}); err != nil {
				t.Fatal(err)
			}
		}
		if err := p.End(commit); err != nil {
			t.Fatal(err)
		}
	}
	plain := func(partition int32, v string) {
		t.Helper()
		if _, err := k.Append(memkafka.Record{Topic: "in", Partition: partition, Value: []byte(v)}); err != nil {
			t.Fatal(err)
		}
	}
	txn(true, "a0", "a1", "a2")
	plain(0, "a4")
	txn(false, "aborted")
	txn(true, "a7", "a8")
	for i := range 5 {
		plain(1, fmt.Sprintf("b%d", i))
	}
	return k
}

// readerOn is a Reader of the model from offsets, with the client options
// NewReader gives franz-go's.
func readerOn(k *memkafka.Cluster, offsets map[TopicPartition]int64) *Reader {
	return NewReaderOn(memkafka.NewClient(k, memkafka.ClientConfig{KeepControlRecords: true}), offsets)
}

// pollAll polls r until a poll returns nothing.
func pollAll(t *testing.T, r *Reader) []*kgo.Record {
	t.Helper()
	var all []*kgo.Record
	for {
		recs, err := r.Poll(context.Background(), 3)
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) == 0 {
			return all
		}
		all = append(all, recs...)
	}
}

func name(r *kgo.Record) string { return fmt.Sprintf("%d@%d:%s", r.Partition, r.Offset, r.Value) }

// A source's position is the next offset to read of each partition
// (checkpoint.SourceOffset): Advance past a record makes it that record's
// offset + 1, and a reader restored from the positions resumes exactly
// after the last record handed on, markers and aborted records in
// between or not: no record twice, none lost.
func TestAdvanceStoresTheNextOffsetAndRestoredReadersResumeThere(t *testing.T) {
	k := modelInput(t)
	start := map[TopicPartition]int64{{"in", 0}: 0, {"in", 1}: 0}
	all := pollAll(t, readerOn(k, start))
	var want []string
	for _, r := range all {
		want = append(want, name(r))
	}
	slices.Sort(want)
	if fmt.Sprint(want) != "[0@0:a0 0@1:a1 0@2:a2 0@4:a4 0@7:a7 0@8:a8 1@0:b0 1@1:b1 1@2:b2 1@3:b3 1@4:b4]" {
		t.Fatalf("read %v", want)
	}

	// Hand on every prefix of each partition, restore from the
	// positions, and read the rest.
	for cut := range 7 {
		r := readerOn(k, start)
		handed := map[int32]int{}
		var got []string
		for _, rec := range pollAll(t, r) {
			if handed[rec.Partition] < cut {
				handed[rec.Partition]++
				r.Advance(rec)
				got = append(got, name(rec))
			}
		}
		positions := map[TopicPartition]int64{}
		for _, p := range r.Positions() {
			positions[TopicPartition{p.Topic, p.Partition}] = p.Offset
		}
		for _, rec := range pollAll(t, readerOn(k, positions)) {
			got = append(got, name(rec))
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Fatalf("handing on %d records of each partition, then restoring from %v: read %v in all, want each record once: %v", cut, positions, got, want)
		}
	}
}

// Markers are not records, yet hold offsets: once every record polled was
// handed on, a partition written in transactions has no lag.
func TestLagsPassTheMarkersOnTheModel(t *testing.T) {
	k := modelInput(t)
	r := readerOn(k, map[TopicPartition]int64{{"in", 0}: 0, {"in", 1}: 0})
	for _, rec := range pollAll(t, r) {
		r.Advance(rec)
	}
	for _, l := range r.Lags() {
		if l.Records != 0 {
			t.Errorf("lag of %s: %d after reading everything", l.TopicPartition, l.Records)
		}
	}
}

// An at_most_once reader commits a span's offsets before it hands out any
// of its records.
func TestGroupReaderCommitsBeforeHandingOutOnTheModel(t *testing.T) {
	k := modelInput(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl := memkafka.NewClient(k, memkafka.ClientConfig{Group: "job", Topics: []string{"in"}, WaitForRecords: true})
	r := NewGroupReaderOn(cl)
	defer r.Close()
	seen := 0
	for seen < 11 {
		recs, err := r.Poll(ctx, 2)
		if err != nil {
			t.Fatal(err)
		}
		committed := k.GroupOffsets("job")
		for _, rec := range recs {
			if c, ok := committed[memkafka.TP{Topic: rec.Topic, Partition: rec.Partition}]; !ok || c <= rec.Offset {
				t.Fatalf("record %s handed out before its offset was committed (committed: %d)", name(rec), c)
			}
		}
		seen += len(recs)
	}
	if seen != 11 {
		t.Fatalf("%d records, want 11", seen)
	}
}

// A poll woken by a cancelled context (how a barrier trigger interrupts an
// idle source) still hands over the records the client returned: its
// position is past them, so dropping them would skip them for good. The
// context says it is cancelled but never signals it, so the race is
// certain.
func TestPollNeverDropsRecordsOnCancelOnTheModel(t *testing.T) {
	k := modelInput(t)
	r := readerOn(k, map[TopicPartition]int64{{"in", 0}: 0, {"in", 1}: 0})
	var got []string
	for {
		recs, err := r.Poll(cancelledLate{context.Background()}, 2)
		if len(recs) == 0 {
			if err == nil {
				t.Fatal("an empty poll of a cancelled context returned no error")
			}
			break
		}
		for _, rec := range recs {
			got = append(got, name(rec))
		}
	}
	if len(got) != 11 {
		t.Fatalf("read %v through cancelled polls, want all 11 records", got)
	}
}
