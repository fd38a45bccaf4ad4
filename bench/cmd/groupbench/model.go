package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// The scaling model (issue 35, item 4). On this machine every pipeline
// process and the broker share nproc CPUs, so a CPU-bound run drains at
// about
//
//	records/s ≈ nproc / (pipeline CPU per record + broker CPU per record)
//
// whatever the number of processes: more processes add no CPU here, only
// a share of the work each. Both terms are measured per run (the
// processes' and the broker's CPU over the run, /proc/<pid>/stat), and so
// is what a repartitioning run costs the broker: the Kafka records (with
// transaction markers) its repartition topic took per input. The model's
// prediction is printed beside what was measured; where they part, the
// run was not CPU-bound (waiting on the broker, on commits) or the
// machine was shared.

// cpuTime is the CPU time process pid used so far (user + system);
// zero when it cannot be read.
func cpuTime(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The fields after the command name, which is in parentheses.
	i := strings.LastIndexByte(string(b), ')')
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+s) * 10 * time.Millisecond // USER_HZ is 100 on Linux
}

// findBroker is the pid of the one process whose command line runs
// Kafka's broker (kafka.Kafka); 0 when there is none or several (which
// one the runs talk to, only -broker-pid can say).
func findBroker() int {
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	var pids []int
	for _, d := range dirs {
		cmd, err := os.ReadFile(filepath.Join(d, "cmdline"))
		if err != nil || !strings.Contains(string(cmd), "kafka.Kafka") {
			continue
		}
		if pid, err := strconv.Atoi(filepath.Base(d)); err == nil {
			pids = append(pids, pid)
		}
	}
	if len(pids) != 1 {
		if len(pids) > 1 {
			log.Printf("groupbench: %d Kafka brokers run here (pids %v): give the one at -brokers with -broker-pid to measure its CPU", len(pids), pids)
		}
		return 0
	}
	return pids[0]
}

// pinnedCPU is the CPU process id runs on under -pin: p0, p1... and a, b,
// c in turn over the machine's CPUs.
func pinnedCPU(id string, ncpu int) int {
	n := 0
	if strings.HasPrefix(id, "p") {
		n, _ = strconv.Atoi(id[1:])
	} else if len(id) == 1 {
		n = int(id[0] - 'a')
	}
	return n % max(ncpu, 1)
}

// repartitionRecords is how many Kafka records (inputs or bundles, and
// transaction markers) the run's repartition topic took (0 when it has
// none).
func (r *run) repartitionRecords() int64 {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ends, err := r.adm.ListEndOffsets(ctx, r.name+"-repartition")
	if err != nil {
		return 0
	}
	var n int64
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err == nil {
			n += o.Offset
		}
	})
	return n
}

// modelRow is one contender's medians over the rounds.
type modelRow struct {
	name                 string
	procs                int
	pipelineUs, brokerUs float64 // CPU per record
	measured             float64 // records/s
}

// modelTable compares each contender's median throughput with the
// model's prediction from its median CPU per record.
func modelTable(ncpu int, rows []modelRow) string {
	var md strings.Builder
	fmt.Fprintf(&md, "\n## Model: nproc / CPU per record (nproc %d)\n\n", ncpu)
	md.WriteString("Medians over the rounds. Predicted: the records/s that the pipeline's and the broker's CPU per record allow when the run is CPU-bound and has every CPU of the machine (bench/cmd/groupbench/model.go).\n\n")
	md.WriteString("| mode | processes | pipeline CPU µs/record | broker CPU µs/record | predicted records/s | measured records/s | measured / predicted |\n|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		pred := 0.0
		if t := r.pipelineUs + r.brokerUs; t > 0 {
			pred = float64(ncpu) * 1e6 / t
		}
		ratio := 0.0
		if pred > 0 {
			ratio = r.measured / pred
		}
		fmt.Fprintf(&md, "| %s | %d | %.2f | %.2f | %.0f | %.0f | %.2f |\n", r.name, r.procs, r.pipelineUs, r.brokerUs, pred, r.measured, ratio)
	}
	return md.String()
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(xs))
	return s[len(s)/2]
}
