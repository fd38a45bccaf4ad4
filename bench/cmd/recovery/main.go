// Command recovery is the recovery benchmark of issue 7: the time from a
// SIGKILL of the pipeline to the first output committed by the process that
// replaces it, with K keys of state (100k and 1M by default).
//
// For each K it creates fresh topics, produces K input records with K
// distinct keys (so the keyed sum, bench/jobs/keyed-sum.yaml, exactly_once,
// 1s checkpoints, holds K keys) and starts the pipeline. Once every output
// of those records is visible to a read_committed reader (so the state is
// committed with them), input keeps flowing at -rate records/s, and then,
// -reps times: SIGKILL the pipeline, read the output's high watermarks,
// start a new pipeline at once, and wait for the first output record at or
// past a high watermark to reach the read_committed reader. Nothing the
// killed process wrote can be there: its open transaction is aborted by its
// successor, and everything it committed lies below the marks. After each
// kill the new process runs -settle before the next.
//
// It also times a plain read_committed read of the state topic with the
// reader the restore uses (no decoding), to show what bounds the restore.
//
//	go run ./bench/cmd/recovery -brokers 127.0.0.1:9092 -keys 100000,1000000 -reps 3
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/internal/datagen"
	"github.com/eoflow/pipeline/internal/kread"
)

type options struct {
	brokers    string
	pipeline   string
	job        string
	keys       string
	reps       int
	partitions int
	rate       int
	settle     time.Duration
	out        string
	md         string
	profile    string
	keep       bool
}

// kill is one SIGKILL and what followed it.
type kill struct {
	Keys int `json:"keys"`
	Rep  int `json:"rep"`
	// KillToFirstOutputMs: SIGKILL to the first output of the new process
	// seen by the read_committed reader. The headline number.
	KillToFirstOutputMs float64 `json:"kill_to_first_output_ms"`
	// KillToStartMs: SIGKILL until the new process was started (waiting
	// for the old one to be gone, reading the high watermarks).
	KillToStartMs float64 `json:"kill_to_start_ms"`
	// StartToRestoredMs: start to the "restored" log line.
	StartToRestoredMs float64 `json:"start_to_restored_ms"`
	// RestoreTookMs: the "took" of that line (fencing, reading the
	// checkpoint, reading the state topic, building the stores).
	RestoreTookMs float64 `json:"restore_took_ms"`
	StateKeys     int64   `json:"state_keys"`
	// RestoredToFirstCommitMs: the log line to the first "checkpoint
	// completed" of the new process.
	RestoredToFirstCommitMs float64 `json:"restored_to_first_commit_ms"`
	// RestoredToFirstOutputMs: the log line to the first new output seen.
	RestoredToFirstOutputMs float64 `json:"restored_to_first_output_ms"`
	Load                    string  `json:"loadavg"`
}

// stateRead is a plain read of the state topic, for comparison with the
// restore.
type stateRead struct {
	Keys    int     `json:"keys"`
	Records int64   `json:"records"`
	Bytes   int64   `json:"bytes"`
	Ms      float64 `json:"ms"`
}

func main() {
	var o options
	flag.StringVar(&o.brokers, "brokers", os.Getenv("KAFKA_BOOTSTRAP"), "seed brokers")
	flag.StringVar(&o.pipeline, "pipeline", "bin/pipeline", "pipeline binary")
	flag.StringVar(&o.job, "job", "bench/jobs/keyed-sum.yaml", "job file (exactly_once, 1s is set by the environment)")
	flag.StringVar(&o.keys, "keys", "100000,1000000", "comma-separated state sizes (distinct keys)")
	flag.IntVar(&o.reps, "reps", 3, "kills per state size")
	flag.IntVar(&o.partitions, "partitions", 8, "partitions of the input and output topics")
	flag.IntVar(&o.rate, "rate", 2000, "input records per second while killing")
	flag.DurationVar(&o.settle, "settle", 5*time.Second, "run time of each new process before the next kill")
	flag.StringVar(&o.out, "out", "bench/results/recovery.jsonl", "JSON lines to write: one per kill, one per state read")
	flag.StringVar(&o.md, "md", "", "markdown summary to write (optional)")
	flag.StringVar(&o.profile, "profile", "", "directory for a CPU profile of one more restart per size, not counted in the results (optional)")
	flag.BoolVar(&o.keep, "keep", false, "keep the topics")
	run := flag.String("run", time.Now().UTC().Format("20060102T150405"), "run id: the topics are recovery-<run>-<keys>-*")
	flag.Parse()
	log.SetFlags(log.LstdFlags | log.Lmicroseconds)
	if o.brokers == "" {
		log.Fatal("no brokers: set -brokers or KAFKA_BOOTSTRAP")
	}
	out, err := os.Create(o.out)
	if err != nil {
		log.Fatal(err)
	}
	defer out.Close()
	res := &results{enc: json.NewEncoder(out)}
	for _, ks := range strings.Split(o.keys, ",") {
		k, err := strconv.Atoi(strings.TrimSpace(ks))
		if err != nil || k <= 0 {
			log.Fatalf("bad -keys entry %q", ks)
		}
		if err := size(context.Background(), o, *run, k, res); err != nil {
			log.Fatalf("%d keys: %v", k, err)
		}
	}
	if o.md != "" {
		if err := os.WriteFile(o.md, res.markdown(o), 0o644); err != nil {
			log.Fatal(err)
		}
	}
}

// results collects what size measured and writes it as JSON lines.
type results struct {
	enc   *json.Encoder
	kills []kill
	reads []stateRead
}

func (r *results) kill(k kill) error {
	r.kills = append(r.kills, k)
	return r.enc.Encode(k)
}

func (r *results) read(s stateRead) error {
	r.reads = append(r.reads, s)
	return r.enc.Encode(s)
}

// markdown is the summary table: per state size the median and range of
// each measure over the kills.
func (r *results) markdown(o options) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "| keys of state | kills | SIGKILL → first new committed output, ms | start → restored, ms | restore `took`, ms | restored → first checkpoint, ms | restored → first new output, ms | plain read of the state topic, ms (records) |\n")
	fmt.Fprintf(&b, "|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, sr := range r.reads {
		var ks []kill
		for _, k := range r.kills {
			if k.Keys == sr.Keys {
				ks = append(ks, k)
			}
		}
		col := func(f func(kill) float64) string {
			v := make([]float64, len(ks))
			for i, k := range ks {
				v[i] = f(k)
			}
			return medRange(v)
		}
		fmt.Fprintf(&b, "| %d | %d | %s | %s | %s | %s | %s | %.0f (%d) |\n", sr.Keys, len(ks),
			col(func(k kill) float64 { return k.KillToFirstOutputMs }),
			col(func(k kill) float64 { return k.StartToRestoredMs }),
			col(func(k kill) float64 { return k.RestoreTookMs }),
			col(func(k kill) float64 { return k.RestoredToFirstCommitMs }),
			col(func(k kill) float64 { return k.RestoredToFirstOutputMs }),
			sr.Ms, sr.Records)
	}
	fmt.Fprintf(&b, "\nMedian [min–max] over the kills. Input flowing at %d records/s, %d partitions, exactly_once, 1s checkpoints.\n", o.rate, o.partitions)
	return []byte(b.String())
}

func medRange(v []float64) string {
	if len(v) == 0 {
		return "—"
	}
	s := slices.Clone(v)
	slices.Sort(s)
	med := s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return fmt.Sprintf("%.0f [%.0f–%.0f]", med, s[0], s[len(s)-1])
}

// size runs the kills for one state size.
func size(ctx context.Context, o options, run string, keys int, res *results) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(o.brokers, ",")...),
		kgo.ProducerLinger(5*time.Millisecond), kgo.MaxBufferedRecords(200_000))
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	job := fmt.Sprintf("recovery-%s-%d", run, keys)
	in, outTopic := job+"-in", job+"-out"
	for _, t := range []string{in, outTopic} {
		if _, err := adm.CreateTopic(ctx, int32(o.partitions), -1, nil, t); err != nil {
			return fmt.Errorf("create %s: %w", t, err)
		}
	}
	if !o.keep {
		defer func() {
			ts, err := adm.ListTopics(context.Background())
			if err != nil {
				return
			}
			var del []string
			for _, t := range ts.Names() {
				if strings.HasPrefix(t, job) {
					del = append(del, t)
				}
			}
			adm.DeleteTopics(context.Background(), del...)
		}()
	}

	log.Printf("%d keys: producing one record per key to %s", keys, in)
	start := time.Now()
	var perr atomic.Value
	for i := range keys {
		k := "k" + strconv.Itoa(i)
		cl.Produce(ctx, &kgo.Record{Topic: in, Key: []byte(k), Value: datagen.Event(k, 1, time.Now().UnixMilli(), 100)}, func(_ *kgo.Record, err error) {
			if err != nil {
				perr.Store(err)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		return err
	}
	if e, ok := perr.Load().(error); ok {
		return e
	}
	log.Printf("%d keys: produced in %s", keys, time.Since(start).Round(time.Millisecond))

	rd, err := newReader(o.brokers, outTopic)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer rd.close()
	go rd.run(ctx)

	env := []string{"JOB_NAME=" + job, "GUARANTEE=exactly_once", "CHECKPOINT_INTERVAL=1s",
		"KAFKA_BROKERS=" + o.brokers, "INPUT_TOPIC=" + in, "OUTPUT_TOPIC=" + outTopic,
		"ADMIN_LISTEN=off", "LOG_LEVEL=debug"}
	p, err := startPipeline(o, env, fmt.Sprintf("%s-0", job))
	if err != nil {
		return err
	}
	defer func() { p.stop() }()
	// The state is built and committed once every output of the K
	// records is visible (they commit in the same transactions).
	// 5 minutes, or more for states that take longer to build at a
	// pessimistic 20,000 keys a second (10M keys: 500 s).
	if err := rd.waitCount(ctx, int64(keys), max(5*time.Minute, time.Duration(keys/20_000)*time.Second), p); err != nil {
		return fmt.Errorf("building the state (log %s): %w", p.logPath, err)
	}
	log.Printf("%d keys: state built (%d outputs visible) in %s", keys, rd.count.Load(), time.Since(start).Round(time.Millisecond))

	// Input keeps flowing from here on.
	go produceSteadily(ctx, cl, in, keys, o.rate)
	time.Sleep(o.settle)

	for rep := 1; rep <= o.reps; rep++ {
		load, _ := os.ReadFile("/proc/loadavg")
		k := kill{Keys: keys, Rep: rep, Load: strings.TrimSpace(string(load))}
		killAt := time.Now()
		if err := p.kill(); err != nil {
			return err
		}
		marks, err := adm.ListEndOffsets(ctx, outTopic)
		if err != nil {
			return fmt.Errorf("high watermarks: %w", err)
		}
		hw := map[int32]int64{}
		marks.Each(func(l kadm.ListedOffset) { hw[l.Partition] = l.Offset })
		first := rd.watch(hw)
		startAt := time.Now()
		p, err = startPipeline(o, env, fmt.Sprintf("%s-%d", job, rep))
		if err != nil {
			return err
		}
		var seen time.Time
		select {
		case seen = <-first:
		case <-p.done:
			return fmt.Errorf("pipeline exited before its first output (log %s): %v", p.logPath, p.err)
		case <-time.After(5 * time.Minute):
			return fmt.Errorf("no new output 5 minutes after the kill (log %s)", p.logPath)
		}
		k.KillToFirstOutputMs = ms(seen.Sub(killAt))
		k.KillToStartMs = ms(startAt.Sub(killAt))
		restoredAt, took, stateKeys, ok := p.restored()
		if !ok {
			return fmt.Errorf("no restored line (log %s)", p.logPath)
		}
		k.StartToRestoredMs = ms(restoredAt.Sub(startAt))
		k.RestoreTookMs = ms(took)
		k.StateKeys = stateKeys
		k.RestoredToFirstOutputMs = ms(seen.Sub(restoredAt))
		time.Sleep(o.settle)
		if at, ok := p.firstCommit(); ok {
			k.RestoredToFirstCommitMs = ms(at.Sub(restoredAt))
		}
		log.Printf("%d keys, kill %d: first new output after %.0f ms (start %.0f, restored +%.0f (took %.0f, %d keys), first commit +%.0f, first output +%.0f)",
			keys, rep, k.KillToFirstOutputMs, k.KillToStartMs, k.StartToRestoredMs, k.RestoreTookMs, k.StateKeys, k.RestoredToFirstCommitMs, k.RestoredToFirstOutputMs)
		if err := res.kill(k); err != nil {
			return err
		}
	}
	if o.profile != "" {
		if err := profileRestart(ctx, o, env, job, keys, p); err != nil {
			return err
		}
	} else {
		p.stop()
	}
	cancel()

	// What a plain read of the state topic costs, with the restore's reader.
	var sr stateRead
	sr.Keys = keys
	t0 := time.Now()
	err = kread.All(context.Background(), []kgo.Opt{kgo.SeedBrokers(strings.Split(o.brokers, ",")...)}, job+"-state", func(r *kgo.Record) error {
		sr.Records++
		sr.Bytes += int64(len(r.Key) + len(r.Value))
		return nil
	})
	if err != nil {
		return fmt.Errorf("reading the state topic: %w", err)
	}
	sr.Ms = ms(time.Since(t0))
	log.Printf("%d keys: plain read of %s-state: %d records, %d bytes in %.0f ms", keys, job, sr.Records, sr.Bytes, sr.Ms)
	return res.read(sr)
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// profileRestart kills p once more and profiles the CPU of the new process
// from its start for 2 s (its restore and the first second after it), via
// the admin listener's /debug/pprof, into o.profile/restore-<keys>.pprof.
// Not counted in the results: the listener and the profiling are extra work.
func profileRestart(ctx context.Context, o options, env []string, job string, keys int, p *pipelineProc) error {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	addr := l.Addr().String()
	l.Close()
	if err := p.kill(); err != nil {
		return err
	}
	q, err := startPipeline(o, append(slices.Clone(env), "ADMIN_LISTEN="+addr), job+"-profiled")
	if err != nil {
		return err
	}
	defer q.stop()
	var resp *http.Response
	for deadline := time.Now().Add(5 * time.Second); ; {
		resp, err = http.Get("http://" + addr + "/debug/pprof/profile?seconds=2")
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("profiling the restart (log %s): %w", q.logPath, err)
	}
	defer resp.Body.Close()
	if err := os.MkdirAll(o.profile, 0o755); err != nil {
		return err
	}
	path := filepath.Join(o.profile, fmt.Sprintf("restore-%d.pprof", keys))
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := io.Copy(f, resp.Body); err != nil {
		return err
	}
	_, took, n, _ := q.restored()
	log.Printf("%d keys: CPU profile of a restart (restore took %s, %d keys) in %s", keys, took, n, path)
	return nil
}

// produceSteadily appends rate records per second with random keys of the
// state until ctx ends.
func produceSteadily(ctx context.Context, cl *kgo.Client, topic string, keys, rate int) {
	rng := rand.New(rand.NewPCG(7, 11))
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	per := max(1, rate/100)
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		for range per {
			k := "k" + strconv.Itoa(rng.IntN(keys))
			cl.Produce(ctx, &kgo.Record{Topic: topic, Key: []byte(k), Value: datagen.Event(k, rng.IntN(1000)+1, time.Now().UnixMilli(), 100)}, nil)
		}
	}
}

// pipelineProc is one pipeline process and what its log said.
type pipelineProc struct {
	cmd     *exec.Cmd
	done    chan struct{} // closed when the process has exited
	err     error         // its exit status, set before done closes
	logPath string

	mu          sync.Mutex
	restoredAt  time.Time
	took        time.Duration
	stateKeys   int64
	haveRestore bool
	commitAt    time.Time
}

var (
	restoredLine = regexp.MustCompile(`msg=restored .*state_keys=(\d+).* took=(\S+)`)
	commitLine   = regexp.MustCompile(`msg="checkpoint completed"`)
)

func startPipeline(o options, env []string, name string) (*pipelineProc, error) {
	logf, err := os.CreateTemp("", name+"-*.log")
	if err != nil {
		return nil, err
	}
	p := &pipelineProc{done: make(chan struct{}), logPath: logf.Name()}
	p.cmd = exec.Command(o.pipeline, "run", "-c", o.job)
	p.cmd.Env = append(os.Environ(), env...)
	pr, pw := io.Pipe()
	p.cmd.Stdout, p.cmd.Stderr = pw, pw
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", o.pipeline, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		pw.Close()
		close(p.done)
	}()
	go func() {
		defer logf.Close()
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			now := time.Now()
			line := sc.Text()
			fmt.Fprintln(logf, line)
			p.mu.Lock()
			if m := restoredLine.FindStringSubmatch(line); m != nil && !p.haveRestore {
				p.restoredAt, p.haveRestore = now, true
				p.stateKeys, _ = strconv.ParseInt(m[1], 10, 64)
				p.took, _ = time.ParseDuration(m[2])
			} else if p.haveRestore && p.commitAt.IsZero() && commitLine.MatchString(line) {
				p.commitAt = now
			}
			p.mu.Unlock()
		}
		io.Copy(io.Discard, pr)
	}()
	return p, nil
}

func (p *pipelineProc) restored() (at time.Time, took time.Duration, keys int64, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.restoredAt, p.took, p.stateKeys, p.haveRestore
}

func (p *pipelineProc) firstCommit() (time.Time, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.commitAt, !p.commitAt.IsZero()
}

// kill sends SIGKILL and waits until the process is gone.
func (p *pipelineProc) kill() error {
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		return err
	}
	<-p.done
	return nil
}

// stop asks for a graceful stop, then kills after 30 s.
func (p *pipelineProc) stop() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
		<-p.done
	}
}

// reader consumes the output read_committed from the start, counting
// records and, once watching, reporting the first record at or past the
// watched offsets.
type reader struct {
	cl    *kgo.Client
	count atomic.Int64

	mu    sync.Mutex
	marks map[int32]int64
	first chan time.Time
}

func newReader(brokers, topic string) (*reader, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(brokers, ",")...),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.FetchMaxWait(50*time.Millisecond),
	)
	if err != nil {
		return nil, err
	}
	return &reader{cl: cl}, nil
}

func (r *reader) close() { r.cl.Close() }

func (r *reader) run(ctx context.Context) {
	for ctx.Err() == nil {
		fs := r.cl.PollFetches(ctx)
		now := time.Now()
		fs.EachRecord(func(rec *kgo.Record) {
			r.count.Add(1)
			r.mu.Lock()
			if r.first != nil {
				if m, ok := r.marks[rec.Partition]; ok && rec.Offset >= m {
					r.first <- now
					r.first = nil
				}
			}
			r.mu.Unlock()
		})
	}
}

// watch reports, once, when a record at or past marks arrives.
func (r *reader) watch(marks map[int32]int64) <-chan time.Time {
	c := make(chan time.Time, 1)
	r.mu.Lock()
	r.marks, r.first = marks, c
	r.mu.Unlock()
	return c
}

// waitCount waits until n records were read.
func (r *reader) waitCount(ctx context.Context, n int64, limit time.Duration, p *pipelineProc) error {
	deadline := time.Now().Add(limit)
	for r.count.Load() < n {
		select {
		case <-p.done:
			return fmt.Errorf("pipeline exited: %v", p.err)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d outputs after %s", r.count.Load(), n, limit)
		}
	}
	return nil
}
