package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/internal/kread"
	"github.com/eoflow/pipeline/internal/testkit/kafkatest"
)

// intervalConfig is the interval join example: payments matched with the
// orders of the hour before them.
const intervalConfig = "../../examples/interval-join/config.yaml"

// The interval join's inputs: order i at event time i minutes after
// intervalT0, and payment p<i> for it intervalDelay(i) later, so the
// oracle is the input's alone: payment i pairs with order i exactly when
// the delay is within [0, 1h].
var intervalT0 = time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC).UnixMilli()

func intervalDelay(i int64) time.Duration {
	return []time.Duration{-10 * time.Minute, 10 * time.Minute, time.Hour, 50 * time.Minute, 70 * time.Minute}[i%5]
}

// The interval join example exactly once under SIGKILL (one process):
// orders on two partitions and payments on four, each partition's event
// times out of order by up to 80 minutes (within max_out_of_orderness:
// nothing is late), while the process is killed at every fault point and
// at random and restarted each time. Records far ahead on every partition
// then move the watermark past every payment, and an independent
// read_committed reader finds one result per payment: the payment with
// its order when the order is within the hour before it (both bounds
// included), with null otherwise, and nothing else.
func TestIntervalJoinExactUnderSIGKILL(t *testing.T) {
	j := newJob(t, "exactly_once")
	j.config = intervalConfig
	k := kafkatest.Broker(t)
	orders := j.env["JOB_NAME"] + "-orders"
	j.env["PAYMENTS_TOPIC"] = j.env["INPUT_TOPIC"] // 4 partitions
	j.env["ORDERS_TOPIC"] = orders
	j.env["LATE_TOPIC"] = j.env["JOB_NAME"] + "-late"
	j.env["MAX_OOO"] = "2h"
	kafkatest.CreateTopic(t, k.Bootstrap(), orders, 2, nil)
	cl, err := kgo.NewClient(append(append([]kgo.Opt(nil), j.conn...), kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	produce := func(recs ...*kgo.Record) {
		t.Helper()
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	order := func(id, ts int64, p int32) *kgo.Record {
		return &kgo.Record{Topic: orders, Partition: p, Value: fmt.Appendf(nil, `{"id":%d,"total":%d,"ts":%d}`, id, id%97, ts)}
	}
	payment := func(id, ts int64, p int32) *kgo.Record {
		return &kgo.Record{Topic: j.env["PAYMENTS_TOPIC"], Partition: p, Value: fmt.Appendf(nil, `{"id":"p%d","order_id":%d,"ts":%d}`, id, id, ts)}
	}

	seed := uint64(envInt(t, "CRASH_SEED", time.Now().UnixNano()))
	t.Logf("seed %d (CRASH_SEED=%d replays it)", seed, seed)
	var written int64
	crashLoop(t, j, func() {
		var recs []*kgo.Record
		for range 50 {
			written++
			at := intervalT0 + written*time.Minute.Milliseconds()
			recs = append(recs, order(written, at, int32(written%2)), payment(written, at+intervalDelay(written).Milliseconds(), int32(written%4)))
		}
		produce(recs...)
		time.Sleep(50 * time.Millisecond)
	}, 2, rand.New(rand.NewPCG(seed, 0)))
	j.start()
	// Far ahead on every partition: the watermark passes every payment
	// (their own results never close: their order ids, negative, are
	// none of the oracle's).
	far := intervalT0 + (written+1000)*time.Minute.Milliseconds()
	produce(order(-1, far, 0), order(-1, far, 1))
	for p := range int32(4) {
		produce(payment(-2, far, p))
	}

	deadline := time.Now().Add(2 * time.Minute)
	for {
		got := map[string][]json.RawMessage{} // payment id -> the order of each result
		err := kread.All(ctx, j.conn, j.env["OUTPUT_TOPIC"], func(r *kgo.Record) error {
			var o struct {
				ID      string          `json:"id"`
				OrderID int64           `json:"order_id"`
				Order   json.RawMessage `json:"order"`
			}
			if err := json.Unmarshal(r.Value, &o); err != nil {
				return fmt.Errorf("output %s: %w", r.Value, err)
			}
			if want := fmt.Sprint(o.OrderID); string(r.Key) != want {
				return fmt.Errorf("output %s: key %q, want the order id %s", r.Value, r.Key, want)
			}
			got[o.ID] = append(got[o.ID], o.Order)
			return nil
		})
		if err != nil && !errors.Is(err, kerr.UnknownTopicOrPartition) {
			t.Fatal(err)
		}
		wrong := 0
		for id, orders := range got {
			var i int64
			if _, err := fmt.Sscanf(id, "p%d", &i); err != nil || i < 1 || i > written {
				t.Fatalf("seed %d: result for payment %q, which was never written", seed, id)
			}
			if len(orders) > 1 {
				t.Fatalf("seed %d: payment %s has %d results: %s", seed, id, len(orders), orders)
			}
			want := "null"
			if d := intervalDelay(i); d >= 0 && d <= time.Hour {
				want = fmt.Sprintf(`{"id":%d,"total":%d,"ts":%d}`, i, i%97, intervalT0+i*time.Minute.Milliseconds())
			}
			if string(orders[0]) != want {
				wrong++
				t.Errorf("seed %d: payment %s matched %s, want %s", seed, id, orders[0], want)
			}
		}
		if wrong > 0 {
			t.FailNow()
		}
		if int64(len(got)) == written {
			t.Logf("%d payments, %d starts: each with its one result", written, j.started)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("seed %d: after %d starts, %d of %d payments have their result", seed, j.started, len(got), written)
		}
		time.Sleep(250 * time.Millisecond)
	}
	late := 0
	if err := kread.All(ctx, j.conn, j.env["LATE_TOPIC"], func(*kgo.Record) error { late++; return nil }); err != nil && !errors.Is(err, kerr.UnknownTopicOrPartition) {
		t.Fatal(err)
	}
	if late != 0 {
		t.Errorf("%d late records: nothing was behind max_out_of_orderness", late)
	}
	j.terminate()
}
