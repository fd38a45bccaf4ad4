package kafkatest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Kafka is a broker (or cluster) a test can use.
type Kafka struct {
	// Source says where it came from: "KAFKA_BOOTSTRAP", "local jars" or
	// "testcontainers".
	Source  string
	brokers []string
}

// Bootstrap returns the seed brokers, host:port.
func (k *Kafka) Bootstrap() []string { return append([]string(nil), k.brokers...) }

// shared is the package's one broker, started on first use and stopped by
// Main. Tests of one package share it; tests isolate themselves by topic
// name (see Topic).
var shared struct {
	sync.Mutex
	mainUsed bool
	started  bool
	kafka    *Kafka
	err      error
	stop     func() error
	logs     string // directory kept for a failed run
}

// Main runs the package's tests and stops the shared broker afterwards,
// keeping its logs when a test failed. Packages whose tests call Broker must
// call it from TestMain:
//
//	func TestMain(m *testing.M) { kafkatest.Main(m) }
func Main(m *testing.M) {
	shared.Lock()
	shared.mainUsed = true
	shared.Unlock()
	code := m.Run()
	shared.Lock()
	if shared.stop != nil {
		if err := shared.stop(); err != nil {
			fmt.Fprintf(os.Stderr, "kafkatest: stopping broker: %v\n", err)
		}
	}
	if shared.logs != "" {
		if code != 0 {
			fmt.Fprintf(os.Stderr, "kafkatest: broker logs kept in %s\n", shared.logs)
		} else {
			_ = os.RemoveAll(shared.logs)
		}
	}
	shared.Unlock()
	os.Exit(code)
}

// Broker returns the package's shared broker, starting it on first use
// (see the package doc for where it comes from). Under -short it skips the
// test; when no broker can be had it fails the test with instructions.
func Broker(t testing.TB) *Kafka {
	t.Helper()
	if testing.Short() {
		t.Skip("needs a Kafka broker; skipped under -short")
	}
	shared.Lock()
	defer shared.Unlock()
	if !shared.mainUsed {
		t.Fatal("kafkatest: call kafkatest.Main(m) from this package's TestMain, so the shared broker is stopped at the end")
	}
	if !shared.started {
		shared.started = true
		shared.kafka, shared.stop, shared.logs, shared.err = startShared()
	}
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	return shared.kafka
}

func startShared() (k *Kafka, stop func() error, logs string, err error) {
	if env := os.Getenv("KAFKA_BOOTSTRAP"); env != "" {
		return &Kafka{Source: "KAFKA_BOOTSTRAP", brokers: splitList(env)}, nil, "", nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir, err := os.MkdirTemp("", "kafkatest-")
	if err != nil {
		return nil, nil, "", err
	}
	c, localErr := Start(ctx, Options{Nodes: 1, Dir: dir})
	if localErr == nil {
		return &Kafka{Source: "local jars", brokers: c.Bootstrap()}, c.Close, dir, nil
	}
	addrs, terminate, dockerErr := startContainer(ctx)
	if dockerErr == nil {
		return &Kafka{Source: "testcontainers", brokers: addrs}, terminate, dir, nil
	}
	return nil, nil, dir, noBrokerError(localErr, dockerErr)
}

func noBrokerError(localErr, dockerErr error) error {
	return fmt.Errorf(`no Kafka broker for this test. Any one of these gives one:
  - KAFKA_BOOTSTRAP=host:port pointing at a running cluster (e.g. after 'make kafka-up'),
  - Java 17+ and Maven on PATH, to run Apache Kafka %s from Maven Central jars,
  - a running Docker engine, for the apache/kafka image.
local jars: %v
docker: %v`, KafkaVersion, localErr, dockerErr)
}

// StartCluster starts a cluster of its own for one test (fault tests stop and
// restart its brokers); it is stopped when the test ends, and its logs are
// kept if the test failed.
func StartCluster(t testing.TB, nodes int) *Cluster {
	t.Helper()
	return StartClusterWith(t, Options{Nodes: nodes})
}

// StartClusterWith is StartCluster with more options (e.g. SASL); Dir is
// chosen here.
func StartClusterWith(t testing.TB, opts Options) *Cluster {
	t.Helper()
	nodes := max(opts.Nodes, 1)
	if testing.Short() {
		t.Skip("needs a Kafka cluster; skipped under -short")
	}
	dir, err := os.MkdirTemp("", "kafkatest-cluster-")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	opts.Dir = dir
	c, err := Start(ctx, opts)
	if err != nil {
		t.Fatalf("starting a %d-node Kafka cluster from local jars (Java 17+ and Maven needed; logs in %s): %v", nodes, dir, err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("stopping cluster: %v", err)
		}
		if t.Failed() {
			t.Logf("kafka cluster logs kept in %s", dir)
			return
		}
		_ = os.RemoveAll(dir)
	})
	return c
}

// Client returns a client for the given brokers, closed when the test ends.
func Client(t testing.TB, brokers []string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(brokers...)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// AwaitSettled waits until no transaction is open on any partition of
// topic and every decided one has its markers: the last stable offset is
// the high watermark. A committed transaction's EndTxn returns before its
// markers are written, and a read_committed reader (kread.All) reads only
// up to the last stable offset: a test that reads what it just committed
// through another client waits here first.
func AwaitSettled(ctx context.Context, t testing.TB, brokers []string, topic string) {
	t.Helper()
	adm := kadm.NewClient(Client(t, brokers))
	for {
		ends, err1 := adm.ListEndOffsets(ctx, topic)
		stable, err2 := adm.ListCommittedOffsets(ctx, topic)
		settled := err1 == nil && err2 == nil
		if settled {
			ends.Each(func(e kadm.ListedOffset) {
				if s, ok := stable.Lookup(topic, e.Partition); !ok || s.Offset < e.Offset {
					settled = false
				}
			})
		}
		if settled {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("topic %s did not settle: %v %v", topic, err1, err2)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// ReadUntil reads topic from the start with the given isolation level until
// a record whose value is last, and returns every value seen, in order. A
// fetch error or the end of ctx fails the test.
func ReadUntil(ctx context.Context, t testing.TB, brokers []string, topic string, iso kgo.IsolationLevel, last string) []string {
	t.Helper()
	cl := Client(t, brokers,
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(iso),
	)
	var seen []string
	for {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("reading %s: %v (seen so far %v)", topic, err, seen)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("fetch: %v", err) })
		done := false
		fs.EachRecord(func(r *kgo.Record) {
			seen = append(seen, string(r.Value))
			done = done || string(r.Value) == last
		})
		if done {
			return seen
		}
	}
}

var unsafeTopicChars = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// Topic returns a topic name unique to this test and run, so tests sharing
// a broker never see each other's records.
func Topic(t testing.TB, suffix string) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := unsafeTopicChars.ReplaceAllString(t.Name(), "_")
	if len(name) > 150 {
		name = name[:150]
	}
	return fmt.Sprintf("%s-%s-%s", name, suffix, hex.EncodeToString(b[:]))
}

// CreateTopic creates a topic with the brokers' default replication and
// waits until its leaders are known, so the test can produce at once.
func CreateTopic(t testing.TB, brokers []string, topic string, partitions int32, configs map[string]*string) {
	t.Helper()
	adm := kadm.NewClient(Client(t, brokers))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	resp, err := adm.CreateTopic(ctx, partitions, -1, configs, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
	for {
		md, err := adm.Metadata(ctx, topic)
		if err == nil {
			td, ok := md.Topics[topic]
			if ok && td.Err == nil && len(td.Partitions) == int(partitions) && allLeaders(td) {
				return
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("topic %s has no leaders after a minute", topic)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func allLeaders(td kadm.TopicDetail) bool {
	for _, p := range td.Partitions {
		if p.Err != nil || p.Leader < 0 {
			return false
		}
	}
	return true
}

func splitList(s string) []string {
	var out []string
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}

var errNoDocker = errors.New("no Docker engine answers")
