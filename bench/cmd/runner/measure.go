package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/internal/kread"

	"github.com/eoflow/pipeline/bench/benchresult"
	"github.com/eoflow/pipeline/bench/shape"
)

// result is one contender's line in the raw results.
type result = benchresult.Result

func measure(ctx context.Context, o options, adm *kadm.Client, sizes *inputSizes, c contender) (result, error) {
	r := result{Name: c.Name, Kind: c.Kind, Job: c.Job, Guarantee: c.Guar, Interval: c.Interval}
	id := "bench-" + o.run + "-" + c.Name
	out := id + "-out"
	windowed := c.Job == "windowed"
	if windowed {
		o.input = o.windowedInput
	}
	if c.Job == "keyed-sum-avro" {
		// Its own input, and no latency probe: the probe records are JSON.
		o.input, o.probe = o.avroInput, 0
	}
	var join *joinCheck
	if c.Job == "join-enrich" {
		// Its own input, judged against the table; no latency probe (the
		// probe records are not orders).
		o.input, o.probe = o.joinOrders, 0
		tiers, err := readTiers(ctx, o.brokers, o.joinTable)
		if err != nil {
			return r, err
		}
		join = newJoinCheck(tiers)
	}
	ends, err := adm.ListEndOffsets(ctx, o.input)
	if err != nil {
		return r, fmt.Errorf("input end offsets: %w", err)
	}
	var total int64
	ends.Each(func(l kadm.ListedOffset) { total += l.Offset })
	if total == 0 {
		return r, errors.New("input topic is empty: run the workload first")
	}
	if o.countBytes {
		if r.InputBytes, err = sizes.bytes(ctx, o.brokers, o.input, total); err != nil {
			return r, err
		}
	}
	// The brokers stamp every output with the time they appended it, so
	// the first write is read off the output itself: polling the high
	// watermark for it lagged on a loaded machine, by up to the whole run
	// (0 or over a million records/s for the same contender).
	appendTime := "LogAppendTime"
	if _, err := adm.CreateTopic(ctx, int32(o.partitions), -1, map[string]*string{"message.timestamp.type": &appendTime}, out); err != nil {
		return r, fmt.Errorf("create %s: %w", out, err)
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	rd, err := newReader(o.brokers, out)
	if err != nil {
		return r, err
	}
	rd.windowed, rd.join = windowed, join
	defer rd.close()
	go rd.run(ctx)

	argv, env := c.Cmd(out, id)
	logf, err := os.CreateTemp("", "bench-"+c.Name+"-*.log")
	if err != nil {
		return r, err
	}
	defer logf.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return r, fmt.Errorf("start %s: %w", argv[0], err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	pid := cmd.Process.Pid
	smp := &sampler{pid: pid}
	go smp.run(ctx)
	defer func() { stop(cmd, exited) }()

	// Drain. A windowed contender writes one output per (key, window),
	// as many as the workload counted; the input's sentinels close the
	// last windows.
	outputs := total
	if windowed {
		if outputs, err = expectedWindows(ctx, o); err != nil {
			return r, err
		}
	}
	if err := rd.waitFor(ctx, outputs, o.idle, exited); err != nil {
		return r, fmt.Errorf("drain %d records into %d outputs (log %s): %w", total, outputs, logf.Name(), err)
	}
	smp.sample()
	last := time.Unix(0, rd.lastAt.Load())
	r.Records = total
	r.Seconds = last.Sub(time.Unix(0, rd.firstAppend.Load())).Seconds()
	if r.Seconds > 0 {
		r.RecordsPerSec = float64(total) / r.Seconds
	}
	cpu, hwm := smp.get()
	r.CPUSeconds = cpu
	r.CPUSecPerMillion = cpu / (float64(total) / 1e6)
	r.PeakRSSMiB = float64(hwm) / 1024
	if r.Seconds > 0 {
		r.MBPerSec = float64(r.InputBytes) / r.Seconds / 1e6
	}
	if c.Kind == "pipeline" {
		// Still running: its metrics as of the end of the drain.
		if url := metricsURL(logf.Name()); url == "" {
			log.Printf("runner: %s: no admin listener in its log %s: no checkpoint metrics", c.Name, logf.Name())
		} else if m, err := scrape(ctx, url); err != nil {
			log.Printf("runner: %s: metrics: %v", c.Name, err)
		} else {
			addCheckpointMetrics(&r, m)
		}
	}

	if windowed {
		return measureWindowLatency(ctx, o, rd, r, outputs, logf.Name())
	}
	// Latency probe.
	if c.Daemon && o.probe > 0 {
		probeStart := time.Now().UnixMilli()
		rd.probeFrom.Store(probeStart)
		pb, err := produceProbe(ctx, o, o.probe)
		if err != nil {
			return r, fmt.Errorf("probe: %w", err)
		}
		sizes.add(o.input, int64(o.probe), pb)
		if err := rd.waitFor(ctx, total+int64(o.probe), 30*time.Second, exited); err != nil {
			return r, fmt.Errorf("probe outputs (log %s): %w", logf.Name(), err)
		}
		lat := rd.latencies()
		r.LatencySamples = len(lat)
		r.LatencyP50ms, r.LatencyP99ms = pct(lat, 0.50), pct(lat, 0.99)
	}
	// One output per input, not at least one: a contender that repeats
	// outputs has not done the job it is timed on. A repeat can only come
	// with a later commit, so give it a commit interval or two to show.
	want := total
	if c.Daemon && o.probe > 0 {
		want += int64(o.probe)
	}
	time.Sleep(duplicateGrace)
	if got := rd.count.Load(); got != want {
		return r, fmt.Errorf("%d outputs for %d inputs: %d repeated (log %s)", got, want, got-want, logf.Name())
	}
	if join != nil {
		r.JoinTiers = join.tally()
		if err := join.err(); err != nil {
			return r, fmt.Errorf("%w (log %s)", err, logf.Name())
		}
	}
	os.Remove(logf.Name())
	return r, nil
}

// duplicateGrace is how long the reader keeps reading after the last
// expected output, to catch repeats committed after it.
const duplicateGrace = 2500 * time.Millisecond

// cleanup deletes every topic of one contender (its output, the pipeline's
// checkpoint, state and dead-letter topics, Kafka Streams' changelogs), so
// a full run does not fill the disk.
func cleanup(ctx context.Context, adm *kadm.Client, prefix string) {
	ts, err := adm.ListTopics(ctx)
	if err != nil {
		return
	}
	var del []string
	for _, t := range ts.Names() {
		if strings.HasPrefix(t, prefix) {
			del = append(del, t)
		}
	}
	if len(del) > 0 {
		_, _ = adm.DeleteTopics(ctx, del...)
	}
}

func stop(cmd *exec.Cmd, exited chan error) {
	select {
	case <-exited:
		return
	default:
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		<-exited
	}
}

func pct(v []float64, p float64) float64 {
	if len(v) == 0 {
		return 0
	}
	slices.Sort(v)
	i := int(p * float64(len(v)-1))
	return v[i]
}

// produceProbe appends n records with ts = now at o.probeRate per second,
// and returns their bytes (keys and values). They are small flat records,
// or with -shape wide records of the input's shape and size.
func produceProbe(ctx context.Context, o options, n int) (int64, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(o.brokers, ",")...),
		kgo.DefaultProduceTopic(o.input), kgo.ProducerLinger(0))
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	var bytes int64
	tick := time.Second / 100 // send in 100 slices a second
	per := max(1, o.probeRate/100)
	start := time.Now()
	var wg sync.WaitGroup
	var perr atomic.Value
	for sent := 0; sent < n; {
		for i := 0; i < per && sent < n; i++ {
			k := "k" + strconv.Itoa(rng.IntN(o.keys))
			var v []byte
			if o.shape == "wide" {
				v = shape.Wide(nil, k, rng.IntN(1000)+1, time.Now().UnixMilli(), o.size, rng)
			} else {
				v = fmt.Appendf(nil, `{"key":"%s","amount":%d,"ts":%d,"pad":"probe"}`, k, rng.IntN(1000)+1, time.Now().UnixMilli())
			}
			bytes += int64(len(k) + len(v))
			wg.Add(1)
			cl.Produce(ctx, &kgo.Record{Key: []byte(k), Value: v}, func(_ *kgo.Record, err error) {
				if err != nil {
					perr.Store(err)
				}
				wg.Done()
			})
			sent++
		}
		next := start.Add(time.Duration(sent/per) * tick)
		time.Sleep(time.Until(next))
	}
	wg.Wait()
	if e, ok := perr.Load().(error); ok {
		return bytes, e
	}
	return bytes, nil
}

// reader is the independent read_committed reader of one output topic.
type reader struct {
	cl     *kgo.Client
	count  atomic.Int64
	lastAt atomic.Int64 // unix ns of the last record seen
	// firstAppend is the earliest append time of an output (unix ns):
	// when the contender's first write reached the brokers.
	firstAppend atomic.Int64
	probeFrom   atomic.Int64 // unix ms; records with ts >= this are probes
	// windowed: outputs are windows; the latency of one whose window ends
	// at or after probeFrom is from its window_end to now.
	windowed bool
	// join, when set, judges every output of a join contender.
	join *joinCheck
	mu   sync.Mutex
	lat  []float64 // ms
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
	r := &reader{cl: cl}
	r.probeFrom.Store(1 << 62)
	return r, nil
}

func (r *reader) close() { r.cl.Close() }

func (r *reader) run(ctx context.Context) {
	for ctx.Err() == nil {
		fs := r.cl.PollFetches(ctx)
		now := time.Now()
		from := r.probeFrom.Load()
		var n int64
		fs.EachRecord(func(rec *kgo.Record) {
			n++
			if at := rec.Timestamp.UnixNano(); r.firstAppend.Load() == 0 || at < r.firstAppend.Load() {
				r.firstAppend.Store(at) // only this goroutine writes it
			}
			if r.join != nil {
				r.join.check(rec.Key, rec.Value)
			}
			ts := tsOf(rec.Value)
			if r.windowed {
				ts = windowEndOf(rec.Value)
			}
			if ts >= from {
				r.mu.Lock()
				r.lat = append(r.lat, float64(now.UnixMilli()-ts))
				r.mu.Unlock()
			}
		})
		if n > 0 {
			r.lastAt.Store(now.UnixNano())
			r.count.Add(n)
		}
	}
}

func (r *reader) latencies() []float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.lat)
}

// waitFor waits until the reader has seen n records; it gives up after idle
// without progress. A contender that exits is given the idle time to let its
// last transaction show.
func (r *reader) waitFor(ctx context.Context, n int64, idle time.Duration, exited chan error) error {
	seen, since := r.count.Load(), time.Now()
	for {
		c := r.count.Load()
		if c >= n {
			return nil
		}
		if c != seen {
			seen, since = c, time.Now()
		}
		if time.Since(since) > idle {
			return fmt.Errorf("stalled at %d of %d outputs for %s", c, n, idle)
		}
		select {
		case err := <-exited:
			exited <- err // keep it for stop()
			if time.Since(since) > 5*time.Second {
				return fmt.Errorf("contender exited (%v) at %d of %d outputs", err, c, n)
			}
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// sampler keeps the last /proc readings of a process, so they survive its exit.
type sampler struct {
	pid int
	mu  sync.Mutex
	cpu float64 // seconds
	hwm int64   // KiB
}

func (s *sampler) run(ctx context.Context) {
	for ctx.Err() == nil {
		s.sample()
		time.Sleep(50 * time.Millisecond)
	}
}

// sample reads the CPU and peak memory of the process and of every
// process under it (a contender of several processes, bench/cmd/procs):
// their sums. CPU only grows, so the largest sum read is kept: a child
// that exited takes its CPU with it.
func (s *sampler) sample() {
	var cpu float64
	var hwm int64
	for _, pid := range append([]int{s.pid}, descendants(s.pid)...) {
		c, ok := processCPU(pid)
		if !ok {
			if pid == s.pid {
				return
			}
			continue
		}
		cpu += c
		status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(status), "\n") {
			if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
				kib, _ := strconv.ParseInt(strings.Fields(v)[0], 10, 64)
				hwm += kib
			}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cpu = max(s.cpu, cpu)
	s.hwm = max(s.hwm, hwm)
}

// descendants are the processes under pid, children first (from
// /proc/<pid>/task/<tid>/children).
func descendants(pid int) []int {
	var out []int
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if child, err := strconv.Atoi(f); err == nil {
				out = append(out, child)
				out = append(out, descendants(child)...)
			}
		}
	}
	return out
}

// processCPU is the user+system CPU seconds of process pid so far, from
// /proc (false: it cannot be read).
func processCPU(pid int) (float64, bool) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	// Fields after the ")" of comm: state is field 3; utime 14, stime 15.
	f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+2:]))
	if len(f) < 13 {
		return 0, false
	}
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / clkTck, true
}

// clkTck is USER_HZ, 100 on every Linux the bench runs on.
const clkTck = 100

func (s *sampler) get() (float64, int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cpu, s.hwm
}

// measureWindowLatency is the latency probe of a windowed contender: for
// o.probe/o.probeRate seconds, records with ts = now, then one record per
// partition 5 s of event time later so that the probe's windows close.
// The latency of a window is the time its result became visible minus its
// end (wall clock, since its records' event time is): what the watermark,
// the window's firing and the commit add after the window is complete.
// Before the probe, the drained outputs must have been exactly the
// expected number.
func measureWindowLatency(ctx context.Context, o options, rd *reader, r result, drained int64, logName string) (result, error) {
	time.Sleep(duplicateGrace)
	if got := rd.count.Load(); got != drained {
		return r, fmt.Errorf("%d window outputs, want %d: %d repeated (log %s)", got, drained, got-drained, logName)
	}
	if o.probe <= 0 {
		return r, nil
	}
	rd.probeFrom.Store(time.Now().UnixMilli())
	if _, err := produceProbe(ctx, o, o.probe); err != nil {
		return r, fmt.Errorf("probe: %w", err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(o.brokers, ",")...), kgo.DefaultProduceTopic(o.input), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		return r, err
	}
	defer cl.Close()
	closeAt := time.Now().Add(5 * time.Second).UnixMilli()
	for p := range int32(o.partitions) {
		k := fmt.Sprintf("sentinel-%d", p) // one key per partition, as the workload's
		v := fmt.Appendf(nil, `{"key":"%s","amount":0,"ts":%d,"pad":"probe"}`, k, closeAt)
		if err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte(k), Partition: p, Value: v}).FirstErr(); err != nil {
			return r, fmt.Errorf("probe sentinel: %w", err)
		}
	}
	// The probe's windows: at most one per key and second; wait until the
	// outputs stop coming.
	for last, since := rd.count.Load(), time.Now(); time.Since(since) < 3*time.Second; time.Sleep(100 * time.Millisecond) {
		if n := rd.count.Load(); n != last {
			last, since = n, time.Now()
		}
	}
	lat := rd.latencies()
	r.LatencySamples = len(lat)
	r.LatencyP50ms, r.LatencyP99ms = pct(lat, 0.50), pct(lat, 0.99)
	return r, nil
}

// expectedWindows is how many (key, 1 s window) outputs the windowed input
// gives as it stands: the windows that end at or before the least of the
// partitions' largest ts (the watermark with no out-of-orderness). Every
// batch of records appended to it (the workload, each contender's probe)
// ends with a record per partition at one later ts, so that is each
// partition's largest too, and every engine closes the same windows.
func expectedWindows(ctx context.Context, o options) (int64, error) {
	type window struct {
		key string
		sec int64
	}
	windows := map[window]struct{}{}
	largest := map[int32]int64{}
	err := kread.All(ctx, []kgo.Opt{kgo.SeedBrokers(strings.Split(o.brokers, ",")...)}, o.input, func(r *kgo.Record) error {
		ts := tsOf(r.Value)
		windows[window{string(r.Key), ts / 1000}] = struct{}{}
		largest[r.Partition] = max(largest[r.Partition], ts)
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("reading the windowed input: %w", err)
	}
	wm := int64(math.MaxInt64)
	for _, ts := range largest {
		wm = min(wm, ts)
	}
	var n int64
	for w := range windows {
		if (w.sec+1)*1000 <= wm {
			n++
		}
	}
	if o.windowedExpect > 0 && n < o.windowedExpect {
		return 0, fmt.Errorf("the windowed input gives %d windows, fewer than the workload's %d", n, o.windowedExpect)
	}
	return n, nil
}
