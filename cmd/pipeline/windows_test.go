package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/internal/kread"
	"github.com/eoflow/pipeline/internal/testkit/kafkatest"
	"github.com/eoflow/pipeline/internal/testkit/windowcheck"
)

// The event-time reference job, examples/parity-windows, as a real
// process against the real broker, judged by internal/testkit/windowcheck: an
// independent batch oracle over the input read back from the topic.

const windowPartitions = 4

// windowParams are the job's window, out-of-orderness and lateness as
// the tests set them (WINDOW, MAX_OOO, LATENESS).
var windowParams = windowcheck.Params{Size: 1000, MaxOutOfOrderness: 200, AllowedLateness: 0, Partitions: windowPartitions}

func newWindowJob(t *testing.T, interval string, p windowcheck.Params) *job {
	j := newJob(t, "exactly_once")
	j.config = "../../examples/parity-windows/config.yaml"
	j.env["ADMIN_LISTEN"] = "127.0.0.1:0"
	j.env["LATE_TOPIC"] = j.env["JOB_NAME"] + "-late"
	j.env["CHECKPOINT_INTERVAL"] = interval
	j.env["WINDOW"] = fmt.Sprintf("%dms", p.Size)
	j.env["MAX_OOO"] = fmt.Sprintf("%dms", p.MaxOutOfOrderness)
	j.env["LATENESS"] = fmt.Sprintf("%dms", p.AllowedLateness)
	return j
}

// windowInput writes the records of each partition, in order, to that
// partition of the input topic.
type windowInput struct {
	j    *job
	data [][]windowcheck.Input
	next []int // per partition: the first not yet written
	// stamp is the records' Kafka timestamp (zero: the time of writing).
	stamp time.Time
}

func (w *windowInput) write(piece int) (written int) {
	w.j.t.Helper()
	cl, err := kgo.NewClient(append(w.j.conn, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.DefaultProduceTopic(w.j.env["INPUT_TOPIC"]))...)
	if err != nil {
		w.j.t.Fatal(err)
	}
	defer cl.Close()
	var recs []*kgo.Record
	for p := range w.data {
		for k := 0; k < piece && w.next[p] < len(w.data[p]); k++ {
			in := w.data[p][w.next[p]]
			recs = append(recs, &kgo.Record{Partition: in.Partition, Value: in.Value, Timestamp: w.stamp})
			w.next[p]++
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		w.j.t.Fatal(err)
	}
	return len(recs)
}

func (w *windowInput) done() bool {
	for p := range w.data {
		if w.next[p] < len(w.data[p]) {
			return false
		}
	}
	return true
}

// awaitWindows waits until the committed output and late topic are
// exactly what the oracle says of the input, restarting the process
// whenever it has died.
func (j *job) awaitWindows(p windowcheck.Params, restart bool) windowcheck.Report {
	j.t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		rep, err := windowcheck.Check(ctx, j.conn, p, j.env["INPUT_TOPIC"], j.env["OUTPUT_TOPIC"], j.env["LATE_TOPIC"])
		cancel()
		if err == nil && rep.OK() {
			return rep
		}
		select {
		case err := <-j.exited:
			if !restart {
				j.t.Fatalf("pipeline exited: %v", err)
			}
			j.cmd = nil
			j.start()
		default:
		}
		if time.Now().After(deadline) {
			j.t.Fatalf("the output never matched the oracle: %v %v", err, rep)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// windowCrashes writes the input in pieces while killing the job at every
// fault point and at random moments, restarting it after each kill.
func windowCrashes(t *testing.T, j *job, in *windowInput, randomKills int, rng *rand.Rand) {
	crashLoop(t, j, func() {
		if in.write(10) == 0 {
			t.Fatal("the input ran out before the job died: raise WINDOW_RECORDS")
		}
		time.Sleep(40 * time.Millisecond)
	}, randomKills, rng)
	for !in.done() {
		in.write(1000)
	}
}

// The read_committed output of parity-windows is the same for any crash
// schedule and for checkpoint intervals of 20 ms and 2 s, and equals the
// batch oracle: every window once with its exact count and sum, every
// record whose window had closed once in the late topic and in no
// window, and every record behind the watermark in a window still open
// counted in it.
func TestParityWindowsExactUnderSIGKILL(t *testing.T) {
	seed := uint64(envInt(t, "CRASH_SEED", time.Now().UnixNano()))
	t.Logf("seed %d (CRASH_SEED=%d replays it)", seed, seed)
	perPartition := int(envInt(t, "WINDOW_RECORDS", 8000))
	base := time.Now().Add(-time.Hour).UnixMilli() / 1000 * 1000
	data := windowcheck.Generate(int64(seed), windowPartitions, perPartition, windowParams, 0.02, base)
	var all []windowcheck.Input
	for _, part := range data {
		all = append(all, part...)
	}
	if behind := windowcheck.Behind(windowParams, all); behind == 0 {
		t.Fatal("no input behind the watermark in an open window: the test would not show they count")
	} else {
		t.Logf("%d inputs behind their partition's watermark by more than the lateness, in windows still open", behind)
	}
	for _, c := range []struct {
		interval string
		kills    int
		faults   bool
	}{{"20ms", 3, true}, {"2s", 2, false}} {
		t.Run(c.interval, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			j := newWindowJob(t, c.interval, windowParams)
			in := &windowInput{j: j, data: data, next: make([]int, windowPartitions)}
			if c.faults {
				windowCrashes(t, j, in, c.kills, rng)
			} else {
				for !in.done() {
					j.start()
					at := time.Now().Add(time.Duration(2500+rng.IntN(2000)) * time.Millisecond)
					for time.Now().Before(at) && !in.done() {
						in.write(50)
						time.Sleep(50 * time.Millisecond)
					}
					j.kill()
				}
			}
			j.start()
			rep := j.awaitWindows(windowParams, true)
			t.Logf("%d starts: %v", j.started, rep)
			j.terminate()
			j.noOpenTransactions()
		})
	}
}

// A partition that has delivered nothing holds the watermark back, before
// and after a restart: no window fires, however far the other partitions
// are. Once it delivers, the windows fire, exactly as the oracle says.
func TestSilentPartitionHoldsTheWatermark(t *testing.T) {
	p := windowParams
	j := newWindowJob(t, "50ms", p)
	data := windowcheck.Generate(3, windowPartitions, 400, p, 0, time.Now().Add(-time.Hour).UnixMilli())
	silent := data[3]
	data[3] = nil
	in := &windowInput{j: j, data: data, next: make([]int, windowPartitions)}
	for !in.done() {
		in.write(500)
	}
	j.start()
	j.awaitCheckpoints(3)
	j.kill()
	j.start()
	j.awaitCheckpoints(3)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if outs, err := windowcheck.ReadOutputs(ctx, j.conn, j.env["OUTPUT_TOPIC"]); err != nil || len(outs) != 0 {
		t.Fatalf("with partition 3 silent, before and after a restart: %d outputs (%v), want none", len(outs), err)
	}
	if !strings.Contains(j.metrics(), `pipeline_watermark_timestamp_seconds{pipeline="`+j.env["JOB_NAME"]+`"} 0`) {
		t.Errorf("the watermark moved with a silent partition:\n%s", j.metrics())
	}
	in.data[3] = silent
	for !in.done() {
		in.write(500)
	}
	rep := j.awaitWindows(p, false)
	t.Logf("after partition 3 delivered: %v", rep)
}

// A savepoint taken mid-window (with SIGTERM --stop-with-savepoint) and
// restored with another worker count continues to exactly the oracle's
// output: the open windows moved with their key groups, the watermarks
// with the offsets.
func TestWindowSavepointRestoredWithOtherWorkers(t *testing.T) {
	p := windowParams
	j := newWindowJob(t, "100ms", p)
	j.env["WORKERS"] = "1"
	data := windowcheck.Generate(5, windowPartitions, 2000, p, 0.01, time.Now().Add(-time.Hour).UnixMilli())
	in := &windowInput{j: j, data: data, next: make([]int, windowPartitions)}
	sp := filepath.Join(t.TempDir(), "sp")
	j.args = []string{"--stop-with-savepoint", sp}
	j.start()
	for range 25 { // half the input, while the job runs
		in.write(40)
		time.Sleep(20 * time.Millisecond)
	}
	j.awaitCheckpoints(2)
	j.terminate()
	code, out, errOut := j.pipelineCmd("savepoint", "inspect", sp)
	if code != 0 || !strings.Contains(out, "(window)") || !strings.Contains(out, "window  tumbling 1s") || !strings.Contains(out, "event time") {
		t.Fatalf("savepoint inspect: %d\n%s%s", code, out, errOut)
	}
	j.env["WORKERS"] = "3"
	j.args = []string{"--from-savepoint", sp}
	j.start()
	for !in.done() {
		in.write(200)
	}
	rep := j.awaitWindows(p, false)
	t.Logf("continued with 3 workers: %v", rep)
	j.terminate()
}

// A record's timestamp never fails a checkpoint. Event times 2 h ahead of
// the clock make window outputs whose timestamps (their last
// millisecond) the output topic refuses (message.timestamp.after.max.ms:
// 1 h by default in Kafka 4), and inputs written with timestamps 2 h old
// make late records the late topic refuses (before.max.ms set to 1 h
// here). Both are written with the processing time instead, the original
// in a header, and the output is exactly the oracle's; before, every
// epoch failed with INVALID_TIMESTAMP and the job restarted for ever,
// writing nothing.
func TestTimestampsTheTopicsRefuse(t *testing.T) {
	p := windowParams
	j := newWindowJob(t, "100ms", p)
	hour := "3600000"
	kafkatest.CreateTopic(t, strings.Split(j.env["KAFKA_BROKERS"], ","), j.env["LATE_TOPIC"], 1, map[string]*string{"message.timestamp.before.max.ms": &hour})
	data := windowcheck.Generate(11, windowPartitions, 300, p, 0.05, time.Now().Add(2*time.Hour).UnixMilli())
	in := &windowInput{j: j, data: data, next: make([]int, windowPartitions), stamp: time.Now().Add(-2 * time.Hour)}
	for !in.done() {
		in.write(300)
	}
	j.start()
	rep := j.awaitWindows(p, false)
	t.Logf("%v", rep)
	j.terminate()
	if rep.Written == 0 || rep.LateWritten == 0 {
		t.Fatalf("nothing to check: %v", rep)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, topic := range []string{j.env["OUTPUT_TOPIC"], j.env["LATE_TOPIC"]} {
		err := kread.All(ctx, j.conn, topic, func(r *kgo.Record) error {
			orig, err := strconv.ParseInt(sinkHeader(r, "pipeline.timestamp.original"), 10, 64)
			if off := time.Since(r.Timestamp); err != nil || off < -time.Minute || off > 5*time.Minute || time.UnixMilli(orig).Sub(r.Timestamp).Abs() < time.Hour {
				return fmt.Errorf("%s@%d: timestamp %v, header original %v (%v): want the time it was written, the original 2 h away", topic, r.Offset, r.Timestamp, orig, err)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

func sinkHeader(r *kgo.Record, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

// metrics scrapes the running job's /metrics (ADMIN_LISTEN must be on).
func (j *job) metrics() string {
	j.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if m := adminAddr.FindAllStringSubmatch(j.output(), -1); m != nil {
			resp, err := http.Get("http://" + m[len(m)-1][1] + "/metrics")
			if err == nil {
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				return string(b)
			}
		}
		if time.Now().After(deadline) {
			j.t.Fatalf("no /metrics of the running job:\n%s", j.output())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

var lastCheckpoint = regexp.MustCompile(`pipeline_checkpoint_last_completed_id\{[^}]*\} ([0-9]+)`)

// awaitCheckpoints waits until the running job completed n more
// checkpoints than when called.
func (j *job) awaitCheckpoints(n int) {
	j.t.Helper()
	id := func() int {
		m := lastCheckpoint.FindStringSubmatch(j.metrics())
		if m == nil {
			return 0
		}
		v, _ := strconv.Atoi(m[1])
		return v
	}
	deadline := time.Now().Add(time.Minute)
	for start := id(); id() < start+n; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			j.t.Fatalf("no %d checkpoints within a minute:\n%s", n, j.output())
		}
	}
}
