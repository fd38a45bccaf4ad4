package jobtest

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"

	"github.com/eoflow/pipeline/config"
)

// The names a test file lists besides topics.
const (
	DeadLetters = "dead_letters" // every dead-letter topic of the job
	Late        = "late"         // every late-record topic of the job
)

// checkKind is what a compared topic holds.
type checkKind int

const (
	checkSink checkKind = 1 + iota
	checkDeadLetters
	checkLate
)

// Job is a job file, read once and loaded for each run with the case's
// variables.
type Job struct {
	Path string
	data []byte
}

// ReadJob reads the job file at path.
func ReadJob(path string) (*Job, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return &Job{Path: path, data: data}, nil
}

// load parses the job with env as its variables, on brokers and the
// schema registry at registry (nil and "": placeholders, for a job that
// is only checked).
func (j *Job) load(env map[string]string, brokers []string, registry string) (*config.Config, error) {
	if brokers == nil {
		brokers = []string{"in-memory.invalid:9092"}
	}
	if registry == "" {
		registry = placeholderRegistry
	}
	return parseJob(j.Path, j.data, env, brokers, registry)
}

// check is one comparison a case makes after its run.
type check struct {
	name   string
	topics []string
	kind   checkKind
	// listed: the case lists it; an unlisted one expects nothing.
	listed   bool
	expected []*Expected
}

// bound is a case tied to its job: what to create, write and compare.
type bound struct {
	c   *Case
	job *Job
	// name is the job's name (its checkpoint topic is named after it).
	name string
	// guarantee as the job file sets it (runs may use another, see notes).
	guarantee config.Guarantee
	// inputs: every source topic, with the partitions to create.
	inputs map[string]int32
	checks []check
	// outputs are every topic a run reads back: sinks, dead letters,
	// late records (crash runs compare them all).
	outputs []string
	// notes say how the test runs the job unlike `pipeline run` would.
	notes []string
	// writes are the input records as written, in order.
	writes []inputWrite
	// registry: the job names a schema registry, so each run serves one,
	// holding regs, registered in order.
	registry bool
	regs     []registration
}

// bind ties case c to job: the input topics must be ones the job reads
// and each expected name a topic the job writes (or dead_letters, late).
// Problems are config.Errors at the test file's positions; a job file
// that does not load is its own config.Errors.
func bind(file string, c *Case, job *Job, crashes bool, ws writers) (*bound, error) {
	cfg, err := job.load(c.Env, nil, "")
	if err != nil {
		return nil, &JobError{Job: job.Path, Case: c.Name, Err: err}
	}
	b := &bound{c: c, job: job, name: cfg.Name, guarantee: cfg.Guarantee, inputs: map[string]int32{}}
	var errs config.Errors
	fail := func(p Pos, path, format string, args ...any) {
		errs = append(errs, errorAt(file, p, path, format, args...))
	}
	if ws == nil {
		ws = writers{}
	}
	if crashes && !cfg.Guarantee.TransactionalOutputs() {
		fail(c.At, c.Path, "--crashes needs guarantee: exactly_once, and the job in %s runs %s, which may repeat outputs after a crash by definition", job.Path, cfg.Guarantee)
	}
	var sources []string
	for _, s := range cfg.Sources {
		for _, t := range s.Topics {
			sources = append(sources, t)
			b.inputs[t] = 1
		}
	}
	// A table's topic is input too: written before the job starts, so
	// the job reads it to its end before it joins any record.
	for _, t := range cfg.Tables {
		sources = append(sources, t.Topic)
		b.inputs[t.Topic] = 1
	}
	for _, in := range c.Input {
		if _, ok := b.inputs[in.Topic]; !ok {
			fail(in.At, in.Path, "the job reads no topic %q%s", in.Topic, config.Suggestion(in.Topic, sources))
			continue
		}
		for _, r := range in.Records {
			b.inputs[in.Topic] = max(b.inputs[in.Topic], r.Partition+1)
		}
	}

	b.bindSchemas(file, cfg, ws, func(e *config.Error) { errs = append(errs, e) })

	// What the job writes, by the names a test file may use.
	kinds := map[string]checkKind{}
	var sinks, deadLetters, late []string
	add := func(list *[]string, t string, k checkKind) {
		if _, seen := kinds[t]; !seen {
			kinds[t] = k
			*list = append(*list, t)
			b.outputs = append(b.outputs, t)
		}
	}
	for _, s := range cfg.Sinks {
		add(&sinks, s.Topic, checkSink)
	}
	for _, s := range cfg.Sinks {
		add(&deadLetters, s.DeadLetterTopic, checkDeadLetters)
	}
	for _, s := range cfg.Steps {
		if w := s.Window; w != nil && w.LateRecords == config.LateSideOutput && w.LateTopic != "" {
			add(&late, w.LateTopic, checkLate)
		}
		if j := s.Join; j.Interval() && j.LateRecords == config.LateSideOutput && j.LateTopic != "" {
			add(&late, j.LateTopic, checkLate)
		}
	}
	known := append(append(append([]string{DeadLetters, Late}, sinks...), deadLetters...), late...)
	for _, topic := range slices.Sorted(maps.Keys(c.CompareTopic)) {
		if _, ok := kinds[topic]; !ok && topic != DeadLetters && topic != Late {
			fail(c.CompareAt[topic], c.Path+".compare."+topic, "the job writes no topic %q%s", topic, config.Suggestion(topic, append(known, "default")))
		}
	}
	listed := map[string]string{} // topic -> the name that listed it
	for _, e := range c.Expect {
		ch := check{name: e.Name, listed: true, expected: e.Records}
		switch e.Name {
		case DeadLetters:
			ch.kind, ch.topics = checkDeadLetters, deadLetters
		case Late:
			if len(late) == 0 {
				fail(e.At, e.Path, "the job has no late-record topic (no window or interval join with late_records: side_output)")
				continue
			}
			ch.kind, ch.topics = checkLate, late
		default:
			k, ok := kinds[e.Name]
			if !ok {
				fail(e.At, e.Path, "the job writes no topic %q%s", e.Name, config.Suggestion(e.Name, known))
				continue
			}
			ch.kind, ch.topics = k, []string{e.Name}
		}
		clash := false
		for _, t := range ch.topics {
			if by, dup := listed[t]; dup {
				fail(e.At, e.Path, "topic %s is listed already, as %s: list it once", t, by)
				clash = true
			}
			listed[t] = e.Name
		}
		if ch.kind != checkDeadLetters {
			for i, r := range e.Records {
				if r.CodeAt.Line > 0 {
					fail(r.CodeAt, index(e.Path, i)+".code", "code is the error code of a dead letter; %s is not a dead-letter topic", e.Name)
				}
			}
		}
		if !clash {
			b.checks = append(b.checks, ch)
		}
	}
	// Dead letters and late records the case does not list must not be
	// there: a user who did not think of them expects none.
	for _, unlisted := range []struct {
		name   string
		kind   checkKind
		topics []string
	}{{DeadLetters, checkDeadLetters, deadLetters}, {Late, checkLate, late}} {
		var rest []string
		for _, t := range unlisted.topics {
			if _, ok := listed[t]; !ok {
				rest = append(rest, t)
			}
		}
		if len(rest) > 0 {
			b.checks = append(b.checks, check{name: unlisted.name, topics: rest, kind: unlisted.kind})
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}
	if cfg.Scale.Mode == config.ScaleGroup {
		b.notes = append(b.notes, "scale.mode group runs as one process (single mode): the committed output is the same")
	}
	if !cfg.Guarantee.Checkpoints() {
		b.notes = append(b.notes, "at_most_once has no checkpoints to tell when the input is processed: the test runs the job under at_least_once, whose output without crashes is the same")
	}
	return b, nil
}

// adapt makes a loaded job runnable in a test (load pointed it at the
// test's cluster): one process, and checkpoints (see the notes bind
// makes).
func adapt(cfg *config.Config) {
	cfg.Scale.Mode = config.ScaleSingle
	if !cfg.Guarantee.Checkpoints() {
		cfg.Guarantee = config.AtLeastOnce
	}
	cfg.Admin.Listen = ""
}

// JobError is a job file that does not load with a case's variables; Err
// holds its problems (config.Errors, at the job file's positions).
type JobError struct {
	Job, Case string
	Err       error
}

func (e *JobError) Error() string {
	return fmt.Sprintf("job %s, with the variables of case %q: %v", e.Job, e.Case, e.Err)
}

func (e *JobError) Unwrap() error { return e.Err }

// Suite is a test file bound to its job, every case checked, ready to run.
type Suite struct {
	File *File
	Job  *Job
	// Notes say how the test runs the job unlike `pipeline run` would.
	Notes []string
	cases []*bound
}

// Prepare binds every case of f to job, reporting every problem at once
// (config.Errors). crashes: the cases will also run with crash schedules,
// which needs exactly_once.
func Prepare(f *File, job *Job, crashes bool) (*Suite, error) {
	s := &Suite{File: f, Job: job}
	var problems config.Errors
	var other []error
	ws := writers{}
	for _, c := range f.Cases {
		b, err := bind(f.Path, c, job, crashes, ws)
		var ce config.Errors
		var je *JobError
		switch {
		case err == nil:
			s.cases = append(s.cases, b)
			for _, n := range b.notes {
				if !slices.Contains(s.Notes, n) {
					s.Notes = append(s.Notes, n)
				}
			}
		case errors.As(err, &je):
			other = append(other, err)
		case errors.As(err, &ce):
			// A problem of the file's schemas is every case's: once.
			for _, e := range ce {
				if !slices.ContainsFunc(problems, func(p *config.Error) bool { return p.Error() == e.Error() }) {
					problems = append(problems, e)
				}
			}
		default:
			other = append(other, err)
		}
	}
	if len(other) > 0 {
		// The job file itself: its problems are the same for every case
		// but for what the cases' variables change; show the first.
		return nil, other[0]
	}
	if len(problems) > 0 {
		problems.Sort()
		return nil, problems
	}
	return s, nil
}
