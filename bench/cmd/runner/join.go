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
	kstreamsTableLine = regexp.MustCompile(`bench: RUNNING after \d+ ms restored=\d+ restore_ms=(\d+)`)
)

// tableLoaded is, in a join contender's log, whether its table is read to
// its end, and the engine's own time for that read.
func tableLoaded(kind string, log []byte) (time.Duration, bool) {
	if kind == "kstreams" {
		m := kstreamsTableLine.FindSubmatch(log)
		if m == nil {
			return 0, false
		}
		ms, _ := strconv.ParseInt(string(m[1]), 10, 64)
		return time.Duration(ms) * time.Millisecond, true
	}
	m := pipelineTableLine.FindSubmatch(log)
	if m == nil {
		return 0, false
	}
	d, err := time.ParseDuration(string(m[1]))
	return d, err == nil
}

// restore is one start of a join contender on a table: from the
// process's start to its table read to the end.
type restore struct {
	wall, engine time.Duration
	cpu          float64 // s
	rssKiB       int64
	diskBytes    int64 // Kafka Streams' state directory
}

// measureRestore starts join contender c on table (and the empty orders
// topic o.restoreOrders), waits for its log to say the table is read to
// its end, reads its CPU and VmRSS then, and stops it.
func measureRestore(ctx context.Context, o options, adm *kadm.Client, c contender, table, tag string) (restore, error) {
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
	argv, env := rc.Cmd(out, id)
	logf, err := os.CreateTemp("", "bench-restore-"+c.Name+"-*.log")
	if err != nil {
		return r, err
	}
	defer logf.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return r, fmt.Errorf("start %s: %w", argv[0], err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer stop(cmd, exited)
	for deadline := start.Add(5 * time.Minute); ; {
		b, err := os.ReadFile(logf.Name())
		if err != nil {
			return r, err
		}
		if d, ok := tableLoaded(c.Kind, b); ok {
			r.wall, r.engine = time.Since(start), d
			break
		}
		select {
		case err := <-exited:
			exited <- err
			return r, fmt.Errorf("exited (%v) before its table was read (log %s)", err, logf.Name())
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return r, fmt.Errorf("table not read after 5 minutes (log %s)", logf.Name())
		}
	}
	cpu, ok := processCPU(cmd.Process.Pid)
	rss, ok2 := vmRSS(cmd.Process.Pid)
	if !ok || !ok2 {
		return r, errors.New("cannot read the process's /proc")
	}
	r.cpu, r.rssKiB = cpu, rss
	if c.Kind == "kstreams" {
		// Its RocksDB store keeps most of the table in files, not in RSS.
		r.diskBytes = dirBytes(filepath.Join(os.TempDir(), "kstreams-bench-"+id))
	}
	os.Remove(logf.Name())
	return r, nil
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
	full, err := measureRestore(ctx, o, adm, c, o.restoreTable, "full")
	if err != nil {
		return fmt.Errorf("restore of %s: %w", o.restoreTable, err)
	}
	base, err := measureRestore(ctx, o, adm, c, o.restoreEmpty, "empty")
	if err != nil {
		return fmt.Errorf("restore of %s: %w", o.restoreEmpty, err)
	}
	r.TableKeys = keys
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
