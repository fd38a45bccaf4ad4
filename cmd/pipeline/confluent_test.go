package main

import (
	"bytes"
	"fmt"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eoflow/pipeline/internal/srtest"
)

// confluent runs a script of testdata (confluent_avro.py or
// confluent_formats.py) on Confluent's Python client: confluent-kafka
// with fastavro, protobuf and jsonschema, implementations of the wire
// format and of the formats independent of this project's. env is added
// to the script's environment.
func confluent(t *testing.T, env []string, script string, args ...string) string {
	t.Helper()
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Fatal("python3 is not on PATH: the cross-check with Confluent's client needs it (and pip install 'confluent-kafka[avro,json,protobuf,schemaregistry]')")
	}
	cmd := exec.Command(python, append([]string{"testdata/" + script}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		if strings.Contains(stderr.String(), "No module named") {
			t.Fatalf("Confluent's Python client is missing (.ci/run installs it: pip install 'confluent-kafka[avro,json,protobuf,schemaregistry]'): %s", stderr.String())
		}
		t.Fatalf("%s %s: %v\n%s", script, strings.Join(args, " "), err, stderr.String())
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
	confluent(t, nil, "confluent_avro.py", "produce", brokers, reg.URL(), in, "1", strconv.Itoa(n/2), "1")
	confluent(t, nil, "confluent_avro.py", "produce", brokers, reg.URL(), in, strconv.Itoa(n/2+1), strconv.Itoa(n/2), "2")
	j.start()
	if rep := j.awaitAvro(n, reg.URL()); !rep.Exact() {
		t.Fatalf("the job's output: %v", rep)
	}
	got := confluent(t, nil, "confluent_avro.py", "consume", brokers, reg.URL(), out, strconv.Itoa(n))
	want := `{"key": "even", "count": 1000, "sum": 1001000, "amount": "10010.00", "outputs": 1000}
{"key": "odd", "count": 1000, "sum": 1000000, "amount": "10000.00", "outputs": 1000}
`
	if got != want {
		t.Fatalf("Confluent's deserializer read:\n%s\nwant:\n%s", got, want)
	}
	j.terminate()
}

// The same cross-check for Protobuf and JSON Schema, where their wire
// format and types differ from Avro's. Confluent's ProtobufSerializer
// writes numbers as three messages of testdata/crosscheck.proto in turn,
// so the records carry the message indexes [0] (the single 0 byte), [1]
// and [1, 1] (a nested message), with int64, sint64 and sfixed64
// integers beyond 2^53, Timestamps with nanoseconds, an Int64Value
// wrapper set or not and confluent.type.Decimal unit costs of three
// scales, negative and positive; its JSONSerializer writes
// testdata/crosscheck.json objects, a bonus null or absent.
// testdata/schema-sum.yaml sums them by parity and writes the same format
// with the schema it derives, and Confluent's ProtobufDeserializer (as
// crosscheck.proto's Totals) and JSONDeserializer (validating against the
// job's schema) read back exactly the totals of 1..n, one output per
// input.
func TestConfluentClientReadsAndWritesProtobufAndJSONSchemaWithTheJob(t *testing.T) {
	const n = 1500 // at most 2047: amounts of 2^53 + i sum within int64
	for _, format := range []string{"protobuf", "json_schema"} {
		t.Run(format, func(t *testing.T) {
			var env []string
			if format == "protobuf" {
				env = append(env, "PYTHONPATH="+protocPython(t))
			}
			j, reg := schemaJob(t, format, format)
			brokers, in, out := j.env["KAFKA_BROKERS"], j.env["INPUT_TOPIC"], j.env["OUTPUT_TOPIC"]
			confluent(t, env, "confluent_formats.py", "produce", format, brokers, reg.URL(), in, "1", strconv.Itoa(n))
			j.start()
			j.awaitOutputs(n)
			got := confluent(t, env, "confluent_formats.py", "consume", format, brokers, reg.URL(), out, strconv.Itoa(n))
			if want := confluentTotals(format, n); got != want {
				t.Fatalf("Confluent's deserializer read:\n%s\nwant:\n%s", got, want)
			}
			j.terminate()
		})
	}
}

// schemaJob is testdata/schema-sum.yaml as a real process reading and
// writing formats, on a registry of its own.
func schemaJob(t *testing.T, in, out string) (*job, *srtest.Registry) {
	t.Helper()
	reg := srtest.Start(t)
	j := newJob(t, "exactly_once")
	j.config = "testdata/schema-sum.yaml"
	j.env["SCHEMA_REGISTRY_URL"] = reg.URL()
	j.env["INPUT_FORMAT"], j.env["OUTPUT_FORMAT"] = in, out
	return j, reg
}

// confluentDecimalProto is Confluent's confluent/type/decimal.proto, which
// crosscheck.proto imports: protoc reads it to generate crosscheck_pb2.py,
// whose import of it confluent_formats.py points at the module Confluent's
// client ships.
const confluentDecimalProto = `syntax = "proto3";
package confluent.type;
message Decimal { bytes value = 1; uint32 precision = 2; int32 scale = 3; }
`

// protocPython is a directory with crosscheck_pb2.py, generated by protoc
// from testdata/crosscheck.proto.
func protocPython(t *testing.T) string {
	t.Helper()
	protoc, err := exec.LookPath("protoc")
	if err != nil {
		t.Fatal("protoc is not on PATH: the Protobuf cross-check generates Python classes with it (apt-get install protobuf-compiler; .ci/run does)")
	}
	dir, include := t.TempDir(), t.TempDir()
	if err := os.MkdirAll(filepath.Join(include, "confluent", "type"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(include, "confluent", "type", "decimal.proto"), []byte(confluentDecimalProto), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(protoc, "--python_out="+dir, "-Itestdata", "-I"+include, "testdata/crosscheck.proto")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("protoc: %v\n%s", err, out)
	}
	return dir
}

// awaitOutputs waits until the output topic holds n committed records.
func (j *job) awaitOutputs(n int64) {
	j.t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		select {
		case err := <-j.exited:
			j.cmd = nil // gone: nothing for the cleanup to kill
			j.t.Fatalf("pipeline exited: %v", err)
		case <-time.After(250 * time.Millisecond):
		}
		got := outputCount(j.t, j)
		if got == n {
			return
		}
		if got > n || time.Now().After(deadline) {
			j.t.Fatalf("%d outputs, want %d", got, n)
		}
	}
}

// confluentTotals is what confluent_formats.py consume prints for the
// totals of 1..n (its docstring has the numbers): Python's JSON of what
// Confluent's deserializer gave.
func confluentTotals(format string, n int64) string {
	const base = 1767225600
	var b strings.Builder
	for _, key := range []string{"even", "odd"} {
		var count, sum, bonus, last int64
		for i := int64(1); i <= n; i++ {
			if (i%2 == 0) != (key == "even") {
				continue
			}
			count, sum, last = count+1, sum+i, i
			if i%5 == 0 {
				bonus += i
			}
		}
		amount := count<<53 + sum
		cents := sum - 1000*count // of the unit costs (i - 1000) / 100
		price := float64(sum) / 4
		if format == "protobuf" {
			// A double is a Python float; a derived decimal a string,
			// its exact value without trailing zeros.
			cost := strings.TrimRight(strings.TrimRight(big.NewRat(cents, 100).FloatString(2), "0"), ".")
			fmt.Fprintf(&b, `{"key": %q, "count": %d, "sum": %d, "amount": %d, "bonus": %d, "price": %s, "unit_cost": %q, "latest": {"seconds": %d, "nanos": %d}, "outputs": %d}`+"\n",
				key, count, sum, amount, bonus, pythonFloat(price), cost, base+last, last*1001, count)
			continue
		}
		// JSON: whole numbers are Python ints, the timestamp the text
		// Python's isoformat wrote, passed through.
		latest := time.Unix(base+last, last*1001/1000*1000).UTC().Format("2006-01-02T15:04:05.000000") + "+00:00"
		fmt.Fprintf(&b, `{"key": %q, "count": %d, "sum": %d, "amount": %d, "bonus": %d, "price": %s, "unit_cost": %d, "latest": %q, "outputs": %d}`+"\n",
			key, count, sum, amount, bonus, strconv.FormatFloat(price, 'f', -1, 64), cents, latest, count)
	}
	return b.String()
}

// pythonFloat is Python's repr of a float of moderate size.
func pythonFloat(f float64) string {
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.Contains(s, ".") {
		s += ".0"
	}
	return s
}
