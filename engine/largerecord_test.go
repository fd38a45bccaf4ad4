package engine

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/internal/kread"
	"github.com/eoflow/pipeline/internal/testkit/kafkatest"
	"github.com/eoflow/pipeline/metrics"
	"github.com/eoflow/pipeline/metrics/metricstest"
	"github.com/eoflow/pipeline/sink"
)

// A bad record as large as the input topic accepts must not stall the
// job (issue 11, item 3): ten numbers, then the 1,000,000 bytes
// of "x", then one of 1,048,400 bytes of "y", the most a topic with the
// brokers' default max.message.bytes (1,048,588) takes. Both are not JSON.
// The first one's dead letter fits the dead-letter topic once the
// producer is sized from the brokers' settings, and goes there whole; the
// second's cannot (its headers add about 260 bytes), and goes there cut to
// fit, with its original size in a header. The ten sums are committed.
func TestLargeBadRecordsAreDeadLettered(t *testing.T) {
	e := newTestEnv(t, "exactly_once")
	e.numbers(1, 10)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	p := kafkatest.Client(t, e.brokers, kgo.DefaultProduceTopic(e.env["INPUT_TOPIC"]), kgo.ProducerBatchMaxBytes(1_048_588))
	exact := bytes.Repeat([]byte("x"), 1_000_000)
	edge := bytes.Repeat([]byte("y"), 1_048_400)
	for _, v := range [][]byte{exact, edge} {
		if err := p.ProduceSync(ctx, &kgo.Record{Value: v}).FirstErr(); err != nil {
			t.Fatalf("producing a %d-byte input: %v", len(v), err)
		}
	}
	cfg := paritySum(t, e.env)
	m := metrics.New(prometheus.NewRegistry(), cfg.Name)
	r := startWith(t, cfg, WithMetrics(m))
	if rep := e.awaitFinal(10, r); !rep.Exact() {
		t.Fatalf("the ten numbers: %v", rep)
	}

	var dls []*kgo.Record
	for {
		dls = dls[:0]
		if err := kread.All(ctx, e.conn, cfg.Sinks[0].DeadLetterTopic, func(r *kgo.Record) error {
			dls = append(dls, r)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if len(dls) >= 2 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%d dead letters, want 2", len(dls))
		case <-time.After(200 * time.Millisecond):
		}
	}
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	if len(dls) != 2 {
		t.Fatalf("%d dead letters, want one per large record", len(dls))
	}
	var whole, cut *kgo.Record
	for _, dl := range dls {
		if sink.Header(dl, sink.HeaderCode) != "decode" {
			t.Errorf("dead letter of %d bytes: code %q", len(dl.Value), sink.Header(dl, sink.HeaderCode))
		}
		if len(dl.Value) > 0 && dl.Value[0] == 'x' {
			whole = dl
		} else {
			cut = dl
		}
	}
	if whole == nil || !bytes.Equal(whole.Value, exact) || sink.Header(whole, sink.HeaderTruncated) != "" {
		t.Errorf("the 1,000,000-byte record's dead letter is not whole: %d bytes, headers %v", len(whole.Value), whole.Headers)
	}
	if cut == nil || sink.Header(cut, sink.HeaderTruncated) != "1048400" || len(cut.Value) >= len(edge) ||
		!bytes.Equal(cut.Value, edge[:len(cut.Value)]) {
		t.Errorf("the 1,048,400-byte record's dead letter is not a cut copy: %d bytes, headers %v", len(cut.Value), cut.Headers)
	}
	text := metricstest.Scrape(t, m.Handler())
	if v, _ := metricstest.Value(text, fmt.Sprintf(`pipeline_dead_letter_truncated_total{pipeline=%q}`, cfg.Name)); v != 1 {
		t.Errorf("pipeline_dead_letter_truncated_total = %v, want 1", v)
	}
}

// An output record larger than its topic accepts goes to the sink's
// dead-letter topic (code too_large, the topic it was for in a header)
// instead of failing every attempt at its epoch; the other outputs are
// written.
func TestOutputTooLargeForItsTopicIsDeadLettered(t *testing.T) {
	e := newTestEnv(t, "exactly_once")
	maxBytes := "2048"
	kafkatest.CreateTopic(t, e.brokers, e.env["OUTPUT_TOPIC"], 1, map[string]*string{"max.message.bytes": &maxBytes})
	e.numbers(1, 5)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	p := kafkatest.Client(t, e.brokers, kgo.DefaultProduceTopic(e.env["INPUT_TOPIC"]))
	// Random hex: compression cannot bring it under the limit.
	pad := make([]byte, 2000)
	_, _ = rand.Read(pad)
	big := fmt.Sprintf(`{"n":6,"pad":%q}`, hex.EncodeToString(pad))
	if err := p.ProduceSync(ctx, kgo.StringRecord(big)).FirstErr(); err != nil {
		t.Fatal(err)
	}
	yaml := fmt.Sprintf(`
name: %s
kafka: {brokers: %s}
checkpoint: {interval: 100ms}
admin: {listen: "off"}
sources: [{topics: %s}]
steps:
  - filter: n > 0
sinks: [{topic: %s}]
`, e.env["JOB_NAME"], e.env["KAFKA_BROKERS"], e.env["INPUT_TOPIC"], e.env["OUTPUT_TOPIC"])
	cfg := parseConfig(t, []byte(yaml), nil)
	r := start(t, cfg)
	var outs, dls []*kgo.Record
	read := func(topic string, into *[]*kgo.Record) {
		*into = (*into)[:0]
		if err := kread.All(ctx, e.conn, topic, func(r *kgo.Record) error {
			*into = append(*into, r)
			return nil
		}); err != nil && !errors.Is(err, kerr.UnknownTopicOrPartition) { // the job creates it
			t.Fatal(err)
		}
	}
	for len(outs) < 5 || len(dls) < 1 {
		select {
		case <-ctx.Done():
			t.Fatalf("%d outputs (want 5), %d dead letters (want 1)", len(outs), len(dls))
		case <-time.After(200 * time.Millisecond):
		}
		read(e.env["OUTPUT_TOPIC"], &outs)
		read(cfg.Sinks[0].DeadLetterTopic, &dls)
	}
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	if len(outs) != 5 || len(dls) != 1 {
		t.Fatalf("%d outputs (want 5), %d dead letters (want 1)", len(outs), len(dls))
	}
	dl := dls[0]
	if sink.Header(dl, sink.HeaderCode) != sink.CodeTooLarge || sink.Header(dl, sink.HeaderOutputTopic) != e.env["OUTPUT_TOPIC"] ||
		!bytes.Contains(dl.Value, []byte(`"n":6`)) || len(dl.Value) < 4000 {
		t.Errorf("dead letter of %d bytes, headers %v", len(dl.Value), dl.Headers)
	}
}
