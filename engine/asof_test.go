package engine

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/checkpoint"
	"github.com/eoflow/pipeline/config"
	"github.com/eoflow/pipeline/metrics"
	"github.com/eoflow/pipeline/operator"
	"github.com/eoflow/pipeline/source"
	"github.com/eoflow/pipeline/window"
)

// A held record keeps what routing it again needs: its key, value
// (nil stays nil), timestamp, headers and its partition's watermark.
func TestHeldInputRoundTrip(t *testing.T) {
	for _, rec := range []*kgo.Record{
		{Topic: "orders", Partition: 3, Offset: 77, Key: []byte("c1"), Value: []byte(`{"n":1}`), Timestamp: time.UnixMilli(1_700_000_000_123),
			Headers: []kgo.RecordHeader{{Key: "h", Value: []byte("v")}, {Key: "nil", Value: nil}}},
		{Topic: "orders", Partition: 0, Offset: 0, Timestamp: time.UnixMilli(-5)},
		{Topic: "t", Partition: 1, Offset: 9, Key: []byte{}, Value: []byte{}, Timestamp: time.UnixMilli(0)},
	} {
		for _, wm := range []int64{window.NoWatermark, -1, 1_700_000_000_000} {
			hr := operator.HeldRecord{Topic: rec.Topic, Partition: rec.Partition, Offset: rec.Offset, Record: appendHeldInput(nil, rec, wm)}
			got, gotWM, err := decodeHeldInput(hr)
			if err != nil {
				t.Fatal(err)
			}
			if gotWM != wm || !reflect.DeepEqual(got, rec) {
				t.Fatalf("round trip: %+v (watermark %d), want %+v (%d)", got, gotWM, rec, wm)
			}
			for n := range len(hr.Record) {
				cut := hr
				cut.Record = hr.Record[:n]
				if _, _, err := decodeHeldInput(cut); err == nil {
					t.Fatalf("%d of %d bytes decoded", n, len(hr.Record))
				}
			}
		}
	}
}

// The sink's barrier holds each partition's held records once, though
// every worker's barrier carries every source's.
func TestAlignerUnionOfHeld(t *testing.T) {
	a := newAligner(2)
	held := func(p int32, off int64) operator.HeldRecord {
		return operator.HeldRecord{At: off, Topic: "in", Partition: p, Offset: off}
	}
	all := &barrier{id: 1,
		offsets: []checkpoint.SourceOffset{{Topic: "in", Partition: 0, Offset: 5}, {Topic: "in", Partition: 1, Offset: 9}},
		held:    []operator.HeldRecord{held(0, 3), held(1, 7), held(1, 8)}}
	if _, err := a.arrive(0, all); err != nil {
		t.Fatal(err)
	}
	done, err := a.arrive(1, all)
	if err != nil || done == nil {
		t.Fatalf("aligned %v, %v", done, err)
	}
	if !reflect.DeepEqual(done.held, all.held) {
		t.Fatalf("held %v, want %v once", done.held, all.held)
	}
}

// At a barrier a source task's partition watermarks never pass the least
// event time it holds, a partition with held records is not idle, and
// the report for the horizon says both.
func TestHoldAtBarrier(t *testing.T) {
	js := &asOfJoins{metrics: metrics.New(prometheus.NewRegistry(), "job")}
	js.start(1)
	h := &sourceHold{joins: js, id: "source-0"}
	h.h.Add(operator.HeldRecord{At: 500, Topic: "in", Partition: 1, Offset: 4})
	h.h.Add(operator.HeldRecord{At: 300, Topic: "in", Partition: 1, Offset: 2})
	b := &barrier{times: []eventTime{
		{PartitionTime: checkpoint.PartitionTime{Topic: "in", Partition: 0}, watermark: 900},
		{PartitionTime: checkpoint.PartitionTime{Topic: "in", Partition: 1}, watermark: 1000, idle: true},
		{PartitionTime: checkpoint.PartitionTime{Topic: "in", Partition: 2}, watermark: 200},
		{PartitionTime: checkpoint.PartitionTime{Topic: "in", Partition: 3}, watermark: 5000, idle: true},
	}}
	h.atBarrier(b)
	var wms []int64
	var idle []bool
	for _, et := range b.times {
		wms, idle = append(wms, et.watermark), append(idle, et.idle)
	}
	if want := []int64{300, 300, 200, 300}; !reflect.DeepEqual(wms, want) {
		t.Errorf("watermarks %v, want %v", wms, want)
	}
	if want := []bool{false, false, false, true}; !reflect.DeepEqual(idle, want) {
		t.Errorf("idle %v, want %v", idle, want)
	}
	if len(b.held) != 2 || b.held[0].At != 300 {
		t.Errorf("held %v: want both, in release order", b.held)
	}
	if r := js.mu.reports[0]; !r.done || r.wm != 200 || !r.holdsAny || r.held != 300 {
		t.Errorf("report %+v: want watermark 200 (the least of the partitions not idle), least held 300", r)
	}
}

// The horizon moves to min(W, T) − history once every source task has
// reported, never past a held record; a version before it is dropped.
func TestAsOfHorizon(t *testing.T) {
	now := time.UnixMilli(0)
	tbl := &asOfTable{id: "t", history: 100, now: func() time.Time { return now }, loading: map[int32]int64{},
		vt: operator.NewVersionedTable(operator.NewTable(config.Table{ID: "t"}))}
	apply := func(key, value string, at int64) {
		tbl.apply(&kgo.Record{Partition: 0, Key: []byte(key), Value: []byte(value), Timestamp: time.UnixMilli(at)})
	}
	apply("k", `"a"`, 10)
	tbl.begin(map[int32]int64{0: 1})
	apply("k", `"b"`, 400)
	apply("k", `"c"`, 2000)
	js := &asOfJoins{tables: []*asOfTable{tbl}, metrics: metrics.New(prometheus.NewRegistry(), "job")}
	js.start(2)
	js.report(0, asOfReport{wm: 1000})
	if _, ok := tbl.vt.Horizon(); ok {
		t.Fatal("the horizon moved before every task reported")
	}
	js.report(1, asOfReport{wm: math.MaxInt64, held: 450, holdsAny: true})
	if h, ok := tbl.vt.Horizon(); !ok || h != 450 {
		t.Fatalf("horizon %d (%v), want min(1000, 2000) - 100, held back to 450", h, ok)
	}
	if v, _, found, late := tbl.vt.LookupAsOf("k", 450); !found || late || v != "b" {
		t.Errorf("as of 450 (the held record): %v, found %v, late %v: want the version at 400", v, found, late)
	}
	if keys, versions := tbl.vt.Len(); keys != 1 || versions != 2 {
		t.Errorf("%d keys, %d versions: want the version at 10 dropped", keys, versions)
	}
}

// positionsReader is a reader of the given partitions that reads nothing.
type positionsReader struct{ ps []source.Position }

func (r positionsReader) Poll(context.Context, int) ([]*kgo.Record, error) { return nil, nil }
func (r positionsReader) Advance(*kgo.Record)                              {}
func (r positionsReader) Positions() []source.Position                     { return r.ps }
func (r positionsReader) Close()                                           {}

// A restore gives each source task the held records of its partitions;
// those of a partition no task reads are dropped. Without a table to wait
// for (the configuration no longer joins as of event time), every record
// restored is released at the first barrier.
func TestRestoreHeld(t *testing.T) {
	var h operator.Hold
	for i, p := range []int32{0, 1, 1, 7} {
		h.Add(operator.HeldRecord{At: int64(100 * i), Topic: "in", Partition: p, Offset: int64(i)})
	}
	latest := &checkpoint.Record{ID: 3, Held: operator.AppendHold(nil, &h)}
	js := &asOfJoins{metrics: metrics.New(prometheus.NewRegistry(), "job")}
	var tasks []*sourceTask
	for i, ps := range [][]int32{{0}, {1, 2}} {
		r := positionsReader{}
		for _, p := range ps {
			r.ps = append(r.ps, source.Position{Topic: "in", Partition: p})
		}
		tasks = append(tasks, &sourceTask{reader: r, router: &router{hold: &sourceHold{joins: js, task: i, id: fmt.Sprintf("source-%d", i)}}})
	}
	if err := js.restoreHeld(latest, tasks, slog.New(slog.NewTextHandler(io.Discard, nil))); err != nil {
		t.Fatal(err)
	}
	if n0, n1 := tasks[0].router.hold.h.Len(), tasks[1].router.hold.h.Len(); n0 != 1 || n1 != 2 {
		t.Fatalf("restored %d and %d held records, want 1 and 2 (partition 7's dropped)", n0, n1)
	}
	if tw, ok := js.eventTime(); !ok || tw != math.MaxInt64 {
		t.Fatalf("without tables the event time is %d (%v): want every record released", tw, ok)
	}
	if got := tasks[1].router.hold.h.Release(math.MaxInt64); len(got) != 2 || got[0].At != 100 || got[1].At != 200 {
		t.Fatalf("released %v", got)
	}
}
