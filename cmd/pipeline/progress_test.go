package main

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// run --progress prints progress lines with what the job did, and a bad
// record is logged at warn level with its reason.
func TestRunPrintsProgress(t *testing.T) {
	j := newJob(t, "exactly_once")
	j.args = []string{"--progress", "--progress-every", "100ms"}
	j.numbers(1, 2000)
	cl, err := kgo.NewClient(append(j.conn, kgo.DefaultProduceTopic(j.env["INPUT_TOPIC"]))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("not json")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	j.start()
	j.awaitFinal(2000, false)

	// Everything read, written and checkpointed: 2000 numbers and the bad
	// record in, one output per number, nothing left to read, the bad
	// record a dead letter.
	done := regexp.MustCompile(`(?m)^progress: running  in 2001 \(\d+/s\)  out 2000 \(\d+/s\)  lag 0  checkpoint [1-9]\d* \([^)]+ ago\)  dead letters 1$`)
	deadline := time.Now().Add(time.Minute)
	for !done.MatchString(j.output()) {
		if time.Now().After(deadline) {
			t.Fatalf("no progress line matching %s", done)
		}
		time.Sleep(100 * time.Millisecond)
	}
	j.terminate()
	warn := regexp.MustCompile(`(?m)^time=\S+ level=WARN msg="dead letter: record sent to the dead-letter topic" job=\S+ code=decode step=steps\[\d\]\.\S+ reason="[^"]+" topic=` +
		regexp.QuoteMeta(j.env["INPUT_TOPIC"]) + ` partition=\d+ offset=\d+ suppressed=0$`)
	if !warn.MatchString(j.output()) {
		t.Errorf("no warn line for the dead letter")
	}
	if n := strings.Count(j.output(), "dead letter: record sent"); n != 1 {
		t.Errorf("%d dead-letter lines, want 1", n)
	}
}
