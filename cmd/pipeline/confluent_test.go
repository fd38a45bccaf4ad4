package main

import (
	"bytes"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// confluent runs testdata/confluent_avro.py: Confluent's Python client
// (confluent-kafka with fastavro), an implementation of the wire format
// and of Avro independent of this project's.
func confluent(t *testing.T, args ...string) string {
	t.Helper()
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Fatal("python3 is not on PATH: the cross-check with Confluent's client needs it (and pip install confluent-kafka fastavro)")
	}
	cmd := exec.Command(python, append([]string{"testdata/confluent_avro.py"}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		if strings.Contains(stderr.String(), "No module named") {
			t.Fatalf("Confluent's Python client is missing (.ci/run installs it: pip install 'confluent-kafka[avro,schemaregistry]'): %s", stderr.String())
		}
		t.Fatalf("confluent_avro.py %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String()
}

// The wire-format cross-check (issue 33): Confluent's AvroSerializer
// writes the input, half with one schema version and half with the next
// (a field added with a default), examples/avro-sum reads and sums it,
// and Confluent's AvroDeserializer reads the job's Avro output back with
// the schema the job registered: one output per input, exact counts,
// sums and decimal amounts.
func TestConfluentClientReadsAndWritesWithTheJob(t *testing.T) {
	const n = 2000
	j, reg := avroJob(t)
	brokers, in, out := j.env["KAFKA_BROKERS"], j.env["INPUT_TOPIC"], j.env["OUTPUT_TOPIC"]
	confluent(t, "produce", brokers, reg.URL(), in, "1", strconv.Itoa(n/2), "1")
	confluent(t, "produce", brokers, reg.URL(), in, strconv.Itoa(n/2+1), strconv.Itoa(n/2), "2")
	j.start()
	if rep := j.awaitAvro(n, reg.URL()); !rep.Exact() {
		t.Fatalf("the job's output: %v", rep)
	}
	got := confluent(t, "consume", brokers, reg.URL(), out, strconv.Itoa(n))
	want := `{"key": "even", "count": 1000, "sum": 1001000, "amount": "10010.00", "outputs": 1000}
{"key": "odd", "count": 1000, "sum": 1000000, "amount": "10000.00", "outputs": 1000}
`
	if got != want {
		t.Fatalf("Confluent's deserializer read:\n%s\nwant:\n%s", got, want)
	}
	j.terminate()
}
