package cli

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/internal/testkit/kafkatest"
)

func TestMain(m *testing.M) { kafkatest.Main(m) }

// jobOn is a job file whose kafka settings point at brokers.
func jobOn(t *testing.T, brokers []string) string {
	t.Helper()
	return writeFile(t, fmt.Sprintf(`name: topics-test
kafka:
  brokers: [%s]
sources:
  - topics: [in]
sinks:
  - topic: out
`, strings.Join(brokers, ", ")))
}

// pipeline topics create, list and describe against a real broker, with
// the connection taken from the job's file.
func TestTopicsCreateListDescribe(t *testing.T) {
	k := kafkatest.Broker(t)
	job := jobOn(t, k.Bootstrap())
	topic := kafkatest.Topic(t, "numbers")

	code, out, errOut := runCLI("topics", "create", "-c", job, topic, "--partitions", "3", "--replication-factor", "1", "--config", "retention.ms=3600000")
	if want := fmt.Sprintf("created topic %s: 3 partitions, replication factor 1\n", topic); code != 0 || out != want {
		t.Fatalf("create: exit %d, stdout %q (want %q), stderr %q", code, out, want, errOut)
	}

	// Two records into partition 1, so its end offset is 2.
	cl := kafkatest.Client(t, k.Bootstrap(), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for range 2 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: 1, Value: []byte(`{"n":1}`)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}

	code, out, errOut = runCLI("topics", "list", "-c", job)
	if code != 0 || !regexp.MustCompile(`(?m)^`+regexp.QuoteMeta(topic)+` +3 +1$`).MatchString(out) {
		t.Fatalf("list: exit %d, stderr %q, stdout:\n%s", code, errOut, out)
	}

	code, out, errOut = runCLI("topics", "describe", "-c", job, topic)
	if code != 0 {
		t.Fatalf("describe: exit %d, stderr %q", code, errOut)
	}
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^topic ` + regexp.QuoteMeta(topic) + `: 3 partitions, replication factor 1$`),
		regexp.MustCompile(`(?m)^  0 +\d+ +\d+ +\d+ +0 +0$`),
		regexp.MustCompile(`(?m)^  1 +\d+ +\d+ +\d+ +0 +2$`),
		regexp.MustCompile(`(?m)^  2 +\d+ +\d+ +\d+ +0 +0$`),
		regexp.MustCompile(`(?m)^    retention\.ms=3600000$`),
	} {
		if !want.MatchString(out) {
			t.Errorf("describe: no line matching %s in:\n%s", want, out)
		}
	}
	if strings.Contains(out, "cleanup.policy") {
		t.Errorf("describe shows a config the topic does not set:\n%s", out)
	}

	// Creating it again fails, unless asked not to.
	if code, _, errOut := runCLI("topics", "create", "-c", job, topic); code != 1 || !strings.Contains(errOut, "TOPIC_ALREADY_EXISTS") {
		t.Errorf("create again: exit %d, stderr %q", code, errOut)
	}
	if code, out, errOut := runCLI("topics", "create", "-c", job, topic, "--if-not-exists"); code != 0 || !strings.Contains(out, "exists already") {
		t.Errorf("create --if-not-exists: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	// More replicas than brokers: the broker's reason is shown.
	other := kafkatest.Topic(t, "replicated")
	if code, _, errOut := runCLI("topics", "create", "-c", job, other, "--replication-factor", "3"); code != 1 || !strings.Contains(errOut, "INVALID_REPLICATION_FACTOR") || !strings.Contains(errOut, "broker(s)") {
		t.Errorf("create with 3 replicas on 1 broker: exit %d, stderr %q", code, errOut)
	}
	if code, _, errOut := runCLI("topics", "describe", "-c", job, other); code != 1 || !strings.Contains(errOut, "UNKNOWN_TOPIC_OR_PARTITION") {
		t.Errorf("describe a missing topic: exit %d, stderr %q", code, errOut)
	}
}

func TestTopicsUsage(t *testing.T) {
	tests := []struct {
		args []string
		msg  string
	}{
		{[]string{"topics"}, "usage"},
		{[]string{"topics", "delete", "x"}, `unknown command "delete"`},
		{[]string{"topics", "create"}, "want one topic NAME"},
		{[]string{"topics", "create", "a", "b"}, "want one topic NAME"},
		{[]string{"topics", "create", "a", "--partitions", "0"}, "at least 1"},
		{[]string{"topics", "create", "a", "--config", "retention.ms"}, "want KEY=VALUE"},
		{[]string{"topics", "describe"}, "name at least one topic"},
		{[]string{"topics", "list", "x"}, `unexpected argument "x"`},
	}
	for _, tt := range tests {
		code, _, errOut := runCLI(tt.args...)
		if code != 2 || !strings.Contains(errOut, tt.msg) {
			t.Errorf("%v: exit %d, stderr %q; want 2 with %q", tt.args, code, errOut, tt.msg)
		}
	}
}

// From a directory without config.yaml, the topics commands connect to
// $KAFKA_BROKERS (else 127.0.0.1:9092), or to --brokers; a file named with
// -c must exist.
func TestTopicsWithoutAJobFile(t *testing.T) {
	k := kafkatest.Broker(t)
	topic := kafkatest.Topic(t, "nofile")
	t.Chdir(t.TempDir())
	t.Setenv("KAFKA_BROKERS", strings.Join(k.Bootstrap(), ","))

	if code, out, errOut := runCLI("topics", "create", topic, "--partitions", "2"); code != 0 || !strings.Contains(out, "created topic "+topic) {
		t.Fatalf("create with $KAFKA_BROKERS: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if code, out, errOut := runCLI("topics", "list"); code != 0 || !strings.Contains(out, topic) {
		t.Fatalf("list with $KAFKA_BROKERS: exit %d, stdout %q, stderr %q", code, out, errOut)
	}

	// --brokers wins over the environment (here pointing nowhere).
	t.Setenv("KAFKA_BROKERS", "127.0.0.1:1")
	if code, out, errOut := runCLI("topics", "describe", topic, "--brokers", strings.Join(k.Bootstrap(), ",")); code != 0 || !strings.Contains(out, "topic "+topic+": 2 partitions") {
		t.Fatalf("describe --brokers: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	// A file asked for by name is not replaced by the fallback.
	if code, _, errOut := runCLI("topics", "list", "-c", "missing.yaml", "--brokers", strings.Join(k.Bootstrap(), ",")); code != 1 || !strings.Contains(errOut, "missing.yaml") {
		t.Fatalf("list -c missing.yaml: exit %d, stderr %q", code, errOut)
	}
}
