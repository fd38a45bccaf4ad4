package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/internal/kread"
)

// The stream–table join contenders (issue 34): orders (-join-orders)
// left-joined with the customers table (-join-table), one output per
// order {"id","customer","n","tier"} keyed by the customer, tier "none"
// when the table does not hold the customer.

// readTiers reads a customers topic as a table, independently of the
// contenders: the tier of the latest value of each key, a tombstone
// deleting the key.
func readTiers(ctx context.Context, brokers, topic string) (map[string]string, error) {
	tiers := map[string]string{}
	err := kread.All(ctx, []kgo.Opt{kgo.SeedBrokers(strings.Split(brokers, ",")...)}, topic, func(r *kgo.Record) error {
		if r.Value == nil {
			delete(tiers, string(r.Key))
			return nil
		}
		t, ok := jsonString(r.Value, "tier")
		if !ok {
			return fmt.Errorf("%s: record %d/%d has no tier: %s", topic, r.Partition, r.Offset, r.Value)
		}
		tiers[string(r.Key)] = t
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading the table %s: %w", topic, err)
	}
	return tiers, nil
}

// jsonString is the string field name of a flat JSON object without
// escapes (the workload's and the contenders' records), and whether it is
// there.
func jsonString(v []byte, name string) (string, bool) {
	tag := `"` + name + `":"`
	i := bytes.Index(v, []byte(tag))
	if i < 0 {
		return "", false
	}
	rest := v[i+len(tag):]
	j := bytes.IndexByte(rest, '"')
	if j < 0 {
		return "", false
	}
	return string(rest[:j]), true
}

// joinCheck judges each output of a join contender against the table:
// its tier must be the one the table holds for its customer ("none" when
// it holds none), its record key the customer.
type joinCheck struct {
	tiers map[string]string
	mu    sync.Mutex
	count map[string]int64
	bad   int64
	first string // the first wrong output
}

func newJoinCheck(tiers map[string]string) *joinCheck {
	return &joinCheck{tiers: tiers, count: map[string]int64{}}
}

func (j *joinCheck) check(key, value []byte) {
	c, ok1 := jsonString(value, "customer")
	t, ok2 := jsonString(value, "tier")
	want, ok := j.tiers[c]
	if !ok {
		want = "none"
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	j.count[t]++
	if !ok1 || !ok2 || t != want || string(key) != c {
		if j.bad == 0 {
			j.first = fmt.Sprintf("key %q value %s (the table says tier %q)", key, value, want)
		}
		j.bad++
	}
}

// err says how many outputs were wrong, and the first; nil if none.
func (j *joinCheck) err() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.bad == 0 {
		return nil
	}
	return fmt.Errorf("%d outputs disagree with the table, the first: %s", j.bad, j.first)
}

func (j *joinCheck) tally() map[string]int64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	m := make(map[string]int64, len(j.count))
	for t, n := range j.count {
		m[t] = n
	}
	return m
}

// Each join contender's log line once its table is read to its end: the
// pipeline's (with the read's took) and the Kafka Streams peer's on
// reaching RUNNING (with its restore listener's restore_ms).
var (
	pipelineTableLine = regexp.MustCompile(`msg="table read to its end".* took=(\S+)`)
	kstreamsTableLine = regexp.MustCompile(`bench: RUNNING after \d+ ms restored=(\d+) restore_ms=(\d+)`)
)

// tableLoaded is, in a join contender's log, whether its table is read to
// its end, the engine's own time for that read, and (Kafka Streams) the
// records its restore listener saw.
func tableLoaded(kind string, log []byte) (time.Duration, int64, bool) {
	if kind == "kstreams" {
		m := kstreamsTableLine.FindSubmatch(log)
		if m == nil {
			return 0, 0, false
		}
		n, _ := strconv.ParseInt(string(m[1]), 10, 64)
		ms, _ := strconv.ParseInt(string(m[2]), 10, 64)
		return time.Duration(ms) * time.Millisecond, n, true
	}
	m := pipelineTableLine.FindSubmatch(log)
	if m == nil {
		return 0, 0, false
	}
	d, err := time.ParseDuration(string(m[1]))
	return d, 0, err == nil
}

// restore is a join contender's restore of a table: started once, to
// the table read to its end (first), stopped, then started again (the
// restore: from the process's start to the table read to its end).
type restore struct {
	first, wall, engine time.Duration
	records             int64   // Kafka Streams: the records its restore listener saw
	cpu                 float64 // s
	rssKiB              int64
	diskBytes           int64 // Kafka Streams' state directory
}

// joinProc is one start of a join contender.
type joinProc struct {
	cmd    *exec.Cmd
	exited chan error
	log    string
	start  time.Time
}

func startJoin(rc contender, out, id string) (*joinProc, error) {
	argv, env := rc.Cmd(out, id)
	logf, err := os.CreateTemp("", "bench-restore-"+rc.Name+"-*.log")
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	p := &joinProc{cmd: cmd, exited: make(chan error, 1), log: logf.Name(), start: time.Now()}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", argv[0], err)
	}
	go func() { p.exited <- cmd.Wait() }()
	return p, nil
}

// await polls done every 10 ms until it says yes, the process exits, or
// five minutes pass.
func (p *joinProc) await(done func() (bool, error)) error {
	for deadline := p.start.Add(5 * time.Minute); ; {
		ok, err := done()
		if err != nil || ok {
			return err
		}
		select {
		case err := <-p.exited:
			p.exited <- err
			return fmt.Errorf("exited (%v) before its table was read (log %s)", err, p.log)
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("table not read after 5 minutes (log %s)", p.log)
		}
	}
}

// measureRestore runs join contender c on table (and the empty orders
// topic o.restoreOrders) twice. The first start lasts until the table is
// read to its end: the pipeline's log says so; Kafka Streams reads a
// source KTable's topic as an input on a first start (it restores only up
// to the offsets its group committed, none yet), so until its group has
// committed the table topic's end offsets. The second start, after the
// first is stopped (Kafka Streams' peer then deletes its state directory,
// as exactly_once_v2 wipes the store of a task that crashed), lasts until
// its log says the table is read to its end (Kafka Streams: RUNNING and
// every partition restored, from the topic up to those offsets); its CPU
// and VmRSS are read then. With first false (an empty table) only the
// second start runs.
func measureRestore(ctx context.Context, o options, adm *kadm.Client, c contender, table, tag string, first bool) (restore, error) {
	var r restore
	ro := o
	ro.joinOrders, ro.joinTable = o.restoreOrders, table
	var rc *contender
	for _, x := range contenders(ro) {
		if x.Name == c.Name {
			rc = &x
		}
	}
	if rc == nil {
		return r, fmt.Errorf("no contender %s", c.Name)
	}
	// Under the contender's prefix, which the runner deletes after it too.
	id := "bench-" + o.run + "-" + c.Name + "-restore-" + tag
	out := id + "-out"
	defer cleanup(context.Background(), adm, id)
	if _, err := adm.CreateTopic(ctx, int32(o.partitions), -1, nil, out); err != nil {
		return r, fmt.Errorf("create %s: %w", out, err)
	}
	loaded := func(p *joinProc) func() (bool, error) {
		return func() (bool, error) {
			b, err := os.ReadFile(p.log)
			if err != nil {
				return false, err
			}
			d, n, ok := tableLoaded(c.Kind, b)
			if ok {
				r.wall, r.engine, r.records = time.Since(p.start), d, n
			}
			return ok, nil
		}
	}
	if first {
		ends, err := adm.ListEndOffsets(ctx, table)
		if err != nil {
			return r, err
		}
		p, err := startJoin(*rc, out, id)
		if err != nil {
			return r, err
		}
		done := loaded(p)
		if c.Kind == "kstreams" {
			done = func() (bool, error) { return committedTo(ctx, adm, id, ends) }
		}
		err = p.await(done)
		r.first = time.Since(p.start)
		stop(p.cmd, p.exited)
		if err != nil {
			return r, fmt.Errorf("first start: %w", err)
		}
		os.Remove(p.log)
	}
	p, err := startJoin(*rc, out, id)
	if err != nil {
		return r, err
	}
	defer stop(p.cmd, p.exited)
	if err := p.await(loaded(p)); err != nil {
		return r, err
	}
	cpu, ok := processCPU(p.cmd.Process.Pid)
	rss, ok2 := vmRSS(p.cmd.Process.Pid)
	if !ok || !ok2 {
		return r, errors.New("cannot read the process's /proc")
	}
	r.cpu, r.rssKiB = cpu, rss
	if c.Kind == "kstreams" {
		// Its RocksDB store keeps most of the table in files, not in RSS.
		r.diskBytes = dirBytes(filepath.Join(os.TempDir(), "kstreams-bench-"+id))
		if first && r.records == 0 {
			return r, fmt.Errorf("its restart restored no record of %s (log %s)", table, p.log)
		}
	}
	os.Remove(p.log)
	return r, nil
}

// committedTo is whether consumer group g has committed ends, the end
// offsets of a topic, on every partition.
func committedTo(ctx context.Context, adm *kadm.Client, g string, ends kadm.ListedOffsets) (bool, error) {
	got, err := adm.FetchOffsets(ctx, g)
	if err != nil {
		return false, nil // the group may not be there yet
	}
	ok := true
	ends.Each(func(l kadm.ListedOffset) {
		c, found := got.Lookup(l.Topic, l.Partition)
		if l.Offset > 0 && (!found || c.At < l.Offset) {
			ok = false
		}
	})
	return ok, nil
}

// dirBytes is the size of the files under dir (0 if none).
func dirBytes(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// vmRSS is the resident set of process pid now, in KiB.
func vmRSS(pid int) (int64, bool) {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, false
	}
	for _, l := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			n, err := strconv.ParseInt(strings.Fields(v)[0], 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

// addRestore measures join contender c's restore of o.restoreTable (keys
// keys) and, for its memory per key, of the empty o.restoreEmpty, into r.
func addRestore(ctx context.Context, o options, adm *kadm.Client, c contender, keys int64, r *result) error {
	full, err := measureRestore(ctx, o, adm, c, o.restoreTable, "full", true)
	if err != nil {
		return fmt.Errorf("restore of %s: %w", o.restoreTable, err)
	}
	base, err := measureRestore(ctx, o, adm, c, o.restoreEmpty, "empty", false)
	if err != nil {
		return fmt.Errorf("restore of %s: %w", o.restoreEmpty, err)
	}
	r.TableKeys = keys
	r.FirstLoadSeconds = full.first.Seconds()
	r.RestoreRecords = full.records
	r.RestoreSeconds = full.wall.Seconds()
	r.RestoreEngineSeconds = full.engine.Seconds()
	r.RestoreCPUSeconds = full.cpu
	r.TableRSSMiB = float64(full.rssKiB) / 1024
	r.BaseRSSMiB = float64(base.rssKiB) / 1024
	if keys > 0 {
		r.TableBytesPerKey = float64(full.rssKiB-base.rssKiB) * 1024 / float64(keys)
		r.TableDiskBytesPerKey = float64(full.diskBytes-base.diskBytes) / float64(keys)
	}
	return nil
}
