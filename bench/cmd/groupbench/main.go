// Command groupbench measures group mode (scale.mode: group, issue 14) on
// the keyed sum (bench/jobs/keyed-sum.yaml, exactly_once, 1 s checkpoints):
//
//   - throughput: n pre-produced records with -keys distinct keys, read by
//     1, 2, ... processes of one group-mode job, and by one process of the
//     job with scale.key_by_is_record_key (the input is produced keyed by
//     its group key, so it does not repartition), beside the same job in
//     single mode in the same round (the baseline); -rounds rounds, and
//     the spread of each ratio over them. A run is done when the
//     processes have written one output per input (counted as they became
//     visible). records/s = n / (done - start), start-up included, as the
//     other benchmarks count it.
//
//   - recovery: with 3 processes running and input flowing at -rate, one is
//     SIGKILLed and stays dead; the time until the group's committed offset
//     of any repartition partition it owned moves again is the time to the
//     first new committed output for its partitions (the offsets commit with
//     the outputs). The group waits scale.session_timeout for a static
//     member, so that bounds it from below.
//
//   - restore: a process owning every partition of a job with -restore-keys
//     keys of state is stopped and started again; the restore's "took".
//
//     go run ./bench/cmd/groupbench -brokers 127.0.0.1:9092 -pipeline bin/pipeline
//
// With -table-keys, each job gets a compacted table of that many keys (the
// inputs' keys, tiers as values) for a job that joins it
// (bench/jobs/keyed-sum-join.yaml); -table-mode is its mode in group mode
// (single mode's baseline always holds it broadcast).
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
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/internal/datagen"
)

type options struct {
	brokers, pipeline, job, out string
	n, keys, partitions, rounds int
	procs                       []int
	rate, kills, restoreKeys    int
	sessionTimeout              time.Duration
	// rebalanceKeys are the keys of state of the rebalance measurement
	// (rebalance.go); sections the parts to run.
	rebalanceKeys int
	sections      map[string]bool
	// pin runs process i on CPU i mod nproc (taskset); brokerPID is the
	// broker's pid, whose CPU the throughput runs measure (model.go).
	pin       bool
	brokerPID int
	// tableKeys, tableMode and tablePartitions are the joined table's
	// (tableKeys 0: no table).
	tableKeys, tablePartitions int
	tableMode                  string
}

func main() {
	var o options
	var procs string
	flag.StringVar(&o.brokers, "brokers", os.Getenv("KAFKA_BOOTSTRAP"), "seed brokers")
	flag.StringVar(&o.pipeline, "pipeline", "bin/pipeline", "the pipeline binary")
	flag.StringVar(&o.job, "job", "bench/jobs/keyed-sum.yaml", "the job file")
	flag.StringVar(&o.out, "out", "", "markdown results file (default: stdout)")
	flag.IntVar(&o.n, "n", 2_000_000, "records for the throughput runs")
	flag.IntVar(&o.keys, "keys", 100_000, "distinct keys of the throughput runs")
	flag.IntVar(&o.partitions, "partitions", 8, "input partitions")
	flag.StringVar(&procs, "procs", "1,2,3", "process counts of the throughput runs")
	flag.IntVar(&o.rounds, "rounds", 1, "rounds of the throughput runs (each with its own single-mode baseline)")
	flag.IntVar(&o.rate, "rate", 20_000, "input records/s during the recovery runs")
	flag.IntVar(&o.kills, "kills", 3, "SIGKILLs measured (each on a fresh job)")
	flag.IntVar(&o.restoreKeys, "restore-keys", 1_000_000, "keys of state for the restore measurement (0: skip)")
	flag.DurationVar(&o.sessionTimeout, "session-timeout", 6*time.Second, "scale.session_timeout of the jobs")
	flag.IntVar(&o.rebalanceKeys, "rebalance-keys", 1_000_000, "keys of state for the rebalance measurement")
	sections := flag.String("sections", "throughput,recovery,restore,rebalance", "the measurements to run")
	flag.BoolVar(&o.pin, "pin", false, "run pipeline process i on CPU i mod nproc (taskset); the broker is not pinned")
	flag.IntVar(&o.brokerPID, "broker-pid", 0, "the broker's pid, for its CPU per record (0: the first process running kafka.Kafka on this machine)")
	flag.IntVar(&o.tableKeys, "table-keys", 0, "keys of a table for a job that joins one (e.g. -job bench/jobs/keyed-sum-join.yaml; 0: none)")
	flag.StringVar(&o.tableMode, "table-mode", "broadcast", "tables[].mode of the group-mode runs: broadcast or partitioned")
	flag.IntVar(&o.tablePartitions, "table-partitions", 8, "partitions of the table's topic")
	flag.Parse()
	if o.brokerPID == 0 {
		o.brokerPID = findBroker()
	}
	o.sections = map[string]bool{}
	for _, s := range strings.Split(*sections, ",") {
		o.sections[s] = true
	}
	for _, p := range strings.Split(procs, ",") {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 {
			log.Fatalf("groupbench: -procs %q", procs)
		}
		o.procs = append(o.procs, n)
	}
	if o.brokers == "" {
		log.Fatal("groupbench: -brokers or KAFKA_BOOTSTRAP required")
	}
	var md strings.Builder
	fmt.Fprintf(&md, "# Group mode (scale.mode: group), %s\n\n", time.Now().UTC().Format("2006-01-02"))
	fmt.Fprintf(&md, "Keyed sum (`%s`, exactly_once, 1 s checkpoints), %d input partitions, scale.partitions 8, session timeout %v, on this machine (%d CPUs: every process and the broker share them).\n\n", o.job, o.partitions, o.sessionTimeout, cpus())
	if o.pin {
		md.WriteString("Pinned: pipeline process i ran on CPU i mod nproc (taskset); the broker was not pinned.\n\n")
	}

	if o.sections["throughput"] {
		throughputs(o, &md)
	}
	if o.sections["recovery"] {
		recoveries(o, &md)
	}
	if o.sections["restore"] && o.restoreKeys > 0 {
		took, keys, err := restore(o)
		if err != nil {
			log.Fatalf("groupbench: restore: %v", err)
		}
		fmt.Fprintf(&md, "\n## Restore\n\nOne process owning every partition, %d keys of state restored from `<job>-group-state` (8 partitions) in %v (the `took` of its \"restored\" line: fencing, offsets, waiting for settled state partitions, reading and decoding).\n", keys, took)
	}
	if o.sections["rebalance"] && o.rebalanceKeys > 0 {
		rows, err := rebalance(o)
		if err != nil {
			log.Fatalf("groupbench: rebalance: %v", err)
		}
		md.WriteString(rebalanceTable(o, rows))
	}
	if o.out == "" {
		fmt.Print(md.String())
		return
	}
	if err := os.WriteFile(o.out, []byte(md.String()), 0o644); err != nil {
		log.Fatal(err)
	}
	fmt.Print(md.String())
}

func throughputs(o options, md *strings.Builder) {
	fmt.Fprintf(md, "## Throughput: %d records, %d keys\n\n| round | mode | processes | seconds | records/s | vs single | pipeline CPU s | CPU vs single | broker CPU s | repartition Kafka records per input |\n|---|---|---|---|---|---|---|---|---|---|\n", o.n, o.keys)
	type contender struct {
		name, mode string
		procs      int
		copart     bool
	}
	contenders := []contender{}
	for _, p := range o.procs {
		contenders = append(contenders, contender{"group", "group", p, false})
	}
	contenders = append(contenders, contender{"group, key_by_is_record_key", "group", 1, true})
	ratios, cpuRatios := make([][]float64, len(contenders)), make([][]float64, len(contenders))
	// The model's inputs, per contender (the last is single mode): CPU
	// per record of the pipeline and the broker, and records/s.
	type sample struct{ pipelineUs, brokerUs, rate []float64 }
	samples := make([]sample, len(contenders)+1)
	add := func(i int, d result) {
		n := float64(o.n)
		samples[i].pipelineUs = append(samples[i].pipelineUs, float64(d.cpu.Microseconds())/n)
		samples[i].brokerUs = append(samples[i].brokerUs, float64(d.broker.Microseconds())/n)
		samples[i].rate = append(samples[i].rate, n/d.wall.Seconds())
	}
	perInput := func(d result) string {
		if d.repartition == 0 {
			return "-"
		}
		return fmt.Sprintf("%.4f", float64(d.repartition)/float64(o.n))
	}
	for round := 1; round <= o.rounds; round++ {
		single, err := throughput(o, "single", 1, false)
		if err != nil {
			log.Fatalf("groupbench: single: %v", err)
		}
		add(len(contenders), single)
		fmt.Fprintf(md, "| %d | single | 1 | %.1f | %.0f | 1.00 | %.1f | 1.00 | %.1f | - |\n", round, single.wall.Seconds(), float64(o.n)/single.wall.Seconds(), single.cpu.Seconds(), single.broker.Seconds())
		for i, c := range contenders {
			d, err := throughput(o, c.mode, c.procs, c.copart)
			if err != nil {
				log.Fatalf("groupbench: %s x%d: %v", c.name, c.procs, err)
			}
			add(i, d)
			ratios[i] = append(ratios[i], single.wall.Seconds()/d.wall.Seconds())
			cpuRatios[i] = append(cpuRatios[i], d.cpu.Seconds()/single.cpu.Seconds())
			fmt.Fprintf(md, "| %d | %s | %d | %.1f | %.0f | %.2f | %.1f | %.2f | %.1f | %s |\n", round, c.name, c.procs, d.wall.Seconds(), float64(o.n)/d.wall.Seconds(),
				single.wall.Seconds()/d.wall.Seconds(), d.cpu.Seconds(), d.cpu.Seconds()/single.cpu.Seconds(), d.broker.Seconds(), perInput(d))
		}
	}
	fmt.Fprintf(md, "\n| mode | processes | throughput vs single: min | median | max | pipeline CPU vs single: min | median | max |\n|---|---|---|---|---|---|---|---|\n")
	for i, c := range contenders {
		r := slices.Sorted(slices.Values(ratios[i]))
		u := slices.Sorted(slices.Values(cpuRatios[i]))
		fmt.Fprintf(md, "| %s | %d | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f |\n", c.name, c.procs, r[0], r[len(r)/2], r[len(r)-1], u[0], u[len(u)/2], u[len(u)-1])
	}
	rows := []modelRow{{name: "single", procs: 1}}
	for _, c := range contenders {
		rows = append(rows, modelRow{name: c.name, procs: c.procs})
	}
	for i := range rows {
		s := samples[(i+len(contenders))%(len(contenders)+1)]
		rows[i].pipelineUs, rows[i].brokerUs, rows[i].measured = median(s.pipelineUs), median(s.brokerUs), median(s.rate)
	}
	md.WriteString(modelTable(cpus(), rows))
}

func recoveries(o options, md *strings.Builder) {
	if o.kills > 0 {
		fmt.Fprintf(md, "\n## Recovery: SIGKILL of one of 3 processes, input at %d records/s\n\n| kill | repartition partitions it owned | SIGKILL → first new committed output for them, s | vs session timeout |\n|---|---|---|---|\n", o.rate)
	}
	for i := range o.kills {
		parts, d, err := recovery(o, i)
		if err != nil {
			log.Fatalf("groupbench: recovery %d: %v", i, err)
		}
		fmt.Fprintf(md, "| %d | %v | %.2f | %.2fx |\n", i+1, parts, d.Seconds(), d.Seconds()/o.sessionTimeout.Seconds())
	}
}

func cpus() int {
	out, err := exec.Command("nproc").Output()
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(strings.TrimSpace(string(out)))
	return n
}

// run is one job's topics and environment.
type run struct {
	o             options
	name, in, out string
	mode          string // single or group
	env           []string
	adm           *kadm.Client
	cl            *kgo.Client
	procs         map[string]*proc
}

func newRun(o options, mode string, tag string, copart bool) (*run, error) {
	name := fmt.Sprintf("groupbench-%s-%d", tag, time.Now().UnixNano())
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(o.brokers, ",")...), kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		return nil, err
	}
	r := &run{o: o, name: name, in: name + "-in", out: name + "-out", mode: mode, adm: kadm.NewClient(cl), cl: cl, procs: map[string]*proc{}}
	r.env = []string{
		"KAFKA_BROKERS=" + o.brokers, "JOB_NAME=" + name, "INPUT_TOPIC=" + r.in, "OUTPUT_TOPIC=" + r.out,
		"SCALE_MODE=" + mode, "SCALE_PARTITIONS=8", "SESSION_TIMEOUT=" + o.sessionTimeout.String(),
		"ADMIN_LISTEN=127.0.0.1:0", "LOG_LEVEL=info", "KEY_BY_IS_RECORD_KEY=" + strconv.FormatBool(copart),
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, t := range []struct {
		name  string
		parts int32
	}{{r.in, int32(o.partitions)}, {r.out, 8}} {
		if _, err := r.adm.CreateTopic(ctx, t.parts, -1, nil, t.name); err != nil {
			return nil, err
		}
	}
	if o.tableKeys > 0 {
		if err := r.table(ctx); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// table writes the joined table: keys k0 to k<tableKeys-1>, as produce
// keys the inputs, each {"tier": "t<i mod 4>"}, in a compacted topic of
// its own; single mode holds it broadcast, group mode as -table-mode says.
func (r *run) table(ctx context.Context) error {
	topic := r.name + "-tiers"
	compact := "compact"
	if _, err := r.adm.CreateTopic(ctx, int32(r.o.tablePartitions), -1, map[string]*string{"cleanup.policy": &compact}, topic); err != nil {
		return err
	}
	for i := range r.o.tableKeys {
		r.cl.Produce(ctx, &kgo.Record{Topic: topic, Key: []byte("k" + strconv.Itoa(i)), Value: fmt.Appendf(nil, `{"tier":"t%d"}`, i%4)}, nil)
	}
	if err := r.cl.Flush(ctx); err != nil {
		return err
	}
	mode := r.o.tableMode
	if r.mode == "single" {
		mode = "broadcast"
	}
	r.env = append(r.env, "TABLE_TOPIC="+topic, "TABLE_MODE="+mode)
	return nil
}

func (r *run) close() {
	for _, p := range r.procs {
		p.stop()
	}
	r.cl.Close()
}

// produce writes n records over keys distinct keys, as fast as the broker
// takes them.
func (r *run) produce(n, keys int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	rng := rand.New(rand.NewPCG(1, 2))
	var first error
	var mu sync.Mutex
	for i := range n {
		k := "k" + strconv.Itoa(i%keys)
		if keys >= n {
			k = "k" + strconv.Itoa(i)
		}
		r.cl.Produce(ctx, &kgo.Record{Topic: r.in, Key: []byte(k), Value: datagen.Event(k, rng.IntN(1000)+1, time.Now().UnixMilli(), 100)}, func(_ *kgo.Record, err error) {
			if err != nil {
				mu.Lock()
				first = err
				mu.Unlock()
			}
		})
	}
	if err := r.cl.Flush(ctx); err != nil {
		return err
	}
	return first
}

// caughtUp reports whether the processes wrote n outputs (one per input),
// counted as they became visible (pipeline_records_out_total of the
// output topic, summed over the processes). The group's committed
// offsets cannot say it for the repartition topic: a reader's position
// stops after the last record, before the commit marker that ends the
// log.
func (r *run) caughtUp(ctx context.Context, n int) (bool, error) {
	var total float64
	for _, p := range r.procs {
		v, err := p.recordsOut(ctx, r.out)
		if err != nil {
			return false, err
		}
		total += v
	}
	return total >= float64(n), nil
}

func (r *run) awaitCaughtUp(n int, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		ok, err := r.caughtUp(ctx, n)
		cancel()
		if err == nil && ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("job %s did not catch up within %v (%v)", r.name, limit, err)
		}
		for id, p := range r.procs {
			select {
			case <-p.done:
				return fmt.Errorf("process %s exited: %v; log %s", id, p.err, p.logPath)
			default:
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// result is one throughput run: its wall time, and the CPU time its
// pipeline processes used (user + system, from /proc), which the other
// loads of a shared machine do not inflate as they do the wall time.
type result struct {
	// wall is the drain time, cpu the pipeline processes' CPU over it,
	// broker the broker's (0 without its pid), repartition the Kafka
	// records the repartition topic took (model.go).
	wall, cpu, broker time.Duration
	repartition       int64
}

func throughput(o options, mode string, procs int, copart bool) (result, error) {
	tag := fmt.Sprintf("%s%d", mode, procs)
	if copart {
		tag += "c"
	}
	r, err := newRun(o, mode, tag, copart)
	if err != nil {
		return result{}, err
	}
	defer r.close()
	if err := r.produce(o.n, o.keys); err != nil {
		return result{}, err
	}
	start := time.Now()
	brokerFrom := cpuTime(o.brokerPID)
	for i := range procs {
		id := fmt.Sprintf("p%d", i)
		p, err := startProc(o, r.env, id)
		if err != nil {
			return result{}, err
		}
		r.procs[id] = p
	}
	if err := r.awaitCaughtUp(o.n, 10*time.Minute); err != nil {
		return result{}, err
	}
	d := time.Since(start)
	var broker time.Duration
	if o.brokerPID != 0 {
		broker = cpuTime(o.brokerPID) - brokerFrom
	}
	var cpu time.Duration
	for _, p := range r.procs {
		cpu += p.cpu()
	}
	log.Printf("groupbench: %s x%d (key_by_is_record_key %v): %d records in %v, %v of CPU, broker %v", mode, procs, copart, o.n, d.Round(time.Millisecond), cpu, broker)
	return result{wall: d, cpu: cpu, broker: broker, repartition: r.repartitionRecords()}, nil
}

// recovery runs 3 processes with input flowing, kills the one owning the
// most repartition partitions, and times until the group's committed
// offset of any of them moves.
func recovery(o options, i int) ([]int32, time.Duration, error) {
	r, err := newRun(o, "group", fmt.Sprintf("kill%d", i), false)
	if err != nil {
		return nil, 0, err
	}
	defer r.close()
	var wg sync.WaitGroup
	defer wg.Wait() // after stop: the producer ends with ctx
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	wg.Add(1)
	go func() { defer wg.Done(); r.produceSteadily(ctx, o.rate) }()
	for _, id := range []string{"a", "b", "c"} {
		p, err := startProc(o, r.env, id)
		if err != nil {
			return nil, 0, err
		}
		r.procs[id] = p
	}
	// Warm up: every process running on one stable generation for a
	// while, with checkpoints.
	time.Sleep(3*o.sessionTimeout/2 + 5*time.Second)
	var victim string
	var owned []int32
	for id, p := range r.procs {
		parts, err := p.repartitionOwned(r.name + "-repartition")
		if err != nil {
			return nil, 0, err
		}
		if len(parts) > len(owned) {
			victim, owned = id, parts
		}
	}
	if victim == "" {
		return nil, 0, fmt.Errorf("no process owns a repartition partition")
	}
	before, err := r.committed(r.name + "-repartition")
	if err != nil {
		return nil, 0, err
	}
	killed := time.Now()
	if err := r.procs[victim].kill(); err != nil {
		return nil, 0, err
	}
	delete(r.procs, victim)
	deadline := killed.Add(5 * o.sessionTimeout)
	for time.Now().Before(deadline) {
		now, err := r.committed(r.name + "-repartition")
		if err == nil {
			for _, q := range owned {
				if now[q] > before[q] {
					d := time.Since(killed)
					log.Printf("groupbench: kill %d: %s owned %v; first commit for them %v after SIGKILL", i, victim, owned, d.Round(time.Millisecond))
					return owned, d, nil
				}
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil, 0, fmt.Errorf("no commit for %v within %v of the SIGKILL", owned, 5*o.sessionTimeout)
}

func (r *run) committed(topic string) (map[int32]int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	fetched, err := r.adm.FetchOffsets(ctx, r.name)
	if err != nil {
		return nil, err
	}
	out := map[int32]int64{}
	fetched.Each(func(o kadm.OffsetResponse) {
		if o.Topic == topic && o.Err == nil {
			out[o.Partition] = o.At
		}
	})
	return out, nil
}

func (r *run) produceSteadily(ctx context.Context, rate int) {
	rng := rand.New(rand.NewPCG(3, 4))
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
			k := "k" + strconv.Itoa(rng.IntN(r.o.keys))
			r.cl.Produce(ctx, &kgo.Record{Topic: r.in, Key: []byte(k), Value: datagen.Event(k, rng.IntN(1000)+1, time.Now().UnixMilli(), 100)}, nil)
		}
	}
}

// restore: one process reads keys records with distinct keys, stops
// (final checkpoint), and starts again; the second restore's took.
func restore(o options) (time.Duration, int64, error) {
	r, err := newRun(o, "group", "restore", false)
	if err != nil {
		return 0, 0, err
	}
	defer r.close()
	if err := r.produce(o.restoreKeys, o.restoreKeys); err != nil {
		return 0, 0, err
	}
	p, err := startProc(o, r.env, "a")
	if err != nil {
		return 0, 0, err
	}
	r.procs["a"] = p
	if err := r.awaitCaughtUp(o.restoreKeys, 15*time.Minute); err != nil {
		return 0, 0, err
	}
	p.stop()
	p, err = startProc(o, r.env, "a")
	if err != nil {
		return 0, 0, err
	}
	r.procs["a"] = p
	deadline := time.Now().Add(5 * time.Minute)
	for time.Now().Before(deadline) {
		if took, keys, ok := p.restored(); ok && keys > 0 {
			return took, keys, nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return 0, 0, fmt.Errorf("no restore with state within 5 minutes; log %s", p.logPath)
}

// proc is one pipeline process.
// cpu is the CPU time the process has used so far (utime + stime of
// /proc/<pid>/stat, at the usual 100 ticks a second); 0 where /proc
// cannot tell.
func (p *proc) cpu() time.Duration { return cpuTime(p.cmd.Process.Pid) }

type proc struct {
	cmd     *exec.Cmd
	done    chan struct{}
	err     error
	logPath string

	mu    sync.Mutex
	admin string
	took  time.Duration
	keys  int64
	seen  bool
}

var (
	adminLine    = regexp.MustCompile(`admin listening" metrics=http://([0-9.:]+)/metrics`)
	restoredLine = regexp.MustCompile(`msg=restored .*state_keys=(\d+) .*took=(\S+)`)
)

func startProc(o options, env []string, id string) (*proc, error) {
	logf, err := os.CreateTemp("", "groupbench-"+id+"-*.log")
	if err != nil {
		return nil, err
	}
	p := &proc{done: make(chan struct{}), logPath: logf.Name()}
	p.cmd = exec.Command(o.pipeline, "run", "-c", o.job, "--instance-id", id)
	if o.pin {
		// taskset execs the pipeline in its own process: the pid (and
		// its CPU time) stays the pipeline's.
		p.cmd = exec.Command("taskset", "-c", strconv.Itoa(pinnedCPU(id, cpus())), o.pipeline, "run", "-c", o.job, "--instance-id", id)
	}
	p.cmd.Env = append(os.Environ(), env...)
	pr, pw := io.Pipe()
	p.cmd.Stdout, p.cmd.Stderr = pw, pw
	if err := p.cmd.Start(); err != nil {
		return nil, err
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
			line := sc.Text()
			fmt.Fprintln(logf, line)
			p.mu.Lock()
			if m := adminLine.FindStringSubmatch(line); m != nil {
				p.admin = m[1]
			}
			if m := restoredLine.FindStringSubmatch(line); m != nil {
				p.keys, _ = strconv.ParseInt(m[1], 10, 64)
				p.took, _ = time.ParseDuration(m[2])
				p.seen = true
			}
			p.mu.Unlock()
		}
		io.Copy(io.Discard, pr)
	}()
	return p, nil
}

func (p *proc) restored() (time.Duration, int64, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.took, p.keys, p.seen
}

// recordsOut reads pipeline_records_out_total{topic} from the process's
// /metrics (0 before its admin listener is up).
func (p *proc) recordsOut(ctx context.Context, topic string) (float64, error) {
	p.mu.Lock()
	addr := p.admin
	p.mu.Unlock()
	if addr == "" {
		return 0, nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	label := `topic="` + topic + `"`
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "pipeline_records_out_total{") && strings.Contains(line, label) {
			return strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		}
	}
	return 0, sc.Err()
}

// repartitionOwned asks the process's admin API which partitions of topic
// it owns.
func (p *proc) repartitionOwned(topic string) ([]int32, error) {
	p.mu.Lock()
	addr := p.admin
	p.mu.Unlock()
	if addr == "" {
		return nil, fmt.Errorf("no admin address in %s", p.logPath)
	}
	resp, err := http.Get("http://" + addr + "/api/v1/job")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var st struct {
		Group *struct {
			Assigned []string `json:"assigned"`
		} `json:"group"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return nil, err
	}
	if st.Group == nil {
		return nil, fmt.Errorf("%s: no group in the status", addr)
	}
	var out []int32
	for _, a := range st.Group.Assigned {
		if t, part, ok := strings.Cut(a, "/"); ok && t == topic {
			n, _ := strconv.Atoi(part)
			out = append(out, int32(n))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out, nil
}

func (p *proc) kill() error {
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		return err
	}
	<-p.done
	return nil
}

func (p *proc) stop() {
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
