package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/sync/errgroup"

	"github.com/eoflow/pipeline/checkpoint"
	"github.com/eoflow/pipeline/checkpoint/kstore"
	"github.com/eoflow/pipeline/checkpoint/savepoint"
	"github.com/eoflow/pipeline/config"
	"github.com/eoflow/pipeline/internal/fault"
	"github.com/eoflow/pipeline/metrics"
	"github.com/eoflow/pipeline/operator"
	"github.com/eoflow/pipeline/schema"
	"github.com/eoflow/pipeline/sink"
	"github.com/eoflow/pipeline/state"
	"github.com/eoflow/pipeline/window"
)

// plan is the compiled form of a job's configuration: what every task
// evaluates, shared read-only by all of them (each clones what it mutates).
type plan struct {
	cfg   *config.Config
	chain *operator.Chain
	agg   *operator.Aggregator // nil for a stateless job
	// time is the job's event time and window (nil: neither).
	time   *timePlan
	sinks  []sinkSpec
	format map[string]config.Format // source topic -> value format
	// metrics counts dead letters (set by the Job; nil in plan-only uses).
	metrics *metrics.Metrics
	// deadLetterLog logs dead letters, rate-limited (set by the Job; nil
	// in plan-only uses).
	deadLetterLog *deadLetterLog
	// checkpointed describes the operators of operatorIDs, sorted by id,
	// for every checkpoint record: what a restart checks the
	// configuration against (savepoint.CheckRestart).
	checkpointed []checkpoint.OperatorDesc
	// shuffle is the keyed work's layout in group mode (nil: single
	// mode; set by the Job).
	shuffle *shuffle
	// schemas decode and encode the schema registry formats (nil: the
	// job uses none; set by the Job, schemas.go).
	schemas *schema.Set
}

// sinkSpec is one configured sink, compiled.
type sinkSpec struct {
	topic  string
	key    *operator.Expr // nil: the group key, or no key
	format config.Format
	// enc writes a schema registry format (nil: json or raw).
	enc *schema.Sink
}

// compile builds the plan, reporting expression problems at their place in
// the configuration file.
func compile(cfg *config.Config) (*plan, error) {
	p := &plan{cfg: cfg, format: map[string]config.Format{}}
	var problems config.Errors
	chain, err := operator.Compile(cfg.Steps)
	if err != nil {
		problems = append(problems, compileProblems(cfg, err)...)
	} else {
		p.chain, p.agg = chain, chain.Aggregator()
	}
	tp, tprobs := compileTime(cfg, p.chain, p.agg)
	problems = append(problems, tprobs...)
	p.time = tp
	for i, s := range cfg.Sinks {
		spec := sinkSpec{topic: s.Topic, format: s.Format}
		if s.Key != "" {
			path := fmt.Sprintf("sinks[%d].key", i)
			e, err := operator.CompileExpr(path, s.Key)
			if err != nil {
				problems = append(problems, compileProblems(cfg, err)...)
			}
			spec.key = e
		}
		p.sinks = append(p.sinks, spec)
	}
	for _, src := range cfg.Sources {
		for _, t := range src.Topics {
			p.format[t] = src.Format
		}
	}
	if len(problems) > 0 {
		return nil, problems
	}
	ids := p.operatorIDs()
	for _, op := range savepoint.DescribeConfig(cfg).Checkpointed() {
		if slices.Contains(ids, op.ID) {
			p.checkpointed = append(p.checkpointed, op)
		}
	}
	return p, nil
}

// CheckExpressions compiles the expressions of cfg and returns their
// problems at their place in the file. Loading a job with
// config.WithCheck(runtime.CheckExpressions) reports them with every other
// problem of the file, since cfg may have others: compiling needs no more
// than the steps and sinks as they were written.
func CheckExpressions(cfg *config.Config) config.Errors {
	_, err := compile(cfg)
	if err == nil {
		return nil
	}
	var problems config.Errors
	if errors.As(err, &problems) {
		return problems
	}
	return config.Errors{cfg.Errorf("", "%v", err)}
}

// compileProblems places each operator.CompileError in err at its field.
func compileProblems(cfg *config.Config, err error) config.Errors {
	var out config.Errors
	var joined interface{ Unwrap() []error }
	errs := []error{err}
	if errors.As(err, &joined) {
		errs = joined.Unwrap()
	}
	for _, e := range errs {
		var ce *operator.CompileError
		if errors.As(e, &ce) {
			msg := ce.Message
			if ce.Line > 0 {
				msg = fmt.Sprintf("%s (at %d:%d of the expression)", msg, ce.Line, ce.Column)
			}
			out = append(out, cfg.Errorf(ce.Path, "%s", msg))
			continue
		}
		out = append(out, cfg.Errorf("steps", "%v", e))
	}
	return out
}

// operatorIDs are the stateful operators a checkpoint holds state for:
// every source (offsets) and the aggregate.
func (p *plan) operatorIDs() []string {
	var ids []string
	for _, s := range p.cfg.Sources {
		ids = append(ids, s.ID)
	}
	if p.agg != nil {
		ids = append(ids, p.agg.ID())
	}
	return ids
}

// deadLetterTopics are the distinct dead-letter topics of the sinks: a bad
// record goes to each.
func (p *plan) deadLetterTopics() []string {
	var topics []string
	seen := map[string]bool{}
	for _, s := range p.cfg.Sinks {
		if !seen[s.DeadLetterTopic] {
			seen[s.DeadLetterTopic] = true
			topics = append(topics, s.DeadLetterTopic)
		}
	}
	return topics
}

// deadLetters builds the dead-letter records of src for every sink.
func (p *plan) deadLetters(src *kgo.Record, rerr *operator.RecordError) []message {
	if p.metrics != nil {
		p.metrics.DeadLettered(string(rerr.Code))
	}
	if p.deadLetterLog != nil {
		p.deadLetterLog.record(src, rerr)
	}
	var msgs []message
	for _, topic := range p.deadLetterTopics() {
		dl := sink.DeadLetter(topic, src, string(rerr.Code), rerr.Step, rerr.Reason)
		if rerr.SchemaID != 0 {
			dl.Headers = append(dl.Headers, kgo.RecordHeader{Key: sink.HeaderSchemaID, Value: strconv.AppendInt(nil, int64(rerr.SchemaID), 10)})
		}
		msgs = append(msgs, message{kind: msgDeadLetter, rec: dl})
	}
	return msgs
}

// router evaluates the stateless steps for one source task.
type router struct {
	p       *plan
	chain   *operator.Chain
	workers int
	groups  int
	// clocks are the event-time clocks of the task's partitions (nil
	// without event time).
	clocks *clocks

	// slab is where each input's operator.Record comes from: next is its
	// first unused record, sent the number of its records sent on to a
	// worker (the others were done with here, and are simply reused when
	// the slab comes back).
	slab       *recordSlab
	next, sent int
	// one backs the message slice route returns for a kept record.
	one [1]message
	// lastTopic's format is lastFormat (formatOf).
	lastTopic  string
	lastFormat config.Format
	// bare: the job has no steps, no event time, no keyed operator and
	// no sink key expressions, so nothing here reads a record: route
	// passes it on by partition as it is, and the worker's passThrough
	// validates it (and makes any dead letter) with its own chain.
	bare bool
}

func (p *plan) newRouter(workers int) *router {
	chain := p.chain.Clone()
	if p.agg == nil {
		// Without an aggregate the sinks' key expressions read the input
		// (or what a map step made of it): decode what they read with the
		// rest, once.
		for _, s := range p.sinks {
			if s.key != nil {
				chain.AlsoRead(s.key)
			}
		}
	}
	if p.time != nil {
		for _, st := range p.time.byTopic {
			if st.expr != nil {
				chain.AlsoRead(st.expr)
			}
		}
	}
	return &router{p: p, chain: chain, workers: workers, groups: p.cfg.Checkpoint.KeyGroups, bare: p.bare()}
}

// bare reports whether the job's records need nothing on the source side
// (see router.bare): no steps, no event time, no keyed operator or
// shuffle, and no sink key expressions.
func (p *plan) bare() bool {
	if p.agg != nil || p.time != nil || p.shuffle != nil || len(p.cfg.Steps) > 0 {
		return false
	}
	for _, s := range p.sinks {
		if s.key != nil {
			return false
		}
	}
	return true
}

// route runs the stateless steps on rec and picks the worker: by key group
// when the chain is keyed, else by partition, which keeps each partition's
// order. It returns the messages to send (none when filtered out). The
// slice is valid until the next call: the caller copies the messages out
// (the messages themselves, and the operator.Record they carry, are the
// receiver's to keep).
func (r *router) route(rec *kgo.Record) (msgs []message, worker int) {
	if sh := r.p.shuffle; sh != nil && r.p.agg != nil {
		if rec.Topic != sh.repartition {
			return r.shuffleOut(sh, rec)
		}
		orig, err := unshuffle(rec)
		if err != nil {
			// Not written by this job's source side: a dead letter,
			// never a silent drop.
			return r.p.deadLetters(rec, &operator.RecordError{Code: operator.CodeDecode, Reason: err.Error()}), int(uint32(rec.Partition) % uint32(r.workers))
		}
		rec = orig
	}
	if r.bare {
		r.one[0] = message{kind: msgRecord, rec: rec}
		return r.one[:], partitionWorker(rec.Topic, rec.Partition, r.workers)
	}
	op := r.record()
	*op = operator.Record{
		Key: rec.Key, Value: rec.Value, Timestamp: rec.Timestamp,
		Topic: rec.Topic, Partition: rec.Partition, Offset: rec.Offset,
		Format: r.formatOf(rec.Topic),
	}
	var (
		at   int64
		wm   = int64(window.NoWatermark) // its partition's watermark before it
		late bool
	)
	if r.clocks != nil {
		if cl := r.clocks.of(rec.Topic, rec.Partition); cl != nil {
			var terr *operator.RecordError
			if at, terr = r.eventTime(cl.src, rec, op); terr != nil {
				r.chain.Recycle(op)
				return r.p.deadLetters(rec, terr), int(uint32(rec.Partition) % uint32(r.workers))
			}
			if cl.src.idle > 0 {
				cl.lastRead = r.clocks.now()
			}
			if cl.src.maxFuture > 0 {
				if ferr := cl.src.future(at, r.clocks.now()); ferr != nil {
					// Never moves the watermark: one such time would make
					// every later record of the partition late.
					r.chain.Recycle(op)
					return r.p.deadLetters(rec, ferr), int(uint32(rec.Partition) % uint32(r.workers))
				}
			}
			// Late per window against the partition's own watermark
			// (eventtime.go): a record behind the watermark still counts
			// in every window of its that is open.
			wm = cl.Observe(at, cl.src.outOfOrder)
			if w := r.p.time.window; w != nil {
				late = w.spec.Late(at, w.lateness, wm)
			}
		}
	}
	keep, rerr := r.chain.Process(op)
	var hash state.Hash
	switch {
	case !r.chain.Keyed():
		worker = partitionWorker(rec.Topic, rec.Partition, r.workers)
	case rerr == nil && keep:
		hash = state.HashOf([]byte(op.GroupKey))
		worker = state.WorkerOf(hash.Group(r.groups), r.workers, r.groups)
	default:
		// A dead letter of a keyed job has no key: any worker will do,
		// as long as the same input always goes to the same one.
		worker = int(uint32(rec.Partition) % uint32(r.workers))
	}
	if rerr != nil || !keep {
		r.chain.Recycle(op) // not sent on: done with here
		if rerr != nil {
			return r.p.deadLetters(rec, rerr), worker
		}
		return nil, worker
	}
	if late {
		r.chain.Recycle(op)
		return r.late(rec, at, wm), worker
	}
	r.sent++
	r.one[0] = message{kind: msgRecord, rec: rec, op: op, slab: r.slab, at: at, wm: wm, hash: hash}
	return r.one[:], worker
}

// formatOf is the value format of topic's source. A poll's records come
// in runs of one topic (most jobs read one), so the last answer is kept
// instead of a map lookup per record.
func (r *router) formatOf(topic string) config.Format {
	if topic != r.lastTopic {
		r.lastTopic, r.lastFormat = topic, r.p.format[topic]
	}
	return r.lastFormat
}

// record is the next unused operator.Record of the router's slab.
func (r *router) record() *operator.Record {
	if r.slab == nil || r.next == len(r.slab.recs) {
		if r.slab != nil {
			r.slab.left(r.sent)
		}
		r.slab, r.next, r.sent = recordSlabs.Get().(*recordSlab), 0, 0
	}
	op := &r.slab.recs[r.next]
	r.next++
	return op
}

// shuffleOut is the source side of a group-mode keyed job: the stateless
// steps decide whether rec goes on and to which key group; a kept record
// goes, unchanged, to the repartition partition that owns its key group
// (through any worker, which passes it to the sink), and its owner runs
// the steps again and the keyed operator. Dead letters are written here,
// once.
func (r *router) shuffleOut(sh *shuffle, rec *kgo.Record) ([]message, int) {
	op := &operator.Record{
		Key: rec.Key, Value: rec.Value, Timestamp: rec.Timestamp,
		Topic: rec.Topic, Partition: rec.Partition, Offset: rec.Offset,
		Format: r.formatOf(rec.Topic),
	}
	worker := int(uint32(rec.Partition) % uint32(r.workers))
	keep, rerr := r.chain.Process(op)
	if rerr != nil {
		r.chain.Recycle(op)
		return r.p.deadLetters(rec, rerr), worker
	}
	if !keep {
		r.chain.Recycle(op)
		return nil, worker
	}
	kg := state.KeyGroupOf([]byte(op.GroupKey), r.groups)
	r.chain.Recycle(op)
	out := &kgo.Record{
		Topic: sh.repartition, Partition: sh.partitionOf(kg),
		Key: rec.Key, Value: rec.Value, Timestamp: rec.Timestamp,
		Headers: append(slices.Clip(rec.Headers),
			kgo.RecordHeader{Key: headerSourceTopic, Value: []byte(rec.Topic)},
			kgo.RecordHeader{Key: headerSourcePartition, Value: strconv.AppendInt(nil, int64(rec.Partition), 10)},
			kgo.RecordHeader{Key: headerSourceOffset, Value: strconv.AppendInt(nil, rec.Offset, 10)},
		),
	}
	r.one[0] = message{kind: msgShuffle, rec: out}
	return r.one[:], worker
}

// unshuffle rebuilds the input record a repartition record carries: its
// key, value, timestamp and headers, and where it was read.
func unshuffle(rec *kgo.Record) (*kgo.Record, error) {
	orig := &kgo.Record{Key: rec.Key, Value: rec.Value, Timestamp: rec.Timestamp}
	var found int
	for _, h := range rec.Headers {
		switch h.Key {
		case headerSourceTopic:
			orig.Topic = string(h.Value)
			found++
		case headerSourcePartition:
			p, err := strconv.ParseInt(string(h.Value), 10, 32)
			if err != nil {
				return nil, fmt.Errorf("repartition record: header %s: %w", h.Key, err)
			}
			orig.Partition = int32(p)
			found++
		case headerSourceOffset:
			o, err := strconv.ParseInt(string(h.Value), 10, 64)
			if err != nil {
				return nil, fmt.Errorf("repartition record: header %s: %w", h.Key, err)
			}
			orig.Offset = o
			found++
		default:
			orig.Headers = append(orig.Headers, h)
		}
	}
	if found != 3 {
		return nil, fmt.Errorf("repartition record without the headers %s, %s and %s", headerSourceTopic, headerSourcePartition, headerSourceOffset)
	}
	return orig, nil
}

// eventTime is rec's event time: its source's timestamp expression, or
// the Kafka record timestamp.
func (r *router) eventTime(st *sourceTime, rec *kgo.Record, op *operator.Record) (int64, *operator.RecordError) {
	if st.expr == nil {
		ms := rec.Timestamp.UnixMilli()
		return ms, operator.CheckEventTime(ms)
	}
	return r.chain.EventTime(op, st.expr)
}

// late is what becomes of a late record, judged at watermark wm: the
// record for the late topic, or nothing when late records are dropped.
// Either way it is counted.
func (r *router) late(rec *kgo.Record, at, wm int64) []message {
	w := r.p.time.window
	result := config.LateSideOutput
	if w.lateTopic == "" {
		result = config.LateDrop
	}
	if r.p.metrics != nil {
		r.p.metrics.LateRecord(string(result))
	}
	if w.lateTopic == "" {
		return nil
	}
	r.one[0] = message{kind: msgLate, rec: w.lateRecord(rec, at, wm)}
	return r.one[:]
}

// partitionWorker spreads the partitions of a job without key_by over the
// workers, so each partition's records stay in order: 32-bit FNV-1a of the
// topic plus the partition, computed inline because route runs per record
// (hash/fnv would allocate a hasher each time).
func partitionWorker(topic string, partition int32, workers int) int {
	h := uint32(2166136261)
	for i := 0; i < len(topic); i++ {
		h ^= uint32(topic[i])
		h *= 16777619
	}
	return int((h + uint32(partition)) % uint32(workers))
}

// outputs builds the output record of every sink from buf's memory, with
// timestamp ts. key is the default record key (the group key for an
// aggregate, the input key otherwise); value is the value for every sink
// (an aggregate's output, already encoded), or nil to encode op's value in
// each sink's format.
func (p *plan) outputs(buf *outBuf, ts time.Time, op *operator.Record, key, value []byte) ([]*kgo.Record, *operator.RecordError) {
	out := buf.records(len(p.sinks))
	for _, s := range p.sinks {
		v := value
		if s.enc != nil {
			var b []byte
			var rerr *operator.RecordError
			if value != nil {
				b, rerr = s.enc.AppendJSON(buf.start(), value)
			} else {
				b, rerr = s.enc.AppendRecord(buf.start(), op)
			}
			if rerr != nil {
				return nil, rerr
			}
			v = nil // a Debezium delete: a tombstone
			if len(b) > 0 {
				v = buf.cut(b)
			}
		} else if v == nil {
			v, _ = op.Unchanged(s.format) // the input's bytes: never written to
		}
		if v == nil && s.enc == nil {
			b, rerr := op.AppendValue(buf.start(), s.format)
			if rerr != nil {
				return nil, rerr
			}
			if len(b) > 0 {
				v = buf.cut(b)
			} // else nil, as append(nil, empty...) always gave: a raw
			// sink writes an empty input value as a null one.
		}
		k := key
		if s.key != nil {
			ks, rerr := s.key.EvalKey(op)
			if rerr != nil {
				return nil, rerr
			}
			k = buf.cut(append(buf.start(), ks...))
		}
		r := buf.record()
		r.Topic, r.Key, r.Value, r.Timestamp = s.topic, k, v, ts
		out = append(out, r)
	}
	return out, nil
}

// newRecord fills in checkpoint N's job-wide fields, and the savepoint
// the attempt's state came from.
func (a *attempt) newRecord(id checkpoint.ID, offsets []checkpoint.SourceOffset, st []checkpoint.StateSummary, et *checkpoint.EventTime) *checkpoint.Record {
	j := a.j
	rec := &checkpoint.Record{
		ID:                id,
		Job:               j.cfg.Name,
		ConfigFingerprint: j.cfg.Fingerprint(),
		KeyGroups:         j.cfg.Checkpoint.KeyGroups,
		OperatorIDs:       j.plan.operatorIDs(),
		Offsets:           offsets,
		CreatedUnixMilli:  j.now().UnixMilli(),
		Guarantee:         string(j.cfg.Guarantee),
		State:             st,
		Savepoint:         a.savepointID,
		Operators:         j.plan.checkpointed,
		EventTime:         et,
	}
	rec.Normalize()
	return rec
}

// timeWindow is the job's window step (nil: none).
func (p *plan) timeWindow() *windowPlan {
	if p.time == nil {
		return nil
	}
	return p.time.window
}

// emptyOperator builds worker w's keyed operator with no state.
func (j *Job) emptyOperator(w int) (keyedOperator, error) {
	if j.plan.agg == nil {
		return newPassThrough(j.plan), nil
	}
	groups := j.cfg.Checkpoint.KeyGroups
	agg := j.plan.agg.Clone()
	if wp := j.plan.timeWindow(); wp != nil {
		store, err := state.New[*operator.WindowState](agg.ID(), groups, state.RangeFor(w, j.workers, groups), windowCodec{agg})
		if err != nil {
			return nil, err
		}
		if w == 0 {
			// A new set of operators: the open windows are theirs.
			j.openWindows = new(atomic.Int64)
		}
		return &windowOp{p: j.plan, w: wp, agg: agg, store: store, open: j.openWindows, watermark: window.NoWatermark}, nil
	}
	op, err := newAggregateOp(j.plan, agg, groups, state.RangeFor(w, j.workers, groups))
	if err != nil {
		return nil, err
	}
	if ttl := agg.TTL(); ttl > 0 {
		op.expiry = &expiry{ttl: ttl.Milliseconds(), eventTime: j.plan.time != nil && len(j.plan.time.byTopic) > 0, now: j.now}
	}
	return op, nil
}

// newAggregateOp is agg (a clone of its own) over the key groups rng of
// groups, with an empty store.
func newAggregateOp(p *plan, agg *operator.Aggregator, groups int, rng state.Range) (*aggregateOp, error) {
	// A restore checks every state it reads by decoding it into a state of
	// its own (the restore runs before the operator's first record).
	checked := agg.NewState()
	store, err := state.NewCompact(agg.ID(), groups, rng, func(enc []byte) error {
		return agg.DecodeInto(checked, enc)
	})
	if err != nil {
		return nil, err
	}
	op := &aggregateOp{p: p, agg: agg, store: store, st: agg.NewState(), ints: agg.NewIntState()}
	if op.ints != nil {
		// The integer path stores its states in a native form; the
		// changelog and savepoints get their encoding (through a state
		// of its own: Snapshot and All may run between two records'
		// uses of op.ints).
		store.SetEncoding(agg.NewIntState().AppendChangelog)
	}
	return op, nil
}

// restoringOperators builds one keyed operator per worker and, for a job
// with an aggregate, a Restorer per worker for it to be filled through,
// its maps sized for expected keys (over all workers).
func (j *Job) restoringOperators(expected int) ([]keyedOperator, []*state.Restorer, error) {
	ops := make([]keyedOperator, j.workers)
	for w := range ops {
		op, err := j.emptyOperator(w)
		if err != nil {
			return nil, nil, err
		}
		ops[w] = op
	}
	if j.plan.agg == nil {
		return ops, nil, nil
	}
	restorers := make([]*state.Restorer, j.workers)
	for w, op := range ops {
		store := op.(stateful).keyedStore()
		store.Grow(expected)
		r, err := state.NewRestorer(j.cfg.Checkpoint.KeyGroups, store.Range())
		if err != nil {
			return nil, nil, err
		}
		if err := r.Register(store); err != nil {
			return nil, nil, err
		}
		restorers[w] = r
	}
	return ops, restorers, nil
}

// restoreOperators builds one keyed operator per worker and fills their
// state from the job's state topic, in one pass over it. latest (nil for a
// new job) says how many keys to expect. It returns how many keys it
// restored.
// stateReader calls fn with every committed record of the job's state
// topic, in order (cluster.ReadState).
type stateReader func(ctx context.Context, fn func(key, value []byte) error) error

func (j *Job) restoreOperators(ctx context.Context, latest *checkpoint.Record, read stateReader) ([]keyedOperator, int, error) {
	expected := 0
	if latest != nil && j.plan.agg != nil {
		for _, st := range latest.State {
			if st.Operator == j.plan.agg.ID() {
				expected = int(min(st.Keys, 1<<30))
			}
		}
	}
	ops, restorers, err := j.restoringOperators(expected)
	if err != nil {
		return nil, 0, err
	}
	if restorers == nil {
		return ops, 0, nil // no aggregate: no state
	}
	if err := j.faults.Hit(fault.DuringRestore); err != nil {
		return nil, 0, err
	}
	if err := j.readStateInto(ctx, read, restorers); err != nil {
		return nil, 0, fmt.Errorf("restoring state: %w", err)
	}
	keys := 0
	for w, op := range ops {
		keys += op.(stateful).keyedStore().Len()
		if gone := restorers[w].Unclaimed(); len(gone) > 0 {
			return nil, 0, fmt.Errorf("%w: the state topic holds state of operators %v, which the configuration no longer has", ErrIncompatible, gone)
		}
	}
	return ops, keys, nil
}

// stateTopic is the topic the job's keyed state goes to: the group-state
// topic in group mode.
func (j *Job) stateTopic() string {
	if j.shuffle != nil {
		return j.shuffle.state
	}
	return kstore.StateTopic(j.cfg.Name)
}

// limitState gives the stores of ops the state topic's record limit
// (limits, read from the brokers): a value larger than a record goes
// there in pieces instead of failing every attempt at its checkpoint
// with MESSAGE_TOO_LARGE.
func (j *Job) limitState(ops []keyedOperator, limits sink.Limits) {
	for _, op := range ops {
		if st, ok := op.(stateful); ok {
			st.keyedStore().SetRecordLimit(limits.Payload(j.stateTopic()))
		}
	}
}

// stateTooLarge is the error of rec, a state record that does not fit
// its topic even after the store split its value (state/pieces.go): its
// key is too long to leave room for pieces. Every attempt would write it
// again, so the job stops (ErrUnfit) and says what to change.
func stateTooLarge(rec *kgo.Record, limits sink.Limits, m *metrics.Metrics) error {
	if m != nil {
		m.InternalRecordTooLarge(rec.Topic)
	}
	what := "a state record"
	if k, err := state.DecodeChangelogKey(rec.Key); err == nil {
		key := k.Key
		if len(key) > 64 {
			key = key[:64]
		}
		what = fmt.Sprintf("the state of key %q (%d bytes) of operator %s", key, len(k.Key), k.Operator)
	}
	why := "its key is too long to split the value over several records (a key must leave half a record for the value)"
	if 2*len(rec.Key) < limits.Payload(rec.Topic) {
		why = "and it was not split over several records"
	}
	return fmt.Errorf("%w: %s needs a record of %d bytes, more than the topic %s accepts (max.message.bytes %d): %s. "+
		"Raise max.message.bytes of %s, or key the records by shorter values",
		ErrUnfit, what, sink.BatchBytes(rec), rec.Topic, limits.Batch(rec.Topic), why, rec.Topic)
}

// restoreBatch is how many state records the reader hands a restoring
// worker at once.
const restoreBatch = 1024

// readStateInto reads the job's state topic once and feeds every record to
// the Restorer of the worker owning its key group, each Restorer on a
// goroutine of its own: at a million keys, decoding and inserting the
// states, not reading the topic, is what a restore spends its time on
// (bench/results/2026-12-02-recovery.md).
func (j *Job) readStateInto(ctx context.Context, read stateReader, restorers []*state.Restorer) error {
	groups := j.cfg.Checkpoint.KeyGroups
	g, gctx := errgroup.WithContext(ctx)
	feeds := make([]chan []state.ChangelogRecord, len(restorers))
	for w, r := range restorers {
		feed := make(chan []state.ChangelogRecord, 4)
		feeds[w] = feed
		g.Go(func() error {
			for batch := range feed {
				for _, rec := range batch {
					if err := r.Add(rec); err != nil {
						return err
					}
				}
			}
			return nil
		})
	}
	pending := make([][]state.ChangelogRecord, len(restorers))
	send := func(w int) error {
		select {
		case feeds[w] <- pending[w]:
			pending[w] = make([]state.ChangelogRecord, 0, restoreBatch)
			return nil
		case <-gctx.Done():
			return gctx.Err()
		}
	}
	readErr := read(gctx, func(key, value []byte) error {
		if err := j.faults.Hit(fault.DuringRestore); err != nil {
			return err
		}
		k, err := state.DecodeChangelogKey(key)
		if err != nil {
			return fmt.Errorf("state topic: %w", err)
		}
		if int(k.Group) >= groups {
			return fmt.Errorf("%w: state record of key group %d, but the job has %d key groups", ErrIncompatible, k.Group, groups)
		}
		w := state.WorkerOf(k.Group, len(restorers), groups)
		// The record's bytes stay valid: the client never reuses them.
		pending[w] = append(pending[w], state.ChangelogRecord{Key: key, Value: value})
		if len(pending[w]) == restoreBatch {
			return send(w)
		}
		return nil
	})
	for w := range pending {
		if readErr == nil && len(pending[w]) > 0 {
			readErr = send(w)
		}
		close(feeds[w])
	}
	// A worker's error (a value its codec rejects) cancels the read, so
	// it is the cause: report it first. Committed state that does not
	// decode stays so: restarting cannot help.
	if err := g.Wait(); err != nil {
		return fmt.Errorf("%w: %w", ErrIncompatible, err)
	}
	if readErr != nil {
		return readErr
	}
	// Every record is in: join the values written in pieces.
	for _, r := range restorers {
		if err := r.Finish(); err != nil {
			return fmt.Errorf("%w: %w", ErrDamaged, err)
		}
	}
	return nil
}
