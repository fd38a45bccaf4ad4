package engine

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"math/big"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/eoflow/pipeline/internal/srtest"
	"github.com/eoflow/pipeline/operator/keyed"
	"github.com/eoflow/pipeline/state"
)

// ijAvroPayment and ijAvroOrder are the Avro values of the interval
// join's two streams: decimals (one beyond float64's digits, one with a
// trailing zero), bytes, a timestamp, a float with an integral value.
const (
	ijAvroPayment = `{"type":"record","name":"Payment","fields":[` +
		`{"name":"id","type":"string"},{"name":"order_id","type":"long"},` +
		`{"name":"amount","type":{"type":"bytes","logicalType":"decimal","precision":30,"scale":2}},` +
		`{"name":"blob","type":"bytes"},{"name":"rate","type":"double"},` +
		`{"name":"ts","type":{"type":"long","logicalType":"timestamp-micros"}}]}`
	ijAvroOrder = `{"type":"record","name":"Order","fields":[` +
		`{"name":"id","type":"long"},{"name":"total","type":{"type":"bytes","logicalType":"decimal","precision":30,"scale":3}},` +
		`{"name":"placed","type":{"type":"long","logicalType":"timestamp-millis"}}]}`
	ijAvroJob = `
name: ij-avro
kafka: {brokers: 127.0.0.1:1}
schema_registry: {url: %s}
sources:
  - id: payments
    topics: [payments]
    format: avro
    event_time: {max_out_of_orderness: 1s}
  - id: orders
    topics: [orders]
    format: avro
    event_time: {max_out_of_orderness: 1s}
steps:
%s
  - id: matched
    from: %s
    join: {stream: orders, key: order_id, other_key: id, within: {before: 1h, after: 0s}, as: order, how: left, late_topic: late}
sinks:
  - topic: out
scale: {mode: %s, partitions: 4}
admin: {listen: "off"}
`
)

// TestGroupIntervalJoinAvroIsSingleMode: an interval join of two Avro
// streams writes, in group mode (every record across the repartition
// topic and back), the same output records, byte for byte, as in single
// mode: a decimal keeps its digits and scale, bytes, timestamps and
// floats their types, whatever JSON would make of them.
func TestGroupIntervalJoinAvroIsSingleMode(t *testing.T) {
	reg := srtest.Start(t)
	payID, _, err := reg.RegisterSchema("payments-value", sr.Schema{Schema: ijAvroPayment})
	if err != nil {
		t.Fatal(err)
	}
	ordID, _, err := reg.RegisterSchema("orders-value", sr.Schema{Schema: ijAvroOrder})
	if err != nil {
		t.Fatal(err)
	}
	framed := func(id int, schema string, v any) []byte {
		t.Helper()
		body, err := avro.Marshal(avro.MustParse(schema), v)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := (&sr.ConfluentHeader{}).AppendEncode(nil, id, nil)
		return append(b, body...)
	}
	type payment struct {
		ID      string    `avro:"id"`
		OrderID int64     `avro:"order_id"`
		Amount  *big.Rat  `avro:"amount"`
		Blob    []byte    `avro:"blob"`
		Rate    float64   `avro:"rate"`
		TS      time.Time `avro:"ts"`
	}
	type order struct {
		ID     int64     `avro:"id"`
		Total  *big.Rat  `avro:"total"`
		Placed time.Time `avro:"placed"`
	}
	rat := func(s string) *big.Rat {
		r, ok := new(big.Rat).SetString(s)
		if !ok {
			t.Fatal(s)
		}
		return r
	}
	base := time.UnixMilli(1_765_000_000_000).UTC()
	var inputs []*kgo.Record
	for i := range 4 {
		at := base.Add(time.Duration(i) * time.Second)
		inputs = append(inputs,
			&kgo.Record{Topic: "orders", Partition: int32(i % 2), Offset: int64(i), Timestamp: at,
				Value: framed(ordID, ijAvroOrder, order{ID: int64(i), Total: rat(fmt.Sprintf("1234567890123456789.%03d", i*10)), Placed: at})},
			&kgo.Record{Topic: "payments", Partition: int32(i % 2), Offset: int64(i), Timestamp: at.Add(time.Millisecond),
				Value: framed(payID, ijAvroPayment, payment{ID: fmt.Sprintf("p%d", i), OrderID: int64(i % 3), Amount: rat("112.90"),
					Blob: []byte{0, 1, 0xff}, Rate: 2.0, TS: at.Add(123 * time.Microsecond)})})
	}

	// A late payment (behind its partition's watermark) goes to the late
	// output as read, in both modes.
	inputs = append(inputs, &kgo.Record{Topic: "payments", Partition: 1, Offset: 9, Timestamp: base.Add(-time.Hour),
		Value: framed(payID, ijAvroPayment, payment{ID: "late", Amount: rat("0.10"), Blob: []byte{}, TS: base})})
	for _, c := range []struct{ name, steps, from string }{
		{"as read", "", "payments"},
		{"after a map", `  - id: m
    from: payments
    map: {order_id: order_id, amount: amount, triple: amount * 3, blob: blob, rate: rate, ts: ts, id: id}`, "m"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := sameIntervalJoin(t, func(mode string) string { return fmt.Sprintf(ijAvroJob, reg.URL(), c.steps, c.from, mode) }, inputs)
			// The results hold a decimal beyond float64's digits.
			if !slices.ContainsFunc(got, func(s string) bool { return strings.Contains(s, "1234567890123456789.01") }) ||
				!slices.ContainsFunc(got, func(s string) bool { return strings.HasPrefix(s, "late ") }) {
				t.Fatalf("want a result with the decimal's every digit and a late record:\n%s", strings.Join(got, "\n"))
			}
		})
	}
}

// sameIntervalJoin checks that the job (job("single"), job("group"))
// writes the same records, byte for byte, in both modes.
// It returns what was written.
func sameIntervalJoin(t *testing.T, job func(mode string) string, inputs []*kgo.Record) []string {
	t.Helper()
	single := runIntervalJoin(t, job("single"), inputs, false)
	group := runIntervalJoin(t, job("group"), inputs, true)
	if !slices.ContainsFunc(single, func(s string) bool { return strings.HasPrefix(s, "out ") }) {
		t.Fatalf("single mode wrote no result:\n%s", strings.Join(single, "\n"))
	}
	if !slices.Equal(group, single) {
		t.Fatalf("group mode wrote\n%s\nsingle mode\n%s", strings.Join(group, "\n"), strings.Join(single, "\n"))
	}
	return single
}

// runIntervalJoin routes inputs through the job's stateless side (in
// group mode: across the repartition topic, as the keyed side reads it)
// into one interval join operator, fires it past every input, and returns
// its output records (key, timestamp, value) and dead letters.
func runIntervalJoin(t *testing.T, job string, inputs []*kgo.Record, group bool) []string {
	t.Helper()
	cfg := parseConfig(t, []byte(job), nil)
	p, err := compile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.useSchemas(cfg, slog.New(slog.DiscardHandler), nil); err != nil {
		t.Fatal(err)
	}
	if err := p.schemas.Prefetch(t.Context(), inputs); err != nil {
		t.Fatal(err)
	}
	p.shuffle = newShuffle(cfg)
	src, dst := p.newRouter(1), p.newRouter(1)
	// Event time is placed where a record is read (the source side).
	src.clocks = newClocks(p.time, nil, time.Now)
	if group {
		dst.clocks = newClocks(p.time, nil, time.Now)
	}
	groups := cfg.Checkpoint.KeyGroups
	op, err := keyed.NewIntervalJoin(p.env(time.Now), p.targets[0].sinks, p.targets[0].interval, groups, state.RangeFor(0, 1, groups))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	show := func(recs []*kgo.Record, what string) {
		for _, r := range recs {
			var hdrs []string
			for _, h := range r.Headers {
				hdrs = append(hdrs, h.Key+"="+string(h.Value))
			}
			got = append(got, fmt.Sprintf("%s %s %q %d %q %q", what, r.Topic, r.Key, r.Timestamp.UnixMilli(), r.Value, hdrs))
		}
	}
	for _, in := range inputs {
		msgs := routeOne(src, in)
		if group {
			var crossed []message
			for _, m := range msgs {
				if m.kind != msgShuffle {
					crossed = append(crossed, m)
					continue
				}
				crossed = append(crossed, routeOne(dst, m.rec)...)
			}
			msgs = crossed
		}
		for _, m := range msgs {
			switch m.kind {
			case msgDeadLetter:
				show([]*kgo.Record{m.rec}, "dead")
				continue
			case msgLate:
				show([]*kgo.Record{m.rec}, "late")
				continue
			case msgRecord:
			default:
				t.Fatalf("%v from the router", m.kind)
			}
			res := op.Process(&keyed.Input{Rec: m.rec, Op: m.op, At: m.at, Wm: m.wm})
			show(res.DeadLetters, "dead")
			show(res.Late, "late")
		}
	}
	res, _, _ := op.Barrier(time.Now().UnixMilli())
	for _, r := range res.Outputs {
		if !json.Valid(r.Value) {
			t.Errorf("output %q is not JSON", r.Value)
		}
	}
	show(res.Outputs, "out")
	show(res.DeadLetters, "dead")
	return got
}

// TestGroupIntervalJoinJSONIsSingleMode: the same for JSON streams, as
// written (spaces, 1.50, escapes) or in a Debezium envelope (a delete is
// a tombstone), with the records that cannot join (a null value, not an
// object): single mode's results and dead letters in group mode.
func TestGroupIntervalJoinJSONIsSingleMode(t *testing.T) {
	const job = `
name: ij-json
kafka: {brokers: 127.0.0.1:1}
sources:
  - id: payments
    topics: [payments]
    event_time: {max_out_of_orderness: 1s}
  - id: orders
    topics: [orders]
    envelope: %s
    event_time: {max_out_of_orderness: 1s}
steps:
  - id: matched
    from: payments
    join: {stream: orders, key: order_id, other_key: '%s', within: {before: 1h, after: 0s}, as: order, how: left}
sinks:
  - topic: out
scale: {mode: %s, partitions: 4}
admin: {listen: "off"}
`
	debezium := func(op, before, after string) string {
		return `{"schema":{"type":"struct"},"payload":{"op":"` + op + `","before":` + before + `,"after":` + after + `,"ts_ms":5}}`
	}
	for _, c := range []struct {
		envelope, key string
		orders        []string
		want          string
	}{
		{"none", "id", []string{"", ` {"id": 1, "x": 1.50 , "s":"\u00e9\/", "y": [1e2, -0.0]} `, `{"id":1,"n":NaN}`, `"str"`, `{"id":1}`}, `\"x\":1.50`},
		{"debezium", "after == nil ? before.id : after.id", []string{
			debezium("c", "null", `{"id": 1, "x": 1.50}`), debezium("u", `{"id":1}`, `{"id": 1, "x": 2.0}`), debezium("d", `{"id":1}`, "null"), "",
		}, "a delete (tombstone) has none to join"},
	} {
		t.Run(c.envelope, func(t *testing.T) {
			base := time.UnixMilli(1_765_000_000_000).UTC()
			var inputs []*kgo.Record
			for i, v := range c.orders {
				var val []byte
				if v != "" {
					val = []byte(v)
				}
				inputs = append(inputs, &kgo.Record{Topic: "orders", Offset: int64(i), Key: []byte("1"), Timestamp: base, Value: val})
			}
			inputs = append(inputs,
				&kgo.Record{Topic: "payments", Offset: 0, Timestamp: base, Value: []byte(`{"order_id":1, "a": 1.0, "order": 5}`)},
				&kgo.Record{Topic: "payments", Offset: 1, Timestamp: base, Value: []byte(`[1]`)},
				&kgo.Record{Topic: "payments", Offset: 2, Timestamp: base, Value: nil})
			got := sameIntervalJoin(t, func(mode string) string { return fmt.Sprintf(job, c.envelope, c.key, mode) }, inputs)
			if !slices.ContainsFunc(got, func(s string) bool { return strings.Contains(s, c.want) }) {
				t.Fatalf("want %s:\n%s", c.want, strings.Join(got, "\n"))
			}
		})
	}
}
