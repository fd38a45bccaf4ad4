package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/eoflow/pipeline/config"
	"github.com/eoflow/pipeline/internal/testkit/kafkatest"
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

// Processes of one job start together and each creates the topics it
// found missing: the slower one's create is answered TOPIC_ALREADY_EXISTS.
// That is success, for every topic the job creates: outputs, dead
// letters, the late topic, and group mode's repartition and state topics.
// (Every first start of a group logged an ERROR and restarted on it.) The
// fake cluster lists the sink topics as missing and answers each create
// as the broker does when another process was first; the internal topics
// exist already, as they do for the second process.
func TestCreatingATopicThatNowExistsIsSuccess(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(4, "job-repartition", "job-group-state"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var mu sync.Mutex
	var raced []string
	c.ControlKey(int16(kmsg.CreateTopics), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		creq := req.(*kmsg.CreateTopicsRequest)
		resp := creq.ResponseKind().(*kmsg.CreateTopicsResponse)
		for _, rt := range creq.Topics {
			st := kmsg.NewCreateTopicsResponseTopic()
			st.Topic, st.ErrorCode = rt.Topic, kerr.TopicAlreadyExists.Code
			resp.Topics = append(resp.Topics, st)
			mu.Lock()
			raced = append(raced, rt.Topic)
			mu.Unlock()
		}
		return resp, nil, true
	})
	env := map[string]string{
		"KAFKA_BROKERS": strings.Join(c.ListenAddrs(), ","), "JOB_NAME": "job", "INPUT_TOPIC": "in", "OUTPUT_TOPIC": "out",
		"LATE_TOPIC": "late", "ADMIN_LISTEN": "off", "SCALE_MODE": "group", "SCALE_PARTITIONS": "4",
	}
	windows, err := os.ReadFile("../examples/parity-windows/config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	group := paritySum(t, env)
	delete(env, "SCALE_MODE")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	adm := kadm.NewClient(kafkatest.Client(t, c.ListenAddrs()))
	for _, cfg := range []*config.Config{group, parseConfig(t, windows, env)} {
		j, err := New(cfg, slog.New(slog.DiscardHandler), WithInstanceID("a"))
		if err != nil {
			t.Fatal(err)
		}
		if err := j.ensureSinkTopics(ctx, adm); err != nil {
			t.Fatalf("%s: a sink topic created meanwhile by another process: %v", cfg.Name, err)
		}
		if j.shuffle != nil {
			if err := ensureShuffleTopics(ctx, adm, j.shuffle, true, j.groupTopics(), -1); err != nil {
				t.Fatalf("internal topics created meanwhile by another process: %v", err)
			}
		}
	}
	slices.Sort(raced)
	if want := []string{"job-dead-letter", "job-dead-letter", "job-group-state", "job-repartition", "late", "out", "out"}; !slices.Equal(raced, want) {
		t.Fatalf("creates answered TOPIC_ALREADY_EXISTS: %v, want %v", raced, want)
	}
}

// The first assignment of a new job's first process comes before its
// first attempt creates the checkpoint topic: reading the instances to
// fence finds no topic, which is no warning (every first start logged
// UNKNOWN_TOPIC_OR_PARTITION at WARN).
func TestNoCheckpointTopicYetIsNoWarning(t *testing.T) {
	var logs syncBuffer
	m := &membership{
		instance: "a", log: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		known: func(context.Context) ([]string, error) {
			return nil, fmt.Errorf("last stable offset of job-checkpoints/-1: %w", kerr.UnknownTopicOrPartition)
		},
	}
	if unseen := m.unseen(context.Background(), nil); len(unseen) != 0 {
		t.Fatalf("unseen = %v", unseen)
	}
	if strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "level=DEBUG") {
		t.Fatalf("logs:\n%s", logs.String())
	}
}

// The record size limits are read right after the job's topics are
// created, when a new topic is still unknown to the brokers' configs for
// a moment: the job asks again rather than warning on every first start.
func TestLimitsOfAJustCreatedTopicAreNoWarning(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "out", "job-dead-letter", "job-checkpoints", "job-state"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var unknown atomic.Int32
	c.ControlKey(int16(kmsg.DescribeConfigs), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		dreq := req.(*kmsg.DescribeConfigsRequest)
		if len(dreq.Resources) == 0 || dreq.Resources[0].ResourceType != kmsg.ConfigResourceTypeTopic || unknown.Add(1) > 2 {
			return nil, nil, false
		}
		resp := dreq.ResponseKind().(*kmsg.DescribeConfigsResponse)
		for _, r := range dreq.Resources {
			rr := kmsg.NewDescribeConfigsResponseResource()
			rr.ResourceType, rr.ResourceName, rr.ErrorCode = r.ResourceType, r.ResourceName, kerr.UnknownTopicOrPartition.Code
			resp.Resources = append(resp.Resources, rr)
		}
		return resp, nil, true
	})
	env := map[string]string{"KAFKA_BROKERS": strings.Join(c.ListenAddrs(), ","), "JOB_NAME": "job", "INPUT_TOPIC": "in", "OUTPUT_TOPIC": "out", "ADMIN_LISTEN": "off"}
	j, logs := newJob(t, paritySum(t, env))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	limits := j.describeLimits(ctx, kadm.NewClient(kafkatest.Client(t, c.ListenAddrs())))
	if unknown.Load() < 3 {
		t.Fatalf("the topics' configs were asked for %d times, want the 2 unknown answers and one more", unknown.Load())
	}
	if strings.Contains(logs.String(), "level=WARN") {
		t.Fatalf("a warning for topics just created:\n%s", logs.String())
	}
	if limits.Batch("out") <= 0 {
		t.Fatalf("no limit for the output topic: %d", limits.Batch("out"))
	}
}
