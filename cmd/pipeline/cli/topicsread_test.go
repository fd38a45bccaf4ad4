package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/internal/testkit/kafkatest"
)

// pipeline topics read against a real broker: committed records only by
// default, exit at the end offsets as of the start although the log ends
// in transaction markers and an aborted transaction, --count, json with
// headers, and records written after the start without --from-beginning.
func TestTopicsRead(t *testing.T) {
	k := kafkatest.Broker(t)
	brokers := strings.Join(k.Bootstrap(), ",")
	topic := kafkatest.Topic(t, "read")
	kafkatest.CreateTopic(t, k.Bootstrap(), topic, 2, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	plain := kafkatest.Client(t, k.Bootstrap(), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produce := func(cl *kgo.Client, r *kgo.Record) {
		t.Helper()
		r.Topic = topic
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	produce(plain, &kgo.Record{Partition: 0, Key: []byte("a"), Value: []byte(`{"n":1}`), Headers: []kgo.RecordHeader{{Key: "h", Value: []byte("v")}}})
	produce(plain, &kgo.Record{Partition: 1, Key: []byte("bin"), Value: []byte{0xff, 0x00}})
	txn := kafkatest.Client(t, k.Bootstrap(), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.TransactionalID(topic+"-txn"))
	for _, tc := range []struct {
		rec    *kgo.Record
		commit kgo.TransactionEndTry
	}{
		{&kgo.Record{Partition: 1, Key: []byte("b"), Value: []byte("2")}, kgo.TryCommit},
		{&kgo.Record{Partition: 0, Key: []byte("x"), Value: []byte("aborted")}, kgo.TryAbort},
	} {
		if err := txn.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		produce(txn, tc.rec)
		if err := txn.EndTransaction(ctx, tc.commit); err != nil {
			t.Fatal(err)
		}
	}

	lines := func(out string) []string {
		l := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
		slices.Sort(l)
		return l
	}
	code, out, errOut := runCLI("topics", "read", topic, "--brokers", brokers, "--from-beginning")
	if want := []string{"a\t{\"n\":1}", "b\t2", "bin\t\xff\x00"}; code != 0 || !slices.Equal(lines(out), want) {
		t.Fatalf("read --from-beginning: exit %d, stderr %q, lines %q, want %q", code, errOut, lines(out), want)
	}
	if !strings.Contains(errOut, "3 records of "+topic+" (committed records only)") {
		t.Errorf("read --from-beginning: stderr %q", errOut)
	}
	code, out, errOut = runCLI("topics", "read", topic, "--brokers", brokers, "--from-beginning", "--committed=false")
	if want := []string{"a\t{\"n\":1}", "b\t2", "bin\t\xff\x00", "x\taborted"}; code != 0 || !slices.Equal(lines(out), want) {
		t.Fatalf("read --committed=false: exit %d, stderr %q, lines %q, want %q", code, errOut, lines(out), want)
	}
	code, out, errOut = runCLI("topics", "read", topic, "--brokers", brokers, "--from-beginning", "--count", "2")
	if code != 0 || len(lines(out)) != 2 {
		t.Fatalf("read --count 2: exit %d, stderr %q, stdout %q", code, errOut, out)
	}

	code, out, errOut = runCLI("topics", "read", topic, "--brokers", brokers, "--from-beginning", "--format", "json")
	if code != 0 {
		t.Fatalf("read --format json: exit %d, stderr %q", code, errOut)
	}
	byKey := map[string]map[string]any{}
	for _, line := range lines(out) {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("not a JSON line: %q: %v", line, err)
		}
		byKey[rec["key"].(string)] = rec
	}
	a, bin := byKey["a"], byKey["bin"]
	if a == nil || a["value"] != `{"n":1}` || a["partition"] != 0.0 || a["offset"] != 0.0 || a["topic"] != topic {
		t.Errorf("json record a: %v", a)
	}
	if h, _ := json.Marshal(a["headers"]); string(h) != `[{"key":"h","value":"v"}]` {
		t.Errorf("json record a's headers: %s", h)
	}
	if _, err := time.Parse(time.RFC3339Nano, a["timestamp"].(string)); err != nil {
		t.Errorf("json record a's timestamp: %v", err)
	}
	if v, _ := json.Marshal(bin["value"]); string(v) != `{"base64":"/wA="}` {
		t.Errorf("json record bin's value: %s", v)
	}

	// Without --from-beginning: only what is written after the start.
	// Written until the reader has one, so when it starts does not matter.
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			case <-time.After(50 * time.Millisecond):
			}
			if err := plain.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: 1, Key: []byte("new"), Value: []byte("3")}).FirstErr(); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	code, out, errOut = runCLI("topics", "read", topic, "--brokers", brokers, "--count", "1")
	close(done)
	wg.Wait()
	if code != 0 || out != "new\t3\n" {
		t.Fatalf("read --count 1 of new records: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

func TestTopicsReadUsage(t *testing.T) {
	for _, tt := range []struct {
		args []string
		msg  string
	}{
		{[]string{"topics", "read"}, "want one TOPIC"},
		{[]string{"topics", "read", "a", "b"}, "want one TOPIC"},
		{[]string{"topics", "read", "a", "--format", "yaml"}, "want json or text"},
		{[]string{"topics", "read", "a", "--count", "-1"}, "at least 0"},
	} {
		code, _, errOut := runCLI(tt.args...)
		if code != 2 || !strings.Contains(errOut, tt.msg) {
			t.Errorf("%v: exit %d, stderr %q; want 2 with %q", tt.args, code, errOut, tt.msg)
		}
	}
}

// The docs read results with `pipeline topics read`; a kcat line kept as
// the alternative reads committed records and exits at the end (-e), as
// a user copying it expects.
func TestDocsReadResultsWithAnEnd(t *testing.T) {
	docs := []string{"../../../README.md", "../../../bench/README.md"}
	for _, pattern := range []string{"../../../docs/*.md", "../../../examples/*/README.md", "../../../examples/*/config.yaml"} {
		more, err := filepath.Glob(pattern)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, more...)
	}
	sawRead := false
	for _, doc := range docs {
		data, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(data), "\n") {
			sawRead = sawRead || strings.Contains(line, "pipeline topics read ")
			if !strings.Contains(line, "kcat -b") {
				continue
			}
			if !strings.Contains(line, " -e") || !strings.Contains(line, "isolation.level=read_committed") {
				t.Errorf("%s:%d: a kcat line without -e or read_committed: %s", doc, i+1, line)
			}
		}
	}
	if !sawRead {
		t.Error("no doc reads results with pipeline topics read")
	}
}
