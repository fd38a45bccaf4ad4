package memkafka

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// fate is what the oracle knows of a written record.
type fate uint8

const (
	pending fate = 1 + iota
	committed
	aborted
)

// written is one record the history wrote, as the oracle tracks it.
type written struct {
	off   int64
	value string
	fate  fate
	owner int // the producer slot that wrote it; -1 outside transactions
}

// oracle follows a history with its own bookkeeping, from the answers the
// model gave, and predicts what a read_committed reader must see.
type oracle struct {
	parts map[TP][]*written
	// open is, per producer slot, what its transaction wrote and when its
	// first write was (the transaction's start).
	open    map[int][]*written
	started map[int]time.Time
}

func (o *oracle) settle(slot int, f fate) {
	for _, w := range o.open[slot] {
		w.fate = f
	}
	delete(o.open, slot)
	delete(o.started, slot)
}

// visible is what a read_committed reader of tp must see, and the last
// stable offset.
func (o *oracle) visible(tp TP, hw int64) ([]string, int64) {
	lso := hw
	for _, w := range o.parts[tp] {
		if w.fate == pending && w.off < lso {
			lso = w.off
		}
	}
	var out []string
	for _, w := range o.parts[tp] {
		if w.off < lso && w.fate != pending && w.fate != aborted {
			out = append(out, fmt.Sprintf("%d:%s", w.off, w.value))
		}
	}
	return out, lso
}

func readAll(t *testing.T, c *Cluster, tp TP) []string {
	t.Helper()
	var out []string
	from := int64(0)
	for {
		recs, next, err := c.ReadCommitted(tp, from, 3)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			out = append(out, fmt.Sprintf("%d:%s", r.Offset, r.Value))
		}
		if next == from {
			return out
		}
		from = next
	}
}

// TestModelAgainstAnOracle runs seeded random histories (writes inside
// and outside transactions, commits, aborts, fencings, timeouts and
// zombies that keep calling) and checks after every step that each
// partition reads exactly as an independent oracle predicts: committed and
// plain records below the last stable offset, in offset order, nothing
// aborted, nothing of an open transaction or after it.
func TestModelAgainstAnOracle(t *testing.T) {
	seeds := 1000
	if testing.Short() {
		seeds = 300
	}
	for seed := range seeds {
		runHistory(t, uint64(seed), 150)
	}
}

func runHistory(t *testing.T, seed uint64, steps int) {
	rng := rand.New(rand.NewPCG(seed, 1))
	c := New(time.Unix(0, 0))
	const topicName = "t"
	if err := c.CreateTopic(topicName, 2); err != nil {
		t.Fatal(err)
	}
	o := &oracle{parts: map[TP][]*written{}, open: map[int][]*written{}, started: map[int]time.Time{}}
	ids := []string{"x", "y"}
	timeout := 5 * time.Second
	// slots are every Producer the history made, zombies included; idOf
	// names each slot's transactional id; latest the newest slot per id.
	var slots []*Producer
	var idOf []string
	latest := map[string]int{}
	var trace []string
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("seed %d: %s\nhistory:\n%s", seed, fmt.Sprintf(format, args...), strings.Join(trace, "\n"))
	}
	n := 0
	value := func() string { n++; return fmt.Sprint(n) }
	for step := range steps {
		tp := TP{topicName, int32(rng.IntN(2))}
		switch k := rng.IntN(10); {
		case k == 0 || len(slots) == 0: // a (new) instance starts
			id := ids[rng.IntN(len(ids))]
			p, err := c.InitProducer(id, timeout)
			if err != nil {
				fail("init %s: %v", id, err)
			}
			if prev, ok := latest[id]; ok {
				o.settle(prev, aborted) // what the predecessor left open
			}
			slots, idOf = append(slots, p), append(idOf, id)
			latest[id] = len(slots) - 1
			trace = append(trace, fmt.Sprintf("%d: init %s -> slot %d", step, id, len(slots)-1))
		case k == 1: // time passes
			d := time.Duration(rng.IntN(4)) * time.Second
			c.Advance(d)
			for slot, start := range o.started {
				if c.Now().Sub(start) > timeout {
					o.settle(slot, aborted)
				}
			}
			trace = append(trace, fmt.Sprintf("%d: advance %v", step, d))
		case k == 2: // a plain write
			v := value()
			r, err := c.Append(Record{Topic: tp.Topic, Partition: tp.Partition, Value: []byte(v)})
			if err != nil {
				fail("append: %v", err)
			}
			o.parts[tp] = append(o.parts[tp], &written{off: r.Offset, value: v, fate: committed, owner: -1})
			trace = append(trace, fmt.Sprintf("%d: append %s@%s/%d", step, v, tp, r.Offset))
		default: // a producer, maybe a zombie, does something
			slot := rng.IntN(len(slots))
			p := slots[slot]
			switch rng.IntN(4) {
			case 0:
				err := p.Begin()
				trace = append(trace, fmt.Sprintf("%d: slot %d begin: %v", step, slot, err))
			case 1, 2:
				v := value()
				r, err := p.Produce(Record{Topic: tp.Topic, Partition: tp.Partition, Value: []byte(v)})
				trace = append(trace, fmt.Sprintf("%d: slot %d produce %s@%s: %v", step, slot, v, tp, err))
				if err == nil {
					if latest[idOf[slot]] != slot {
						fail("zombie slot %d wrote", slot)
					}
					w := &written{off: r.Offset, value: v, fate: pending, owner: slot}
					o.parts[tp] = append(o.parts[tp], w)
					if _, ok := o.started[slot]; !ok {
						o.started[slot] = c.Now()
					}
					o.open[slot] = append(o.open[slot], w)
				} else if !errors.Is(err, ErrNoTransaction) && !errors.Is(err, kerr.InvalidProducerEpoch) {
					fail("produce: unexpected %v", err)
				}
			case 3:
				commit := rng.IntN(3) > 0
				err := p.End(commit)
				trace = append(trace, fmt.Sprintf("%d: slot %d end commit=%v: %v", step, slot, commit, err))
				switch {
				case err == nil && commit:
					if _, ok := o.open[slot]; ok && latest[idOf[slot]] != slot {
						fail("zombie slot %d committed", slot)
					}
					o.settle(slot, committed)
				case errors.Is(err, kerr.OperationNotAttempted):
					// nothing ended; an abort is due
				default:
					o.settle(slot, aborted)
				}
			}
		}
		for part := range int32(2) {
			tp := TP{topicName, part}
			end, err := c.EndOffsets(tp)
			if err != nil {
				fail("end offsets: %v", err)
			}
			want, lso := o.visible(tp, end.HighWatermark)
			if got := readAll(t, c, tp); !slices.Equal(got, want) || end.LastStable != lso {
				fail("partition %s reads %v up to %d\nwant             %v up to %d", tp, got, end.LastStable, want, lso)
			}
		}
	}
	// Every id initialized once more: nothing is left open anywhere.
	for _, id := range ids {
		if _, err := c.InitProducer(id, timeout); err != nil {
			fail("final init %s: %v", id, err)
		}
	}
	if open := c.OpenTransactions(); len(open) > 0 {
		fail("transactions left open: %v", open)
	}
}

// The coordinator aborts a transaction only once it outlived its timeout,
// and a producer fenced by a newer one cannot recover by aborting.
func TestTimeoutAndFencing(t *testing.T) {
	c := New(time.Unix(0, 0))
	if err := c.CreateTopic("t", 1); err != nil {
		t.Fatal(err)
	}
	tp := Record{Topic: "t", Value: []byte("v")}
	a, _ := c.InitProducer("a", 10*time.Second)
	if err := a.Begin(); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Produce(tp); err != nil {
		t.Fatal(err)
	}
	c.Advance(10 * time.Second)
	if open := c.OpenTransactions(); !slices.Equal(open, []string{"a"}) {
		t.Fatalf("at the timeout exactly: open %v, want [a]", open)
	}
	c.Advance(time.Millisecond)
	if open := c.OpenTransactions(); len(open) != 0 {
		t.Fatalf("past the timeout: open %v, want none", open)
	}
	if _, err := a.Produce(tp); !errors.Is(err, kerr.InvalidProducerEpoch) {
		t.Fatalf("produce after the timeout: %v", err)
	}
	if err := a.End(false); err != nil {
		t.Fatalf("abort after the timeout must recover the id: %v", err)
	}

	b, _ := c.InitProducer("b", time.Minute)
	if err := b.Begin(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.InitProducer("b", time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Produce(tp); !errors.Is(err, kerr.InvalidProducerEpoch) {
		t.Fatalf("produce of a fenced producer: %v", err)
	}
	if err := b.End(true); !errors.Is(err, kerr.OperationNotAttempted) {
		t.Fatalf("commit after a failed write: %v", err)
	}
	if err := b.End(false); !errors.Is(err, kerr.ProducerFenced) {
		t.Fatalf("abort of a fenced producer: %v", err)
	}
	if _, err := c.InitProducer("c", 16*time.Minute); !errors.Is(err, kerr.InvalidTransactionTimeout) {
		t.Fatalf("a timeout above the brokers' maximum: %v", err)
	}
}

// Marker lag: a committed transaction stays open to the readers of each
// partition until that partition's marker is written, and its offsets
// take effect only with the offsets topic's; the id's next transaction
// and a new InitProducer write the id's pending markers first.
func TestMarkerLag(t *testing.T) {
	c := New(time.Unix(0, 0))
	c.SetMarkerLag(true)
	a, b, in := TP{"a", 0}, TP{"b", 0}, TP{"in", 0}
	for _, topic := range []string{"a", "b", "in"} {
		if err := c.CreateTopic(topic, 1); err != nil {
			t.Fatal(err)
		}
	}
	p, err := c.InitProducer("x", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	commit := func(value string) {
		t.Helper()
		if err := p.Begin(); err != nil {
			t.Fatal(err)
		}
		for _, tp := range []TP{a, b} {
			if _, err := p.Produce(Record{Topic: tp.Topic, Value: []byte(value)}); err != nil {
				t.Fatal(err)
			}
		}
		if err := p.TxnCommitOffsets("g", map[TP]int64{in: 7}); err != nil {
			t.Fatal(err)
		}
		if err := p.End(true); err != nil {
			t.Fatal(err)
		}
	}
	visible := func(tp TP) int {
		recs, _, err := c.ReadCommitted(tp, 0, 100)
		if err != nil {
			t.Fatal(err)
		}
		return len(recs)
	}
	commit("1")
	if n := c.PendingMarkers(); n != 3 {
		t.Fatalf("%d pending markers, want 3 (offsets, a, b)", n)
	}
	if visible(a) != 0 || visible(b) != 0 || !c.PendingOffsets("g", []TP{in}) || c.GroupOffsets("g")[in] != 0 {
		t.Fatal("a decided transaction took effect before its markers")
	}
	if o, _ := c.EndOffsets(a); o.LastStable != 0 || o.HighWatermark != 1 {
		t.Fatalf("a's offsets %+v before its marker", o)
	}
	c.DeliverMarker(2) // b's
	if visible(a) != 0 || visible(b) != 1 {
		t.Fatal("b's marker did not make it visible in b alone")
	}
	c.DeliverMarker(0) // the offsets'
	if c.PendingOffsets("g", []TP{in}) || c.GroupOffsets("g")[in] != 7 {
		t.Fatal("the offsets' marker did not make them take effect")
	}
	commit("2") // writes a's pending marker before its first write
	if visible(a) != 1 || c.PendingMarkers() != 3 {
		t.Fatalf("after the next transaction: %d visible in a, %d pending", visible(a), c.PendingMarkers())
	}
	if _, err := c.InitProducer("x", time.Minute); err != nil {
		t.Fatal(err)
	}
	if visible(a) != 2 || visible(b) != 2 || c.PendingMarkers() != 0 {
		t.Fatal("InitProducer did not write the id's pending markers")
	}
}
