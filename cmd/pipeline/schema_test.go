package main

import (
	"context"
	"errors"
	"math/big"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/eoflow/pipeline/internal/datagen"
	"github.com/eoflow/pipeline/internal/kread"
	"github.com/eoflow/pipeline/internal/srtest"
	"github.com/eoflow/pipeline/internal/testkit/paritycheck"
	"github.com/eoflow/pipeline/sink"
)

// numberSchemaV3 is a third compatible version of datagen's Number: one
// more field with a default.
const numberSchemaV3 = `{"type":"record","name":"Number","namespace":"eoflow.datagen","fields":[` +
	`{"name":"n","type":"long"},{"name":"parity","type":"string"},` +
	`{"name":"amount","type":{"type":"bytes","logicalType":"decimal","precision":18,"scale":2}},` +
	`{"name":"ts","type":{"type":"long","logicalType":"timestamp-millis"}},` +
	`{"name":"note","type":"string","default":""},{"name":"tag","type":["null","string"],"default":null}]}`

// avroJob is examples/avro-sum as a real process, on a registry of its
// own.
func avroJob(t *testing.T) (*job, *srtest.Registry) {
	reg := srtest.Start(t)
	j := newJob(t, "exactly_once")
	j.config = "../../examples/avro-sum/config.yaml"
	j.env["SCHEMA_REGISTRY_URL"] = reg.URL()
	return j, reg
}

// avroNumbers writes from..from+count-1 with datagen, in Avro, with
// Number's schema version.
func (j *job) avroNumbers(registry string, from, count int64, version int) {
	j.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := datagen.Numbers(ctx, j.conn, datagen.Options{Topic: j.env["INPUT_TOPIC"], From: from, Count: count,
		Avro: &datagen.Avro{Registry: registry, Version: version}}); err != nil {
		j.t.Fatal(err)
	}
}

// produce writes raw records to the input topic.
func (j *job) produce(values ...[]byte) {
	j.t.Helper()
	cl, err := kgo.NewClient(append(j.conn, kgo.DefaultProduceTopic(j.env["INPUT_TOPIC"]))...)
	if err != nil {
		j.t.Fatal(err)
	}
	defer cl.Close()
	for _, v := range values {
		if err := cl.ProduceSync(context.Background(), &kgo.Record{Value: v}).FirstErr(); err != nil {
			j.t.Fatal(err)
		}
	}
}

func (j *job) judgeAvro(n int64, registry string) *paritycheck.Report {
	j.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	outs, err := paritycheck.ReadAvro(ctx, j.conn, j.env["OUTPUT_TOPIC"], registry)
	if err != nil && !errors.Is(err, kerr.UnknownTopicOrPartition) {
		j.t.Fatal(err)
	}
	return paritycheck.JudgeAvro(outs, n)
}

// awaitAvro waits for the exact final totals of 1..n, restarting the
// process if it died.
func (j *job) awaitAvro(n int64, registry string) *paritycheck.Report {
	j.t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		if rep := j.judgeAvro(n, registry); rep.StateExact() {
			return rep
		}
		select {
		case err := <-j.exited:
			j.t.Logf("pipeline exited (%v); starting it again", err)
			j.cmd = nil
			j.start()
		default:
		}
		if time.Now().After(deadline) {
			j.t.Fatalf("no final totals of 1..%d: %v", n, j.judgeAvro(n, registry))
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// The exactly-once proof over Avro (issue 33): examples/avro-sum reads
// datagen's Avro numbers, whose amounts are decimals (n cents), and
// writes Avro. The producer moves from schema version 1 to version 2 (a
// field added with a default) mid-stream while the job is killed with
// SIGKILL at every fault point and at random; a record naming an unknown
// schema id and one whose bytes do not match their schema go to the dead
// letters; then the registry stops while the job is down, the job starts
// and waits for it, the registry comes back, and records of a schema the
// job has not seen arrive while the registry is stopped again. An
// independent reader (hamba/avro's generic decoder, each output's schema
// fetched by its id) finds one output per input, in order, with exact
// counts, sums and decimal amounts.
func TestAvroExactlyOnceUnderSIGKILLAndRegistryOutages(t *testing.T) {
	total := envInt(t, "CRASH_NUMBERS", 20_000)
	randomKills := int(envInt(t, "CRASH_KILLS", 2))
	seed := uint64(envInt(t, "CRASH_SEED", time.Now().UnixNano()))
	t.Logf("seed %d (CRASH_SEED=%d replays it)", seed, seed)
	j, reg := avroJob(t)

	var written, v2 int64
	piece := max(100, total/100)
	crashLoop(t, j, func() {
		version := 1
		if written >= total/10 {
			version = 2
			v2 += piece
		}
		j.avroNumbers(reg.URL(), written+1, piece, version)
		written += piece
		time.Sleep(50 * time.Millisecond)
	}, randomKills, rand.New(rand.NewPCG(seed, 0)))
	if v2 == 0 || v2 == written {
		t.Fatalf("%d of %d numbers in schema version 2: the evolution did not happen mid-stream", v2, written)
	}

	// Two poison records: an id the registry does not have, and bytes that
	// end inside the value their schema describes.
	unknown := []byte{0, 0, 1, 0x86, 0x9f, 2, 4}         // schema id 99999
	truncated := []byte{0, 0, 0, 0, 1, 0xc8, 0x01, 0x06} // id 1: n, then a string longer than the bytes
	j.produce(unknown, truncated)

	// The registry stops while the job is down: the new process waits for
	// it (its sink's schema and every record's schema are unknown to it),
	// writing nothing, until it comes back.
	reg.Stop()
	j.start()
	waitFor(t, j, "schema registry unreachable")
	time.Sleep(time.Second)
	reg.Resume()
	waitFor(t, j, "schema registry reachable again")

	// Version 3 of the schema, registered but never fetched by the job,
	// is written while the registry is stopped again: those records wait,
	// unread, until it is back.
	j.awaitAvro(written, reg.URL())
	id3, _, err := reg.RegisterSchema(j.env["INPUT_TOPIC"]+"-value", sr.Schema{Schema: numberSchemaV3})
	if err != nil {
		t.Fatal(err)
	}
	before := strings.Count(j.output(), "schema registry unreachable")
	reg.Stop()
	j.produce(numbersV3(t, id3, written+1, 200)...)
	deadline := time.Now().Add(30 * time.Second)
	for strings.Count(j.output(), "schema registry unreachable") == before {
		if time.Now().After(deadline) {
			t.Fatal("the job never met the outage")
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(time.Second)
	if n := outputCount(t, j); n != written {
		t.Fatalf("%d outputs during the outage, want the %d from before it", n, written)
	}
	written += 200
	reg.Resume()

	rep := j.awaitAvro(written, reg.URL())
	if !rep.Exact() || rep.Outputs["odd"]+rep.Outputs["even"] != int(written) {
		t.Fatalf("seed %d: after %d starts: %v", seed, j.started, rep)
	}
	t.Logf("%d numbers (%d in schema version 2, 200 in version 3), %d starts: %v", written, v2, j.started, rep)

	// The dead letters: the two poison records, unchanged, code schema,
	// the unknown id in a header.
	dls := deadLetters(t, j)
	if len(dls) != 2 {
		t.Fatalf("%d dead letters, want 2", len(dls))
	}
	for _, dl := range dls {
		h := headers(dl)
		if h[sink.HeaderCode] != "schema" {
			t.Errorf("dead letter %x: code %q (%s)", dl.Value, h[sink.HeaderCode], h[sink.HeaderReason])
		}
		switch string(dl.Value) {
		case string(unknown):
			if h[sink.HeaderSchemaID] != "99999" || !strings.Contains(h[sink.HeaderReason], "schema id 99999: the registry has no such schema") {
				t.Errorf("unknown id: %v", h)
			}
		case string(truncated):
			if h[sink.HeaderSchemaID] != "1" || !strings.Contains(h[sink.HeaderReason], "do not match the schema") {
				t.Errorf("truncated: %v", h)
			}
		default:
			t.Errorf("dead letter with a changed value: %x", dl.Value)
		}
	}
	j.terminate()
	j.noOpenTransactions()
}

// numbersV3 encodes numbers from..from+count-1 with schema v3 (id id),
// with hamba/avro, as a producer that bypasses the registry would.
func numbersV3(t *testing.T, id int, from, count int64) [][]byte {
	t.Helper()
	s := avro.MustParse(numberSchemaV3)
	type v3 struct {
		N      int64     `avro:"n"`
		Parity string    `avro:"parity"`
		Amount *big.Rat  `avro:"amount"`
		TS     time.Time `avro:"ts"`
		Note   string    `avro:"note"`
		Tag    *string   `avro:"tag"`
	}
	tag := "v3"
	var out [][]byte
	for n := from; n < from+count; n++ {
		body, err := avro.Marshal(s, v3{N: n, Parity: datagen.Parity(n), Amount: new(big.Rat).SetFrac64(n, 100), TS: time.Now(), Tag: &tag})
		if err != nil {
			t.Fatal(err)
		}
		b, _ := (&sr.ConfluentHeader{}).AppendEncode(nil, id, nil)
		out = append(out, append(b, body...))
	}
	return out
}

// waitFor waits until the job's output has line.
func waitFor(t *testing.T, j *job, line string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(j.output(), line) {
		if time.Now().After(deadline) {
			t.Fatalf("the job never logged %q", line)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// outputCount counts the committed outputs, without decoding them.
func outputCount(t *testing.T, j *job) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var n int64
	err := kread.All(ctx, j.conn, j.env["OUTPUT_TOPIC"], func(*kgo.Record) error { n++; return nil })
	if err != nil && !errors.Is(err, kerr.UnknownTopicOrPartition) { // not created yet: none
		t.Fatal(err)
	}
	return n
}

func deadLetters(t *testing.T, j *job) []*kgo.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out []*kgo.Record
	err := kread.All(ctx, j.conn, j.env["JOB_NAME"]+"-dead-letter", func(r *kgo.Record) error {
		out = append(out, r)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func headers(r *kgo.Record) map[string]string {
	m := map[string]string{}
	for _, h := range r.Headers {
		m[h.Key] = string(h.Value)
	}
	return m
}

// A savepoint taken while the input is in schema version 1, restored
// into an upgraded job (a filter on the field version 2 adds) while the
// input is in version 2: the sums continue exactly, state and offsets
// from the savepoint, the new records read with their own schema.
func TestAvroSavepointAcrossSchemaVersions(t *testing.T) {
	const total = 4000
	j, reg := avroJob(t)
	final := filepath.Join(t.TempDir(), "final")
	j.args = []string{"--stop-with-savepoint", final}
	j.avroNumbers(reg.URL(), 1, total/2, 1)
	j.start()
	j.awaitAvro(total/2, reg.URL())
	j.terminate()
	if !strings.Contains(j.output(), `msg="savepoint written"`) {
		t.Fatal("no savepoint written on SIGTERM")
	}

	j.avroNumbers(reg.URL(), total/2+1, total/2, 2)
	data, err := os.ReadFile("../../examples/avro-sum/config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	upgraded := strings.Replace(string(data), "steps:\n", "steps:\n  - id: noted\n    filter: '(note ?? \"\") != \"skip\"'\n", 1)
	j.config = filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(j.config, []byte(upgraded), 0o644); err != nil {
		t.Fatal(err)
	}
	j.args = []string{"--from-savepoint", final}
	j.start()
	rep := j.awaitAvro(total, reg.URL())
	j.terminate()
	if !rep.Exact() {
		t.Fatalf("after the savepoint and the schema's next version: %v", rep)
	}
	if strings.Count(j.output(), `msg="imported savepoint"`) != 1 {
		t.Fatal("the savepoint was not imported once")
	}
}
