package engine

import (
	"math/rand/v2"
	"os"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/internal/datagen"
	"github.com/eoflow/pipeline/operator/keyed"
	"github.com/eoflow/pipeline/state"
	"github.com/eoflow/pipeline/window"
)

// The per-record path of the benchmark's keyed sum (bench/jobs/keyed-sum.yaml)
// as a worker runs it, without Kafka: route (decode, key_by, key group) on
// the source side, then process (state lookup, aggregate, output encoding)
// on the worker side. BenchmarkKeyedSumHotPath measures it; the tests below
// pin its output bytes so that a faster path cannot write different ones.

// hotPathOperator builds the plan, a router and a single worker's operator
// (all key groups) for the job file at path.
func hotPathOperator(tb testing.TB, path string, env map[string]string) (*router, *targetOp) {
	tb.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	r, op := hotPathJob(tb, data, env)
	return r, op.(*targetOp)
}

// hotPathJob is hotPathOperator for a job's text: the router spreads over
// two workers, the one operator holds every key group.
func hotPathJob(tb testing.TB, data []byte, env map[string]string) (*router, keyedOperator) {
	tb.Helper()
	cfg := parseConfig(tb, data, env)
	p, err := compile(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	t := p.targets[0]
	if !p.keyed {
		return p.newRouter(2), newTargetOp(keyed.NewPassThrough(p.env(time.Now), t.sinks, p.graph.Linear(), p.format), 0, cfg.Name)
	}
	groups := cfg.Checkpoint.KeyGroups
	op, err := keyed.NewAggregate(p.env(time.Now), t.sinks, t.agg, groups, state.RangeFor(0, 1, groups), false)
	if err != nil {
		tb.Fatal(err)
	}
	return p.newRouter(2), newTargetOp(op, 0, cfg.Name)
}

// benchInput is the bench workload's record (datagen.Event):
// {"key":"k<n>","amount":<1..1000>,"ts":<unix ms>,"pad":"xx…"}, ~100 bytes,
// the record key set to the key field.
func benchInput(key string, amount int, ts int64) *kgo.Record {
	return &kgo.Record{Topic: "bench-in", Partition: 3, Key: []byte(key), Value: datagen.Event(key, amount, ts, 100), Timestamp: time.UnixMilli(ts)}
}

// BenchmarkKeyedSumHotPath is route + process per record of the keyed sum,
// 100,000 keys, every key already in the state (the steady state of the
// 5,000,000-record benchmark). Records reach the operator in batches of
// 500, as a worker's share of a poll does, and the operator may prefetch
// each batch's states as the worker lets it. It includes one snapshot per
// 100,000 records (the changelog encoding of the dirty keys, as a
// checkpoint every ~250 ms at the benchmark's rate would).
func BenchmarkKeyedSumHotPath(b *testing.B) {
	const keys, batchLen = 100_000, 500
	r, op := hotPathOperator(b, "../bench/jobs/keyed-sum.yaml", nil)
	inputs := benchInputs(keys)
	for k := range keys { // warm: every key has state
		in := benchInput("k"+strconv.Itoa(k), 1, 1764688090000)
		msgs, _ := r.route1(in)
		op.process(msgs[0])
	}
	op.snapshot(window.NoWatermark)
	b.SetBytes(int64(len(inputs[0].Value)))
	b.ReportAllocs()
	batch := make([]message, 0, batchLen)
	i := 0
	for b.Loop() {
		msgs, _ := r.route1(inputs[i%len(inputs)])
		batch = append(batch, msgs...)
		i++
		if len(batch) == batchLen {
			processBatch(b, op, batch)
			batch = batch[:0]
		}
		if i%100_000 == 0 {
			op.snapshot(window.NoWatermark)
		}
	}
}

// processBatch is what a worker does with a batch of routed records: lets
// the operator prefetch, then processes each (one output, no dead
// letter) and gives its operator.Record back.
func processBatch(b *testing.B, op keyedOperator, msgs []message) {
	if p, ok := op.(prefetcher); ok {
		p.prefetch(msgs)
	}
	var returns slabReturns
	for _, m := range msgs {
		if outs, dls := op.process(m); len(outs) != 1 || len(dls) != 0 {
			b.Fatalf("process: %d outputs, %d dead letters", len(outs), len(dls))
		}
		if m.slab != nil {
			returns.add(m.slab)
		}
	}
	returns.flush()
}

// benchInputs are 65,536 bench records over keys keys, the same in every
// run.
func benchInputs(keys int) []*kgo.Record {
	rng := rand.New(rand.NewPCG(1, 2))
	inputs := make([]*kgo.Record, 1<<16)
	for i := range inputs {
		inputs[i] = benchInput("k"+strconv.Itoa(rng.IntN(keys)), rng.IntN(1000)+1, 1764688091000+int64(i))
	}
	return inputs
}

// routeAndProcess is one input's way through the job: one message from
// the router, one output and no dead letter from the operator.
func routeAndProcess(b *testing.B, r *router, op keyedOperator, in *kgo.Record) {
	msgs, _ := r.route1(in)
	if len(msgs) != 1 {
		b.Fatalf("route: %d messages", len(msgs))
	}
	if outs, dls := op.process(msgs[0]); len(outs) != 1 || len(dls) != 0 {
		b.Fatalf("process: %d outputs, %d dead letters", len(outs), len(dls))
	}
}

// BenchmarkPassThroughHotPath is route + process per record of the
// pass-through job (no steps: every record validated and written out).
func BenchmarkPassThroughHotPath(b *testing.B) {
	data, err := os.ReadFile("../bench/jobs/passthrough.yaml")
	if err != nil {
		b.Fatal(err)
	}
	r, op := hotPathJob(b, data, nil)
	inputs := benchInputs(100_000)
	// The one sink's output is the input record itself: each is put back
	// as it was for its next turn.
	orig := make([]kgo.Record, len(inputs))
	for j, in := range inputs {
		orig[j] = *in
	}
	b.SetBytes(int64(len(inputs[0].Value)))
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		j := i % len(inputs)
		routeAndProcess(b, r, op, inputs[j])
		*inputs[j] = orig[j]
		i++
	}
}

// BenchmarkKeyedSumSnapshot is the barrier's work for the keyed sum with
// 100,000 dirty keys (a 1s checkpoint at the benchmark's rate touches about
// that many): the changelog encoding of every dirty state and its records.
// ns/op is per key.
func BenchmarkKeyedSumSnapshot(b *testing.B) {
	const keys = 100_000
	r, op := hotPathOperator(b, "../bench/jobs/keyed-sum.yaml", nil)
	msgs := make([]message, keys)
	for k := range keys {
		in := benchInput("k"+strconv.Itoa(k), 1, 1764688090000)
		m, _ := r.route1(in)
		msgs[k] = m[0]
	}
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		for _, m := range msgs {
			op.process(m)
		}
		b.StartTimer()
		_, changes, _ := op.snapshot(window.NoWatermark)
		if changes.len() != keys {
			b.Fatalf("%d changes, want %d", changes.len(), keys)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*keys), "ns/key")
}

// changeRecords are a snapshot's changes as the sink produces them.
func changeRecords(c stateChanges) []*kgo.Record {
	recs := make([]*kgo.Record, c.len())
	for i := range recs {
		recs[i] = c.record(i)
	}
	return recs
}

// TestPassThroughReusesTheInputRecord: with one sink a pass-through's
// output record is its input's kgo.Record, made exactly what a new one
// would be (the sink topic, the key, the compact value, the timestamp,
// nothing else: no headers, offset or producer fields of the input). A
// dead letter keeps its input untouched, and with two sinks every output
// is a record of its own.
func TestPassThroughReusesTheInputRecord(t *testing.T) {
	one := []byte("name: pass\nkafka: {brokers: \"127.0.0.1:9092\"}\nsources: [{id: in, topics: [in]}]\nsinks: [{topic: out}]\n")
	two := []byte("name: pass\nkafka: {brokers: \"127.0.0.1:9092\"}\nsources: [{id: in, topics: [in]}]\nsinks: [{topic: out}, {topic: out2}]\n")
	at := time.UnixMilli(1764688091000)
	input := func(value string) *kgo.Record {
		return &kgo.Record{Topic: "in", Partition: 3, Offset: 42, LeaderEpoch: 7, ProducerID: 9, ProducerEpoch: 1,
			Key: []byte("k"), Value: []byte(value), Timestamp: at, Headers: []kgo.RecordHeader{{Key: "h", Value: []byte("v")}}}
	}
	process := func(r *router, op keyedOperator, in *kgo.Record) ([]*kgo.Record, []message) {
		msgs, _ := r.route1(in)
		if len(msgs) != 1 {
			t.Fatalf("route: %d messages", len(msgs))
		}
		if msgs[0].kind != msgRecord {
			return nil, msgs
		}
		return op.process(msgs[0])
	}
	r, op := hotPathJob(t, one, nil)
	for value, want := range map[string]string{`{"a":1}`: `{"a":1}`, ` {"a": [1, 2]} `: `{"a":[1,2]}`} {
		in := input(value)
		outs, dls := process(r, op, in)
		if len(outs) != 1 || len(dls) != 0 {
			t.Fatalf("%q: %d outputs, %d dead letters", value, len(outs), len(dls))
		}
		got := outs[0]
		if got != in {
			t.Errorf("%q: the output is a new record, not the input's", value)
		}
		clean := kgo.Record{Topic: "out", Key: []byte("k"), Value: []byte(want), Timestamp: at}
		if !reflect.DeepEqual(*got, clean) {
			t.Errorf("%q: output %+v, want %+v", value, *got, clean)
		}
	}
	in := input("not json")
	if outs, dls := process(r, op, in); len(outs) != 0 || len(dls) != 1 || in.Offset != 42 || len(in.Headers) != 1 {
		t.Errorf("dead letter: %d outputs, %d dead letters, input %+v", len(outs), len(dls), in)
	}
	r, op = hotPathJob(t, two, nil)
	in = input(`{"a":1}`)
	outs, _ := process(r, op, in)
	if len(outs) != 2 || outs[0] == in || outs[1] == in || outs[0] == outs[1] || in.Offset != 42 || in.Topic != "in" {
		t.Errorf("two sinks: outputs %v, input %+v", outs, in)
	}
}
