package runtime

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/eoflow/pipeline/internal/kafkatest"
)

// The topics the job creates for its sink get sinks[].partitions and
// sinks[].replication_factor; the dead-letter topic gets the replication
// factor and the brokers' partition count.
func TestSinkTopicsAreCreatedAsConfigured(t *testing.T) {
	e := newTestEnv(t, "exactly_once")
	e.numbers(1, 100)
	cfg := paritySum(t, e.env)
	cfg.Sinks[0].Partitions = 3
	cfg.Sinks[0].ReplicationFactor = 1
	r := start(t, cfg)
	e.awaitFinal(100, r)
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	adm := kadm.NewClient(kafkatest.Client(t, e.brokers))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	topics, err := adm.ListTopics(ctx, cfg.Sinks[0].Topic, cfg.Sinks[0].DeadLetterTopic)
	if err != nil {
		t.Fatal(err)
	}
	out, dlq := topics[cfg.Sinks[0].Topic], topics[cfg.Sinks[0].DeadLetterTopic]
	if len(out.Partitions) != 3 || out.Partitions.NumReplicas() != 1 {
		t.Errorf("output topic: %d partitions, replication %d; want 3 and 1", len(out.Partitions), out.Partitions.NumReplicas())
	}
	if len(dlq.Partitions) != 1 || dlq.Partitions.NumReplicas() != 1 {
		t.Errorf("dead-letter topic: %d partitions, replication %d; want the broker's default 1, and 1", len(dlq.Partitions), dlq.Partitions.NumReplicas())
	}
}

// A replication factor above the cluster's broker count stops the job at
// start with the field and the count in the message, and creates nothing.
func TestSinkReplicationAboveBrokersIsRefused(t *testing.T) {
	// Every guarantee goes through the one restart loop, at_most_once too:
	// it used to restart on this forever.
	for _, g := range []string{"exactly_once", "at_most_once"} {
		t.Run(g, func(t *testing.T) { sinkReplicationAboveBrokersIsRefused(t, g) })
	}
}

func sinkReplicationAboveBrokersIsRefused(t *testing.T, guarantee string) {
	e := newTestEnv(t, guarantee)
	cfg := paritySum(t, e.env)
	cfg.Sinks[0].ReplicationFactor = 3
	r := start(t, cfg)
	select {
	case err := <-r.done:
		msg := fmt.Sprint(err)
		if !errors.Is(err, ErrUnfit) || !strings.Contains(msg, "sinks[0].replication_factor is 3 but the cluster has 1 broker(s)") {
			t.Fatalf("Run = %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the job did not stop")
	}
	adm := kadm.NewClient(kafkatest.Client(t, e.brokers))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	topics, err := adm.ListTopics(ctx, cfg.Sinks[0].Topic, cfg.Sinks[0].DeadLetterTopic)
	if err != nil {
		t.Fatal(err)
	}
	if topics.Has(cfg.Sinks[0].Topic) || topics.Has(cfg.Sinks[0].DeadLetterTopic) {
		t.Fatalf("topics were created: %v", topics.Names())
	}
}
