package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/internal/datagen"
	"github.com/eoflow/pipeline/internal/testkit/kafkatest"
	"github.com/eoflow/pipeline/internal/testkit/paritycheck"
)

// groupJob is the parity-sum example in group mode: one process per
// instance id, started from the same file, sharing the job through its
// consumer group. parity-sum keys by parity, which the source partitioning
// knows nothing of, so every record crosses the repartition topic.
type groupJob struct {
	t       *testing.T
	brokers []string
	// config is the job's file (default: the parity-sum example).
	config  string
	conn    []kgo.Opt
	env     map[string]string
	members map[string]*job
	written atomic.Int64
}

const groupSessionTimeout = 6 * time.Second

func newGroupJob(t *testing.T, brokers []string) *groupJob {
	base := kafkatest.Topic(t, "group")
	g := &groupJob{t: t, brokers: brokers, conn: []kgo.Opt{kgo.SeedBrokers(brokers...)}, members: map[string]*job{}}
	g.env = map[string]string{
		"KAFKA_BROKERS":       strings.Join(brokers, ","),
		"JOB_NAME":            base,
		"INPUT_TOPIC":         base + "-in",
		"OUTPUT_TOPIC":        base + "-out",
		"GUARANTEE":           "exactly_once",
		"CHECKPOINT_INTERVAL": "200ms",
		"ADMIN_LISTEN":        "off",
		"SCALE_MODE":          "group",
		"SCALE_PARTITIONS":    "8",
		"SESSION_TIMEOUT":     groupSessionTimeout.String(),
	}
	kafkatest.CreateTopic(t, brokers, g.env["INPUT_TOPIC"], 6, nil)
	return g
}

// member is the process of instance id (made on first use).
func (g *groupJob) member(id string) *job {
	if m, ok := g.members[id]; ok {
		return m
	}
	m := &job{t: g.t, bin: binary(g.t), conn: g.conn, config: g.config, env: map[string]string{"PIPELINE_INSTANCE_ID": id}}
	for k, v := range g.env {
		m.env[k] = v
	}
	g.members[id] = m
	g.t.Cleanup(func() {
		m.kill()
		if g.t.Failed() {
			g.t.Logf("instance %s output:\n%s", id, m.output())
		}
	})
	return m
}

func (g *groupJob) logf(format string, args ...any) {
	g.t.Logf("%s: %s", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
}

// feed writes the numbers 1, 2, ... in small pieces until ctx ends. It
// resumes after the highest number in the topic (in transactions), so a
// piece that fails while a broker is down is written again without a gap
// or a repeat.
func (g *groupJob) feed(ctx context.Context) (wait func()) {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			if _, err := g.resume(1000); err != nil {
				g.logf("writing input (retrying): %v", err)
			}
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	return wg.Wait
}

// resume writes count numbers after the highest in the topic and returns
// the last one written.
func (g *groupJob) resume(count int64) (int64, error) {
	wctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var from int64
	_, err := datagen.Numbers(wctx, g.conn, datagen.Options{Topic: g.env["INPUT_TOPIC"], From: 1, Count: count, Resume: true,
		Started: func(f int64) { from = f }})
	if err != nil {
		return 0, err
	}
	last := from + count - 1
	g.written.Store(last)
	return last, nil
}

// alive fails the test if a member exited on its own.
func (g *groupJob) alive(except ...string) {
	g.t.Helper()
	for id, m := range g.members {
		if m.cmd == nil || containsString(except, id) {
			continue
		}
		select {
		case err := <-m.exited:
			m.cmd = nil
			g.t.Fatalf("instance %s exited: %v", id, err)
		default:
		}
	}
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// awaitExact waits until the output is exactly that of 1..n: every number
// once, counts in order, exact sums.
func (g *groupJob) awaitExact(n int64) *paritycheck.Report {
	g.t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		outs, err := paritycheck.Read(ctx, g.conn, g.env["OUTPUT_TOPIC"])
		cancel()
		if err == nil {
			rep := paritycheck.Judge(outs, n)
			if rep.Missing == 0 && rep.StateExact() {
				return rep
			}
			if rep.Duplicated != 0 || rep.OutOfOrder != 0 {
				g.explainDuplicates()
				g.t.Fatalf("not exactly once: %v", rep)
			}
			if time.Now().After(deadline) {
				g.t.Fatalf("no exact output of 1..%d within 3 minutes: %v", n, rep)
			}
		}
		g.alive()
		time.Sleep(300 * time.Millisecond)
	}
}

// explainDuplicates logs the first outputs that repeat a count, with the
// producer that wrote each and where.
func (g *groupJob) explainDuplicates() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl := kafkatest.Client(g.t, g.brokers, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	adm := kadm.NewClient(cl)
	ends, err := adm.ListEndOffsets(ctx, g.env["OUTPUT_TOPIC"])
	if err != nil {
		g.t.Log(err)
		return
	}
	want := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			want[o.Partition] = o.Offset
		}
	})
	rd := kafkatest.Client(g.t, g.brokers, kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeTopics(g.env["OUTPUT_TOPIC"]), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	type seen struct {
		offset   int64
		producer int64
		epoch    int16
		at       time.Time
	}
	first := map[string]seen{}
	shown := 0
	for shown < 10 && ctx.Err() == nil {
		fs := rd.PollRecords(ctx, 1000)
		fs.EachRecord(func(r *kgo.Record) {
			var o struct {
				Key   string `json:"key"`
				Count int64  `json:"count"`
			}
			_ = json.Unmarshal(r.Value, &o)
			k := fmt.Sprintf("%s/%d", o.Key, o.Count)
			if f, ok := first[k]; ok && shown < 10 {
				shown++
				g.t.Logf("output %s twice: offset %d (producer %d epoch %d, %s) and offset %d (producer %d epoch %d, %s)",
					k, f.offset, f.producer, f.epoch, f.at.Format("15:04:05.000"), r.Offset, r.ProducerID, r.ProducerEpoch, r.Timestamp.Format("15:04:05.000"))
			} else {
				first[k] = seen{r.Offset, r.ProducerID, r.ProducerEpoch, r.Timestamp}
			}
			if r.Offset+1 >= want[r.Partition] {
				delete(want, r.Partition)
			}
		})
		if len(want) == 0 {
			return
		}
	}
}

// count is how often line occurs in instance id's output.
func (g *groupJob) count(id, line string) int { return strings.Count(g.member(id).output(), line) }

// Group mode on a real 3-node cluster, one job on several processes while
// input keeps arriving: scaling 1 -> 3, SIGKILLs with restarts, a process
// SIGSTOPped past the session timeout and continued (its commit fails and
// it rejoins), the transaction coordinator's broker killed, a rolling
// restart, two processes with one instance id (one of them stops), and
// scaling 3 -> 2 -> 1, the last process killed while it drains for a
// savepoint, then stopped with one. An independent read_committed reader
// then finds every number exactly once, counts in order per key, exact
// sums.
func TestGroupModeExactUnderFaults(t *testing.T) {
	c := kafkatest.StartCluster(t, 3)
	g := newGroupJob(t, c.Bootstrap())
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 0))
	ctx, stopFeeding := context.WithCancel(context.Background())
	fed := g.feed(ctx)
	defer func() { stopFeeding(); fed() }()

	g.logf("scaling 1 -> 3")
	g.member("a").start()
	time.Sleep(3 * time.Second)
	g.member("b").start()
	g.member("c").start()
	time.Sleep(5 * time.Second)
	g.alive()

	ids := []string{"a", "b", "c"}
	for i := range 3 {
		victim := ids[rng.IntN(len(ids))]
		g.logf("SIGKILL %d: instance %s", i+1, victim)
		g.member(victim).kill()
		time.Sleep(time.Duration(500+rng.IntN(2*int(groupSessionTimeout/time.Millisecond))) * time.Millisecond)
		g.member(victim).start()
		time.Sleep(3 * time.Second)
		g.alive()
	}

	g.logf("SIGSTOP instance b past the session timeout")
	b := g.member("b")
	restoredBefore := g.count("b", "msg=restored")
	if err := b.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	time.Sleep(groupSessionTimeout + 4*time.Second)
	if err := b.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for g.count("b", "msg=restored") == restoredBefore {
		if time.Now().After(deadline) {
			t.Fatal("instance b did not rejoin and restore within a minute of SIGCONT")
		}
		g.alive()
		time.Sleep(200 * time.Millisecond)
	}
	g.logf("instance b rejoined")

	g.logf("killing the transaction coordinator of instance a")
	adm := kadm.NewClient(kafkatest.Client(t, c.Bootstrap()))
	dctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	described, err := adm.DescribeTransactions(dctx, g.env["JOB_NAME"]+"-a")
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	coordinator := described[g.env["JOB_NAME"]+"-a"].Coordinator
	if err := c.KillBroker(coordinator); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Second)
	sctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	err = c.StartBroker(sctx, coordinator)
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	g.logf("broker %d is back", coordinator)
	time.Sleep(3 * time.Second)
	g.alive()

	g.logf("rolling restart")
	for _, id := range ids {
		g.member(id).terminate()
		g.member(id).start()
		time.Sleep(2 * time.Second)
	}
	g.alive()

	g.logf("a second process with instance id c")
	first := g.member("c")
	dup := &job{t: t, bin: first.bin, conn: g.conn, env: first.env}
	t.Cleanup(func() {
		dup.kill()
		if t.Failed() {
			t.Logf("duplicate instance c output:\n%s", dup.output())
		}
	})
	dup.start()
	var fenced *job
	deadline = time.Now().Add(time.Minute)
	for fenced == nil {
		select {
		case <-first.exited:
			first.cmd, fenced = nil, first
			g.members["c"] = dup
		case <-dup.exited:
			dup.cmd, fenced = nil, dup
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("two processes with instance id c ran side by side for a minute")
		}
	}
	if !strings.Contains(fenced.output(), `another process joined the group with instance id \"c\"`) {
		t.Fatalf("the process with the duplicate instance id stopped, but not for that reason:\n%s", fenced.output())
	}
	g.logf("one of the two stopped: %v", fenced == first)

	g.logf("scaling 3 -> 2")
	g.member("c").terminate()
	time.Sleep(5 * time.Second)
	g.alive()

	// A savepoint needs one process owning every partition: b leaves,
	// a stops with a savepoint and is killed while it drains, then stops
	// with one for good, and runs on.
	g.logf("scaling 2 -> 1; a killed during a savepoint")
	g.member("b").terminate()
	a := g.member("a")
	a.terminate()
	a.args = []string{"--stop-with-savepoint", filepath.Join(t.TempDir(), "killed")}
	a.start()
	time.Sleep(4 * time.Second)
	if err := a.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Duration(rng.IntN(300)) * time.Millisecond)
	a.kill()
	g.logf("a savepoint taken for good")
	dir := filepath.Join(t.TempDir(), "sp")
	a.args = []string{"--stop-with-savepoint", dir}
	restoredBefore = g.count("a", "msg=restored")
	a.start()
	// Stopped before it restored (its predecessor was killed mid-drain,
	// which can take it seconds to get past), a process has no state to
	// write and rightly stops without a savepoint: wait for the restore.
	deadline = time.Now().Add(time.Minute)
	for g.count("a", "msg=restored") == restoredBefore {
		if time.Now().After(deadline) {
			t.Fatalf("instance a did not restore within a minute:\n%s", a.output())
		}
		time.Sleep(200 * time.Millisecond)
	}
	time.Sleep(4 * time.Second)
	a.terminate()
	if _, err := os.Stat(filepath.Join(dir, "savepoint.json")); err != nil {
		t.Fatalf("no savepoint after the stop: %v\n%s", err, a.output())
	}
	a.args = nil
	a.start()
	time.Sleep(3 * time.Second)
	g.alive()

	stopFeeding()
	fed()
	n, err := g.resume(1) // the highest number in the topic, whatever the last piece did
	if err != nil {
		t.Fatal(err)
	}
	rep := g.awaitExact(n)
	if !rep.Exact() {
		t.Fatalf("not exactly once: %v", rep)
	}
	g.logf("exact: %v", rep)
}
