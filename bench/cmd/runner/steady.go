package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// measureSteady measures a contender at its steady state instead of over a
// whole drain: it starts the contender on a fresh output topic, lets it
// run for o.warmup, then counts over o.window the records it produced
// (the output's high watermarks, which move with every produced record,
// committed or not) and the CPU it and the broker used.
//
// The drain's records/s include start-up, the ramp of the first fetches
// and, under exactly_once, the wait for the last commit: up to a whole
// checkpoint interval, a fixed cost that weighs more the smaller the input.
// Steady state leaves those out. The input must outlast warmup + window at
// the fastest contender's rate; a contender that reaches its end is an
// error.
func measureSteady(ctx context.Context, o options, adm *kadm.Client, c contender) (result, error) {
	rs, err := measureTogether(ctx, o, adm, []contender{c})
	return rs[0], err
}

// measureTogether is measureSteady for contenders that run at the same
// time, over the same window, each on a topic of its own: two builds of
// the pipeline side by side (runner -pair-with) meet the same machine,
// whose speed on a shared host drifts by ±15% within minutes, so that
// their ratio holds where one after the other it would not. Each gets
// about its share of the cores, so its records/s is not its rate alone;
// its CPU per record is. The brokers' CPU is shared out by records.
func measureTogether(ctx context.Context, o options, adm *kadm.Client, cs []contender) ([]result, error) {
	rs := make([]result, len(cs))
	for i, c := range cs {
		rs[i] = result{Name: c.Name, Kind: c.Kind, Job: c.Job, Guarantee: c.Guar, Interval: c.Interval, Steady: true}
		if !c.Daemon {
			return rs, errors.New("steady state needs a contender that keeps running")
		}
	}
	ends, err := adm.ListEndOffsets(ctx, o.input)
	if err != nil {
		return rs, fmt.Errorf("input end offsets: %w", err)
	}
	var total int64
	ends.Each(func(l kadm.ListedOffset) { total += l.Offset })
	var runs []*steadyRun
	defer func() {
		for _, r := range runs {
			stop(r.cmd, r.exited)
			r.log.Close()
		}
	}()
	for _, c := range cs {
		r, err := startSteady(ctx, o, adm, c)
		if err != nil {
			return rs, err
		}
		runs = append(runs, r)
	}
	brokers := brokerPIDs()
	wait := func(d time.Duration) error {
		deadline := time.After(d)
		for {
			for _, r := range runs {
				select {
				case err := <-r.exited:
					r.exited <- err
					return fmt.Errorf("%s exited (%v); log %s", r.name, err, r.log.Name())
				default:
				}
			}
			select {
			case <-deadline:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	// sample reads every contender's output count and CPU, then the
	// brokers' CPU, as close together as the reads allow.
	type sample struct {
		n   []int64
		cpu []float64
		b   float64
		at  time.Time
	}
	take := func() (sample, error) {
		s := sample{at: time.Now()}
		for _, r := range runs {
			n, err := r.produced(ctx, adm)
			if err != nil {
				return s, err
			}
			s.n, s.cpu = append(s.n, n), append(s.cpu, cpuSeconds(r.cmd.Process.Pid))
		}
		s.b = cpuSeconds(brokers...)
		return s, nil
	}
	// The warmup starts once every contender wrote its first output: a
	// start (a JVM, a consumer group's first join) may take longer than
	// the warmup on a loaded machine, and a window measured before it
	// ends sees no output at all.
	if err := awaitFirstOutput(ctx, runs, adm, wait); err != nil {
		return rs, err
	}
	if err := wait(o.warmup); err != nil {
		return rs, err
	}
	s0, err := take()
	if err != nil {
		return rs, err
	}
	if err := wait(o.window); err != nil {
		return rs, err
	}
	s1, err := take()
	if err != nil {
		return rs, err
	}
	var all int64
	for i, r := range runs {
		if s1.n[i] >= total {
			return rs, fmt.Errorf("the input (%d records) ran out before the window ended: give it more records", total)
		}
		if s1.n[i] == s0.n[i] {
			return rs, fmt.Errorf("%s: no output during the window (log %s)", r.name, r.log.Name())
		}
		all += s1.n[i] - s0.n[i]
	}
	for i := range runs {
		x := &rs[i]
		x.Records = s1.n[i] - s0.n[i]
		x.Seconds = s1.at.Sub(s0.at).Seconds()
		x.RecordsPerSec = float64(x.Records) / x.Seconds
		x.CPUSeconds = s1.cpu[i] - s0.cpu[i]
		x.CPUSecPerMillion = x.CPUSeconds / (float64(x.Records) / 1e6)
		if len(brokers) > 0 {
			x.BrokerCPUSecPerMillion = (s1.b - s0.b) / (float64(all) / 1e6)
		}
	}
	for _, r := range runs {
		os.Remove(r.log.Name())
	}
	return rs, nil
}

// steadyRun is one contender running for a steady-state measurement.
type steadyRun struct {
	name   string
	out    string // its output topic
	cmd    *exec.Cmd
	exited chan error
	log    *os.File
}

// startSteady starts c on a fresh output topic of its own.
func startSteady(ctx context.Context, o options, adm *kadm.Client, c contender) (*steadyRun, error) {
	id := "bench-" + o.run + "-" + c.Name
	r := &steadyRun{name: c.Name, out: id + "-out", exited: make(chan error, 1)}
	if _, err := adm.CreateTopic(ctx, int32(o.partitions), -1, nil, r.out); err != nil {
		return nil, fmt.Errorf("create %s: %w", r.out, err)
	}
	argv, env := c.Cmd(r.out, id)
	logf, err := os.CreateTemp("", "bench-"+c.Name+"-*.log")
	if err != nil {
		return nil, err
	}
	r.log = logf
	r.cmd = exec.Command(argv[0], argv[1:]...)
	r.cmd.Env = append(os.Environ(), env...)
	r.cmd.Stdout, r.cmd.Stderr = logf, logf
	if err := r.cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start %s: %w", argv[0], err)
	}
	go func() { r.exited <- r.cmd.Wait() }()
	return r, nil
}

// produced is how many records r's output topic holds (its end offsets).
func (r *steadyRun) produced(ctx context.Context, adm *kadm.Client) (int64, error) {
	ends, err := adm.ListEndOffsets(ctx, r.out)
	if err != nil {
		return 0, err
	}
	if err := ends.Error(); err != nil {
		return 0, err
	}
	var n int64
	ends.Each(func(l kadm.ListedOffset) { n += l.Offset })
	return n, nil
}

// cpuSeconds is the user+system CPU of the processes so far (a process
// that cannot be read counts 0).
func cpuSeconds(pids ...int) float64 {
	var sum float64
	for _, pid := range pids {
		cpu, _ := processCPU(pid)
		sum += cpu
	}
	return sum
}

// brokerPIDs finds the local Kafka brokers' processes (kafka.Kafka on the
// java command line), to count their CPU beside the contender's: none
// when the brokers run elsewhere (a remote KAFKA_BOOTSTRAP).
func brokerPIDs() []int {
	var pids []int
	dirs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, d := range dirs {
		b, err := os.ReadFile(d)
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
		for _, a := range args {
			if a == "kafka.Kafka" {
				pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(d)))
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids
}

// firstOutputTimeout bounds how long a contender may take to write its
// first output.
const firstOutputTimeout = 2 * time.Minute

// awaitFirstOutput waits until every run wrote at least one output, polling
// with wait (which fails when a run exited).
func awaitFirstOutput(ctx context.Context, runs []*steadyRun, adm *kadm.Client, wait func(time.Duration) error) error {
	deadline := time.Now().Add(firstOutputTimeout)
	for _, r := range runs {
		for {
			n, err := r.produced(ctx, adm)
			if err != nil {
				return err
			}
			if n > 0 {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%s: no output %v after its start (log %s)", r.name, firstOutputTimeout, r.log.Name())
			}
			if err := wait(50 * time.Millisecond); err != nil {
				return err
			}
		}
	}
	return nil
}
