package engine

import (
	"fmt"
	"hash/fnv"
	"strings"
	"testing"

	"github.com/eoflow/pipeline/checkpoint"
)

func rec(name string) message {
	return message{kind: msgRecord, op: nil, rec: nil, barrier: &barrier{id: 0, offsets: []checkpoint.SourceOffset{{Topic: name}}}}
}

func bar(id checkpoint.ID, topic string, p int32) message {
	return message{kind: msgBarrier, barrier: &barrier{id: id, offsets: []checkpoint.SourceOffset{{Topic: topic, Partition: p, Offset: 1}}}}
}

// name identifies a test record by the topic smuggled into its barrier
// field (records carry no barrier otherwise).
func name(m message) string { return m.barrier.offsets[0].Topic }

// A task with two inputs: input 0 reaches barrier 1 first; its later
// records wait until input 1 delivers barrier 1, then come in order.
func TestAlignerHoldsBackUntilEveryInputArrived(t *testing.T) {
	a := newAligner(2)
	var seen []string
	var done []*barrier
	var handle func(b batch) error
	handle = func(b batch) error {
		return a.each(b, func(m message) error {
			if m.kind != msgBarrier {
				seen = append(seen, name(m))
				return nil
			}
			d, err := a.arrive(b.from, m.barrier)
			if err != nil || d == nil {
				return err
			}
			done = append(done, d)
			seen = append(seen, fmt.Sprintf("snapshot-%d", d.id))
			for _, hb := range a.release() {
				if err := handle(hb); err != nil {
					return err
				}
			}
			return nil
		})
	}
	steps := []batch{
		{from: 0, msgs: []message{rec("a1"), bar(1, "s0", 0), rec("a2")}},
		{from: 0, msgs: []message{rec("a3"), bar(2, "s0", 0), rec("a4")}}, // all held: input 0 is blocked
		{from: 1, msgs: []message{rec("b1"), rec("b2")}},
		{from: 1, msgs: []message{bar(1, "s1", 5), rec("b3"), bar(2, "s1", 5), rec("b4")}},
	}
	for _, b := range steps {
		if err := handle(b); err != nil {
			t.Fatal(err)
		}
	}
	want := "a1 b1 b2 snapshot-1 a2 a3 b3 snapshot-2 a4 b4"
	if got := strings.Join(seen, " "); got != want {
		t.Fatalf("processed %q\nwant      %q", got, want)
	}
	if len(done) != 2 || len(done[0].offsets) != 2 {
		t.Fatalf("merged barriers %+v: want offsets of both inputs", done)
	}
}

func TestAlignerUnionOfOffsets(t *testing.T) {
	a := newAligner(2)
	// Workers' barriers reaching the sink each carry every partition.
	full := &barrier{id: 3, offsets: []checkpoint.SourceOffset{{Topic: "t", Partition: 0}, {Topic: "t", Partition: 1}},
		state: []checkpoint.StateSummary{{Operator: "agg", Keys: 1}}}
	if d, err := a.arrive(0, full); d != nil || err != nil {
		t.Fatalf("first arrival: %v, %v", d, err)
	}
	d, err := a.arrive(1, full)
	if err != nil || d == nil || len(d.offsets) != 2 || len(d.state) != 2 {
		t.Fatalf("merged %+v, %v: want 2 offsets (deduplicated) and 2 state summaries", d, err)
	}
}

func TestAlignerRefusesMixedBarriers(t *testing.T) {
	a := newAligner(2)
	if _, err := a.arrive(0, &barrier{id: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.arrive(1, &barrier{id: 2}); err == nil {
		t.Fatal("barrier 2 while aligning 1 must be an error")
	}
	if _, err := a.arrive(0, &barrier{id: 1}); err == nil {
		t.Fatal("a second barrier 1 from the same input must be an error")
	}
}

// partitionWorker must spread partitions exactly as hash/fnv's FNV-1a did,
// so a job keeps its partition-to-worker mapping.
func TestPartitionWorkerIsFNV1a(t *testing.T) {
	for _, topic := range []string{"", "in", "orders-eu", "a.b_c-1"} {
		for _, workers := range []int{1, 2, 3, 7} {
			for p := int32(0); p < 16; p++ {
				h := fnv.New32a()
				h.Write([]byte(topic))
				want := int((h.Sum32() + uint32(p)) % uint32(workers))
				if got := partitionWorker(topic, p, workers); got != want {
					t.Fatalf("partitionWorker(%q, %d, %d) = %d, want %d", topic, p, workers, got, want)
				}
			}
		}
	}
}

// Once a barrier has aligned, every input stays blocked until release:
// what arrives meanwhile (the sink's next epoch, while the aligned one
// commits) is held whole, counted, and handed back in arrival order.
func TestAlignerHoldsEverythingUntilRelease(t *testing.T) {
	a := newAligner(2)
	var seen []string
	handle := func(b batch) error {
		return a.each(b, func(m message) error {
			if m.kind == msgBarrier {
				_, err := a.arrive(b.from, m.barrier)
				return err
			}
			seen = append(seen, name(m))
			return nil
		})
	}
	for _, b := range []batch{
		{from: 0, msgs: []message{rec("a1"), bar(1, "s0", 0), rec("a2")}},
		{from: 1, msgs: []message{bar(1, "s1", 0), rec("b1"), rec("b2")}},
		{from: 0, msgs: []message{rec("a3")}},
	} {
		if err := handle(b); err != nil {
			t.Fatal(err)
		}
	}
	if got := strings.Join(seen, " "); got != "a1" || a.heldMsgs != 4 {
		t.Fatalf("before release: processed %q, %d held; want a1 and 4 held", got, a.heldMsgs)
	}
	for _, hb := range a.release() {
		if err := handle(hb); err != nil {
			t.Fatal(err)
		}
	}
	if got := strings.Join(seen, " "); got != "a1 a2 b1 b2 a3" || a.heldMsgs != 0 {
		t.Fatalf("after release: processed %q, %d held; want a1 a2 b1 b2 a3 and none held", got, a.heldMsgs)
	}
}

// A worker gives a batch's slice back for reuse only when it handled all
// of it: once a barrier blocks the input mid-batch, the rest waits in the
// aligner inside the same slice, and must come out of it intact (a
// recycled slice is cleared at once).
func TestWorkerRecyclesNoHeldBatch(t *testing.T) {
	w := &workerTask{align: newAligner(2)}
	if err := w.handle(batch{from: 0, msgs: []message{bar(1, "in", 0), rec("a"), rec("b")}}); err != nil {
		t.Fatal(err)
	}
	held := w.align.release()
	if len(held) != 1 || len(held[0].msgs) != 2 {
		t.Fatalf("held %v, want the 2 records after the barrier", held)
	}
	for i, want := range []string{"a", "b"} {
		if m := held[0].msgs[i]; m.barrier == nil || name(m) != want {
			t.Fatalf("held message %d is %+v, want record %s: the held batch was cleared", i, m, want)
		}
	}
}
