package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/eoflow/pipeline/internal/testkit/paritycheck"
)

// The three guarantees side by side, under one crash schedule: the same
// input, the same SIGKILL times (from one seed). The table it logs (and
// writes to CRASH_TABLE_OUT as markdown) is the one in docs/guarantees.md.
func TestGuaranteesUnderTheSameCrashes(t *testing.T) {
	total := envInt(t, "CRASH_NUMBERS", 20_000)
	kills := int(envInt(t, "CRASH_KILLS", 4))
	seed := uint64(envInt(t, "CRASH_SEED", time.Now().UnixNano()))
	t.Logf("seed %d", seed)
	var rows []string
	for _, g := range []string{"at_most_once", "at_least_once", "exactly_once"} {
		j := newJob(t, g)
		// The default interval: a crash loses or repeats up to about one
		// interval of work, which is what the guarantees differ in.
		j.env["CHECKPOINT_INTERVAL"] = "1s"
		n := randomCrashes(t, j, total, kills, seed)
		j.start()
		var rep *paritycheck.Report
		if g == "at_most_once" {
			rep = j.awaitDrained(n)
		} else {
			rep = j.awaitFinal(n, true)
		}
		j.terminate()
		outputs := rep.Outputs["odd"] + rep.Outputs["even"]
		rows = append(rows, fmt.Sprintf("| `%s` | %d | %d | %d | %d | %d | %v |",
			g, n, kills, outputs, rep.Missing, rep.Duplicated, rep.StateExact()))
		switch g {
		case "exactly_once":
			if !rep.Exact() {
				t.Errorf("exactly_once: %v", rep)
			}
		case "at_least_once":
			if rep.Missing != 0 || !rep.StateExact() {
				t.Errorf("at_least_once lost outputs or state: %v", rep)
			}
		case "at_most_once":
			if rep.Duplicated != 0 {
				t.Errorf("at_most_once repeated outputs: %v", rep)
			}
		}
	}
	table := "| guarantee | inputs | SIGKILLs | outputs | inputs lost | outputs duplicated | final sums exact |\n" +
		"|---|---|---|---|---|---|---|\n" + strings.Join(rows, "\n") + "\n"
	t.Logf("seed %d:\n%s", seed, table)
	if out := os.Getenv("CRASH_TABLE_OUT"); out != "" {
		if err := os.WriteFile(out, []byte(table), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// randomCrashes runs the job and kills it kills times at random moments
// (the same moments for the same seed) while input arrives; it writes at
// least total numbers and returns how many.
func randomCrashes(t *testing.T, j *job, total int64, kills int, seed uint64) int64 {
	rng := rand.New(rand.NewPCG(seed, 1))
	piece := max(100, total/int64(10*(kills+1)))
	var written int64
	for range kills {
		j.start()
		// The kill comes a seeded while after a seeded number of pieces
		// of input, so every guarantee sees the same input between the
		// same kills, and the kill lands while the last piece is in flight.
		pieces := 3 + rng.IntN(12)
		for i := range pieces {
			j.numbers(written+1, piece)
			written += piece
			if i < pieces-1 {
				time.Sleep(100 * time.Millisecond)
			}
		}
		time.Sleep(time.Duration(rng.IntN(300)) * time.Millisecond)
		j.kill()
	}
	if written < total {
		j.numbers(written+1, total-written)
		written = total
	}
	return written
}

// awaitDrained waits until an at_most_once job has consumed all input (its
// consumer group is at the end of every partition) and its output stopped
// changing; at_most_once never reaches the exact totals after a crash.
func (j *job) awaitDrained(n int64) *paritycheck.Report {
	j.t.Helper()
	cl := j.conn
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	admCl, err := newClient(cl)
	if err != nil {
		j.t.Fatal(err)
	}
	defer admCl.Close()
	adm := kadm.NewClient(admCl)
	for {
		lag, err := adm.Lag(ctx, j.env["JOB_NAME"])
		if err == nil {
			if gl, ok := lag[j.env["JOB_NAME"]]; ok && gl.Error() == nil && gl.Lag.Total() == 0 && len(gl.Lag) > 0 {
				break
			}
		}
		if ctx.Err() != nil {
			j.t.Fatalf("at_most_once job never drained its input")
		}
		time.Sleep(200 * time.Millisecond)
	}
	// Let what was polled reach the output, then judge what is there.
	prev := -1
	for {
		rep := j.judge(n)
		got := rep.Outputs["odd"] + rep.Outputs["even"]
		if got == prev {
			return rep
		}
		prev = got
		time.Sleep(time.Second)
	}
}
