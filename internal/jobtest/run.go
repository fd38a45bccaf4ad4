package jobtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/internal/fault"
)

// DefaultTimeout bounds one run of a case.
const DefaultTimeout = 60 * time.Second

// Options say how a suite runs.
type Options struct {
	// Timeout bounds each run of a case, from the start of its cluster
	// to the last output read (DefaultTimeout when 0).
	Timeout time.Duration
	// Crashes is how many crash schedules each case runs under after its
	// crash-free run.
	Crashes int
	// Seed is the first schedule's seed; the i-th is Seed+i.
	Seed uint64
	// Logs, if set, receives every run's job log as it is written.
	Logs io.Writer
}

// Result is how one case went.
type Result struct {
	Case *Case
	// Elapsed is the crash-free run's time.
	Elapsed time.Duration
	// Err: the crash-free run did not finish (the job stopped with an
	// error, or did not read its input within the timeout); Log is the
	// end of its job log.
	Err error
	Log string
	// Diffs are the topics whose committed records differ from the
	// expected ones.
	Diffs []Diff
	// Crashes are the crash runs, when asked for and the crash-free run
	// passed.
	Crashes []CrashRun
}

// Passed reports whether the case and every crash run passed.
func (r *Result) Passed() bool {
	if r.Err != nil || len(r.Diffs) > 0 {
		return false
	}
	for _, c := range r.Crashes {
		if !c.Passed() {
			return false
		}
	}
	return true
}

// CrashRun is one run of a case under a crash schedule.
type CrashRun struct {
	Seed     uint64
	Schedule Schedule
	// Unfired are the armed points that never failed (while-writing-state
	// needs state to change while the schedule reaches its hit).
	Unfired Schedule
	// Restarts counts the job's restarts after failures: 0 means the
	// schedule proved nothing.
	Restarts int
	Elapsed  time.Duration
	Err      error
	Log      string
	// Diffs are the topics whose committed records differ from the
	// crash-free run's.
	Diffs []Diff
}

// Passed reports whether the run crashed and committed what the
// crash-free run did.
func (c *CrashRun) Passed() bool { return c.Err == nil && len(c.Diffs) == 0 && c.Restarts > 0 }

// Run runs the cases that selected accepts (nil: every one), one after
// the other, and hands each result to report as it is known.
func (s *Suite) Run(ctx context.Context, opts Options, selected func(*Case) bool, report func(*Result)) {
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	for _, b := range s.cases {
		if ctx.Err() != nil {
			return
		}
		if selected == nil || selected(b.c) {
			report(b.run(ctx, opts))
		}
	}
}

// run runs the case once without crashes, compares, and then runs it
// under opts.Crashes schedules against the crash-free run's output.
func (b *bound) run(ctx context.Context, opts Options) *Result {
	res := &Result{Case: b.c}
	counter := fault.New(nil) // arms nothing; counts how far a schedule may reach
	start := time.Now()
	out, log, err := b.execute(ctx, opts, counter)
	res.Elapsed = time.Since(start)
	if err != nil {
		res.Err, res.Log = err, log
		return res
	}
	for _, ch := range b.checks {
		var written []Record
		parts := 0
		for _, t := range ch.topics {
			written = append(written, out.records[t]...)
			parts += out.partitions[t]
		}
		rule := b.c.RuleFor(ch.name)
		if !ch.listed {
			rule = Unordered
		}
		d := Compare(rule, ch.expected, written, parts)
		d.Name, d.Topics, d.Unlisted = ch.name, ch.topics, !ch.listed
		if !d.OK() {
			res.Diffs = append(res.Diffs, d)
		}
	}
	if len(res.Diffs) > 0 {
		return res // the crash runs would be judged against a wrong output
	}
	for i := range opts.Crashes {
		if ctx.Err() != nil {
			break
		}
		seed := opts.Seed + uint64(i)
		res.Crashes = append(res.Crashes, b.crashRun(ctx, opts, seed, newSchedule(seed, counter.Hits()), out))
	}
	return res
}

// crashRun runs the case under schedule (seed's) and compares every
// output topic with the crash-free run's.
func (b *bound) crashRun(ctx context.Context, opts Options, seed uint64, schedule Schedule, base *outcome) CrashRun {
	cr := CrashRun{Seed: seed, Schedule: schedule}
	if len(cr.Schedule) == 0 {
		cr.Err = errors.New("the job passes no fault point (it takes no checkpoints): nothing to crash")
		return cr
	}
	start := time.Now()
	out, log, err := b.execute(ctx, opts, fault.New(cr.Schedule))
	cr.Elapsed = time.Since(start)
	if err != nil {
		cr.Err, cr.Log = err, log
		return cr
	}
	cr.Restarts, cr.Unfired = out.restarts, out.unfired
	for _, t := range b.outputs {
		want := base.records[t]
		rule := b.ruleOf(t)
		if rule == LastPerKey {
			want = lastPerKey(want) // the table the crash-free run left
		}
		d := Compare(rule, asExpected(want), out.records[t], out.partitions[t])
		d.Name, d.Topics = t, []string{t}
		if !d.OK() {
			cr.Diffs = append(cr.Diffs, d)
		}
	}
	return cr
}

// ruleOf is the rule that compares output topic t: the rule of the name
// the case lists it under (a dead-letter or late topic may be listed as
// dead_letters or late), else the case's default.
func (b *bound) ruleOf(t string) Rule {
	for _, ch := range b.checks {
		if ch.listed && slices.Contains(ch.topics, t) {
			return b.c.RuleFor(ch.name)
		}
	}
	return b.c.Compare
}

// asExpected turns a run's records into the expectations of another:
// the same keys and value bytes (headers and timestamps may differ
// between runs: a dead letter names the offset it was read at, the same
// in both runs, but a record without a timestamp in the file gets the
// time it was written).
func asExpected(recs []Record) []*Expected {
	out := make([]*Expected, len(recs))
	for i, r := range recs {
		v := Value{kind: valueNull}
		if r.Value != nil {
			v = bytesValue(r.Value)
		}
		out[i] = &Expected{Where: r.where(), Key: r.Key, Value: v, Partition: r.Partition}
	}
	return out
}

// outcome is what one run committed.
type outcome struct {
	records    map[string][]Record
	partitions map[string]int
	restarts   int
	unfired    Schedule
}

// pollEvery is how often a run looks at the job's status: reading it is
// a lock and a copy; the checkpoint topic is read only when the job
// completed a checkpoint since.
const pollEvery = 10 * time.Millisecond

// logTail is how much of a failed run's job log a result keeps.
const logTail = 30

// execute runs the case once on a fresh in-memory cluster: it writes the
// input, starts the job, waits until a completed checkpoint has read
// every input record (and the armed points that must fail did), stops
// the job gracefully and reads back every output topic. On an error it
// also returns the end of the job's log.
func (b *bound) execute(ctx context.Context, opts Options, faults *fault.Injector) (*outcome, string, error) {
	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	logs := &logBuffer{}
	var logw io.Writer = logs
	if opts.Logs != nil {
		logw = io.MultiWriter(logs, opts.Logs)
	}
	log := slog.New(slog.NewTextHandler(logw, &slog.HandlerOptions{Level: slog.LevelInfo}))

	cluster, err := newCluster(b.inputs)
	if err != nil {
		return nil, "", err
	}
	defer cluster.Close()
	brokers := cluster.ListenAddrs()
	conn := []kgo.Opt{kgo.SeedBrokers(brokers...)}
	var registry string
	var ids []int
	if b.registry {
		reg, regIDs, err := startRegistry(b.regs)
		if err != nil {
			return nil, "", err
		}
		defer reg.Close()
		registry, ids = reg.url, regIDs
	}
	ends, err := produce(ctx, conn, b.writes, ids)
	if err != nil {
		return nil, "", err
	}
	cfg, err := b.job.load(b.c.Env, brokers, registry)
	if err != nil {
		return nil, "", err
	}
	adapt(cfg)
	job, err := newEngineJob(cfg, log, faults)
	if err != nil {
		return nil, "", err
	}

	runCtx, stopNow := context.WithCancel(context.Background())
	defer stopNow()
	done := make(chan error, 1)
	go func() { done <- job.run(runCtx) }()
	var (
		seen     uint64
		lagging  = []string{"no checkpoint completed yet"}
		stopping bool
		unfired  Schedule
		runErr   error
	)
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
wait:
	for {
		select {
		case runErr = <-done:
			if !stopping {
				st := job.status()
				if runErr == nil {
					runErr = errors.New("the job stopped on its own")
				}
				return nil, logs.tail(logTail), fmt.Errorf("the job stopped before it had read its input (%s; state %s): %w", strings.Join(lagging, ", "), st.State, runErr)
			}
			break wait
		case <-ctx.Done():
			st := job.status() // as it hung, before the cancel stops it
			stopNow()
			<-done
			return nil, logs.tail(logTail), b.hang(ctx, opts, st, stopping, lagging, faults)
		case <-tick.C:
		}
		if stopping {
			continue
		}
		st := job.status()
		if st.Checkpoint > seen {
			rec, err := lastCheckpoint(ctx, conn, cfg.Name)
			if err != nil && ctx.Err() == nil {
				stopNow()
				<-done
				return nil, logs.tail(logTail), fmt.Errorf("reading the job's checkpoints: %w", err)
			}
			if rec != nil {
				seen = max(st.Checkpoint, uint64(rec.ID))
				lagging = behind(rec, ends)
			}
		}
		if len(lagging) > 0 || !firedAsNeeded(faults) {
			continue
		}
		// Every input record is in a committed checkpoint, so everything
		// the job derives from them is committed; no armed point fails
		// the final checkpoint.
		unfired = Schedule(faults.Disarm())
		job.stop()
		stopping = true
	}
	if runErr != nil {
		return nil, logs.tail(logTail), fmt.Errorf("the job failed while stopping: %w", runErr)
	}
	records, partitions, err := readOutputs(ctx, conn, b.outputs)
	if err == nil && b.registry {
		err = readFramed(ctx, registry, records)
	}
	if err != nil {
		return nil, logs.tail(logTail), fmt.Errorf("reading the output: %w", err)
	}
	return &outcome{records: records, partitions: partitions, restarts: job.status().Restarts, unfired: unfired}, "", nil
}

// firedAsNeeded reports whether every armed point a run waits for has
// failed (mustFire).
func firedAsNeeded(faults *fault.Injector) bool {
	for p := range faults.Armed() {
		if mustFire(p) {
			return false
		}
	}
	return true
}

// hang explains a run that ran out of time (or was interrupted).
func (b *bound) hang(ctx context.Context, opts Options, st jobStatus, stopping bool, lagging []string, faults *fault.Injector) error {
	if errors.Is(ctx.Err(), context.Canceled) {
		return ctx.Err()
	}
	var what string
	switch {
	case stopping:
		what = "it read its input but did not stop (a final checkpoint) in time"
	case len(lagging) > 0:
		what = "no completed checkpoint has read all its input (" + strings.Join(lagging, ", ") + ")"
	default:
		what = "its input is read, but the crash schedule's points " + Schedule(faults.Armed()).String() + " did not fail"
	}
	msg := fmt.Sprintf("the job did not finish within %s (--timeout): %s; state %s after %d restarts", opts.Timeout, what, st.State, st.Restarts)
	if st.Err != "" {
		msg += "; last error: " + st.Err
	}
	return errors.New(msg)
}

// logBuffer keeps a run's job log, written by the job's goroutines.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// tail is the last n lines of the log.
func (l *logBuffer) tail(n int) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	lines := strings.Split(strings.TrimRight(l.b.String(), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
