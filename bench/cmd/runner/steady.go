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
// Steady state leaves those out, so two builds' CPU per record compare to
// within a few percent in one session (bench/compare.sh), where a 5M drain
// moved by ±15%. The input must outlast warmup + window at the fastest
// contender's rate; a contender that reaches its end is an error.
func measureSteady(ctx context.Context, o options, adm *kadm.Client, c contender) (result, error) {
	r := result{Name: c.Name, Kind: c.Kind, Job: c.Job, Guarantee: c.Guar, Interval: c.Interval, Steady: true}
	if !c.Daemon {
		return r, errors.New("steady state needs a contender that keeps running")
	}
	id := "bench-" + o.run + "-" + c.Name
	out := id + "-out"
	ends, err := adm.ListEndOffsets(ctx, o.input)
	if err != nil {
		return r, fmt.Errorf("input end offsets: %w", err)
	}
	var total int64
	ends.Each(func(l kadm.ListedOffset) { total += l.Offset })
	if _, err := adm.CreateTopic(ctx, int32(o.partitions), -1, nil, out); err != nil {
		return r, fmt.Errorf("create %s: %w", out, err)
	}
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
	defer func() { stop(cmd, exited) }()
	brokers := brokerPIDs()

	produced := func() (int64, error) {
		ends, err := adm.ListEndOffsets(ctx, out)
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
	wait := func(d time.Duration) error {
		select {
		case err := <-exited:
			exited <- err
			return fmt.Errorf("contender exited (%v); log %s", err, logf.Name())
		case <-time.After(d):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if err := wait(o.warmup); err != nil {
		return r, err
	}
	n0, err := produced()
	if err != nil {
		return r, err
	}
	cpu0, b0, t0 := cpuSeconds(cmd.Process.Pid), cpuSeconds(brokers...), time.Now()
	if err := wait(o.window); err != nil {
		return r, err
	}
	n1, err := produced()
	if err != nil {
		return r, err
	}
	cpu1, b1, t1 := cpuSeconds(cmd.Process.Pid), cpuSeconds(brokers...), time.Now()
	if n1 >= total {
		return r, fmt.Errorf("the input (%d records) ran out before the window ended: give it more records", total)
	}
	if n1 == n0 {
		return r, fmt.Errorf("no output during the window (log %s)", logf.Name())
	}
	r.Records = n1 - n0
	r.Seconds = t1.Sub(t0).Seconds()
	r.RecordsPerSec = float64(r.Records) / r.Seconds
	r.CPUSeconds = cpu1 - cpu0
	r.CPUSecPerMillion = r.CPUSeconds / (float64(r.Records) / 1e6)
	if len(brokers) > 0 {
		r.BrokerCPUSecPerMillion = (b1 - b0) / (float64(r.Records) / 1e6)
	}
	os.Remove(logf.Name())
	return r, nil
}

// cpuSeconds is the user+system CPU of the processes so far (a process
// that cannot be read counts 0).
func cpuSeconds(pids ...int) float64 {
	var sum float64
	for _, pid := range pids {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		// Fields after the ")" of comm: utime is field 14, stime 15.
		f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+2:]))
		if len(f) < 13 {
			continue
		}
		ut, _ := strconv.ParseFloat(f[11], 64)
		st, _ := strconv.ParseFloat(f[12], 64)
		sum += (ut + st) / clkTck
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
