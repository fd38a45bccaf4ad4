package engine

import (
	"encoding/binary"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/checkpoint"
	"github.com/eoflow/pipeline/config"
	"github.com/eoflow/pipeline/operator"
	"github.com/eoflow/pipeline/operator/keyed"
	"github.com/eoflow/pipeline/state"
	"github.com/eoflow/pipeline/window"
)

// router evaluates the stateless steps for one source task and sends what
// comes out to the workers: each record that reaches a keyed operator to
// the worker owning its key group, each that reaches an output to a
// worker chosen by its partition (so a partition's outputs stay in
// order), dead letters and late records along the same paths.
type router struct {
	p *plan
	// branches evaluates the graph's routes; lin is the job's one Chain
	// when the job is linear, run directly on the hot path.
	branches *operator.Branches
	lin      *operator.Chain
	workers  int
	groups   int
	// clocks are the event-time clocks of the task's partitions (nil
	// without event time).
	clocks *clocks
	// shuffled is what the keyed side of a group-mode job with event
	// time knows of the source partitions' times, per repartition
	// partition the task reads (groupeventtime.go; nil otherwise).
	shuffled *shuffledClocks
	// env counts late records (keyed.WindowSpec.LateRecord).
	env *keyed.Env
	// steps counts what the stateless steps did (nil: not counted);
	// flushSteps adds it to the metrics.
	steps *stepCounts
	// hold keeps the records of the sources joined as of event time
	// until the tables' event time passes them (asof.go; nil: none);
	// released is where a held record being released was placed in
	// event time when it was read.
	hold     *sourceHold
	released *heldAt

	// slab is where each input's operator.Record comes from: next is its
	// first unused record, sent the number of its records sent on to a
	// worker (the others were done with here, and are simply reused when
	// the slab comes back).
	slab       *recordSlab
	next, sent int
	// lastTopic's format and source are lastFormat and lastSource
	// (formatOf).
	lastTopic  string
	lastFormat config.Format
	lastSource int
	// bare: the job has no steps, no event time, no keyed operator and
	// no sink key expressions, so nothing here reads a record: route
	// passes it on by partition as it is, and the worker's passThrough
	// validates it (and makes any dead letter) with its own chain.
	bare bool
	// cur is the input the branches of a job graph are evaluating: what
	// onRoute needs of it (methods bound once, so a record costs no
	// closure). forksInSlab: its copies come from the slab too.
	cur struct {
		rec         *kgo.Record
		op          *operator.Record
		at, wm      int64
		out         [][]message
		forksInSlab bool
	}
	onRouteFn func(route, target int, op *operator.Record, err *operator.RecordError)
	forkFn    func() *operator.Record

	// Group mode's shuffle: aggs are the router's copies of the keyed
	// targets' aggregates (source side), scratch the buffer their values
	// are encoded in, shuffleOp the record a linear job's steps run on
	// there; dec the repartition record being read (keyed side).
	aggs      []*operator.Aggregator
	scratch   []byte
	dec       shuffled
	shuffleOp operator.Record
	// bundles are the repartition records being filled on the source
	// side, by repartition partition, with the frames (frame is the one
	// being encoded) of the inputs routed since flushShuffle; frames are
	// a bundle's frames being read on the keyed side (shufflecodec.go).
	bundles []shuffleBundle
	frame   []byte
	frames  [][]byte
	// local is the repartition partitions whose records skip the topic
	// (localshuffle.go; nil: none): their keyed operators run here.
	local []bool
}

// shuffleBundle is one repartition partition's bundle being filled.
type shuffleBundle struct {
	value []byte
	// ts is the newest input timestamp of its frames: the Kafka record's,
	// so that the topic's retention keeps it as long as its newest input.
	ts time.Time
	// last is the size of the partition's last bundle sent, to size the
	// next one's buffer by.
	last int
}

func (p *plan) newRouter(workers int) *router {
	b := p.graph.NewBranches()
	// The sinks' key expressions of an output read the input (or what a
	// map step made of it), and so do the event-time expressions: decode
	// what they read with the rest, once.
	for _, t := range p.targets {
		if t.keyed() {
			continue
		}
		for _, s := range t.sinks {
			if s.Key != nil {
				b.AlsoRead(s.Key)
			}
		}
	}
	if p.time != nil {
		for _, st := range p.time.byTopic {
			if st.expr != nil {
				b.AlsoRead(st.expr)
			}
		}
	}
	r := &router{p: p, branches: b, lin: b.Linear(), workers: workers, groups: p.cfg.Checkpoint.KeyGroups, bare: p.bare(), env: p.env(nil)}
	r.onRouteFn, r.forkFn = r.onRoute, r.fork
	return r
}

// bare reports whether the job's records need nothing on the source side
// (see router.bare): a linear job with no steps, no event time, no keyed
// operator or shuffle, and no sink key expressions.
func (p *plan) bare() bool {
	if p.graph.Linear() == nil || p.keyed || p.time != nil || p.shuffle != nil || len(p.cfg.Steps) > 0 {
		return false
	}
	for _, s := range p.sinks {
		if s.Key != nil {
			return false
		}
	}
	return true
}

// route runs the stateless steps on rec and adds what each worker gets to
// out (by worker): nothing when every route filtered it out. The messages,
// and the operator.Records they carry, are the receiving worker's.
func (r *router) route(rec *kgo.Record, out [][]message) {
	if r.p.carriedKeys[rec.Topic] {
		if r.joinReport(rec, out) {
			return
		}
		restoreCarriedKey(rec)
	}
	given := r.released // a held record, placed when it was read (asof.go)
	sh := r.p.shuffle
	shuffles := sh.repartitions(r.p.keyed)
	if shuffles && rec.Topic == sh.repartition {
		r.unshuffle(rec, out)
		return
	}
	if r.bare {
		w := partitionWorker(rec.Topic, rec.Partition, r.workers)
		out[w] = append(out[w], message{kind: msgRecord, rec: rec})
		return
	}
	format, src := r.formatOf(rec.Topic)
	if r.hold != nil && given == nil && r.hold.joins.sources[src] {
		// Group mode too: held on the source side, before the
		// repartition topic (groupheld.go).
		r.holdBack(src, rec, format, out) // routed when released (asof.go)
		return
	}
	if shuffles {
		r.shuffleOut(sh, rec, out)
		return
	}
	copies := 0 // a graph's branches each take a copy of the record but one
	if r.lin == nil {
		copies = r.p.graph.Records(src)
	}
	forksInSlab := r.reserve(1 + copies)
	op := r.record()
	slab := r.slab
	*op = operator.Record{
		Key: rec.Key, Value: rec.Value, Timestamp: rec.Timestamp,
		Topic: rec.Topic, Partition: rec.Partition, Offset: rec.Offset,
		Format: format,
	}
	at, wm, ok := r.placed(given, src, rec, op, out)
	if !ok {
		return
	}
	op.AsOf = at
	switch {
	case r.lin != nil:
		keep, rerr := r.lin.Process(op)
		if rerr != nil || !keep {
			r.lin.Recycle(op) // not sent on: done with here
			if rerr != nil {
				r.dead(out, rec, rerr)
			}
			return
		}
		r.deliver(0, rec, op, slab, at, wm, out)
	default:
		c := &r.cur
		c.rec, c.op, c.at, c.wm, c.out, c.forksInSlab = rec, op, at, wm, out, forksInSlab
		derr := r.branches.Process(src, op, r.forkFn, r.onRouteFn)
		if derr != nil {
			r.branches.Recycle(op)
			r.dead(out, rec, derr)
		}
		r.cur = struct {
			rec         *kgo.Record
			op          *operator.Record
			at, wm      int64
			out         [][]message
			forksInSlab bool
		}{}
	}
}

// flushSteps adds what the stateless steps did since the last call to
// the metrics (livestats.go).
func (r *router) flushSteps() { r.steps.flush(r.branches) }

// onRoute sends what one route of the input being evaluated (r.cur) made
// of it: a record for its target, or its dead letters.
func (r *router) onRoute(_, t int, rop *operator.Record, rerr *operator.RecordError) {
	c := &r.cur
	if rerr != nil {
		r.dead(c.out, c.rec, rerr)
		return
	}
	slab := r.slab
	if rop != c.op && !c.forksInSlab {
		slab = nil // a branch's copy beyond the slab: the garbage collector's
	}
	r.deliver(t, c.rec, rop, slab, c.at, c.wm, c.out)
}

// fork is the memory of a branch's copy of the input being evaluated:
// the slab's, which reserve made room for, or a new Record.
func (r *router) fork() *operator.Record {
	if r.cur.forksInSlab {
		return r.record()
	}
	return new(operator.Record)
}

// reserve makes room in the slab for n records of one input, so that all
// of them come from one slab (a slab's count of records sent on is only
// ever of the slab the router fills). It reports whether they fit: more
// copies than a slab holds come from the heap.
func (r *router) reserve(n int) (fits bool) {
	fits = n <= recordChunk
	if !fits {
		n = 1
	}
	if r.slab != nil && r.next+n > len(r.slab.recs) {
		r.slab.left(r.sent)
		r.slab = nil // record takes a new one
	}
	return fits
}

// newRecord is the memory of a branch's copy of a record the source side
// of group mode evaluates (never sent to a worker's slab accounting).
func newRecord() *operator.Record { return new(operator.Record) }

// placed is rec's event time and its partition's watermark before it:
// where it was placed when it was read, against its partition's clock,
// for a held record released now (given, asof.go), else placeInTime's.
func (r *router) placed(given *heldAt, src int, rec *kgo.Record, op *operator.Record, out [][]message) (at, wm int64, ok bool) {
	if given != nil {
		return given.at, given.wm, true
	}
	return r.placeInTime(src, rec, op, out)
}

// placeInTime evaluates rec's event time when its source has one (op is
// rec's operator.Record): the event time, and its partition's watermark
// before it. A record whose event time fails, or lies further ahead than
// max_future, goes to the dead letters (ok false).
func (r *router) placeInTime(src int, rec *kgo.Record, op *operator.Record, out [][]message) (at, wm int64, ok bool) {
	wm = window.NoWatermark
	if r.clocks == nil {
		return 0, wm, true
	}
	cl := r.clocks.of(rec.Topic, rec.Partition)
	if cl == nil {
		return 0, wm, true
	}
	if cl.src.reported {
		// Placed where it was read, before the join's repartition topic.
		at, wm, terr := carriedTime(rec)
		if terr != nil {
			r.branches.Recycle(op)
			r.dead(out, rec, terr)
			return 0, wm, false
		}
		if r.clocks.joinTimeFromRecords { // the planted bug
			cl.reports.report([]reportedTime{{PartitionTime: checkpoint.PartitionTime{Topic: rec.Topic, Partition: rec.Partition, MaxEventTime: at}}})
		}
		return at, wm, true
	}
	at, terr := r.eventTime(src, cl.src, rec, op)
	if terr != nil {
		r.branches.Recycle(op)
		r.dead(out, rec, terr)
		return 0, wm, false
	}
	if cl.src.idle > 0 {
		cl.lastRead = r.clocks.now()
	}
	if cl.src.maxFuture > 0 {
		if ferr := cl.src.future(at, r.clocks.now()); ferr != nil {
			// Never moves the watermark: one such time would make every
			// later record of the partition late.
			r.branches.Recycle(op)
			r.dead(out, rec, ferr)
			return 0, wm, false
		}
	}
	// Late per window, against the partition's own watermark
	// (eventtime.go), once the record reaches a window: a record behind
	// the watermark still counts in every window of its that is open.
	return at, cl.Observe(at, cl.src.outOfOrder), true
}

// deliver sends op, which reached target t, to its worker: by key group to
// a keyed operator (or, too late for every window of a window target, to
// the late output), by partition to an output. slab is where op came from
// (nil: it is not the worker's to give back).
func (r *router) deliver(t int, rec *kgo.Record, op *operator.Record, slab *recordSlab, at, wm int64, out [][]message) {
	tg := r.p.targets[t]
	m := message{kind: msgRecord, rec: rec, op: op, slab: slab, at: at, wm: wm, target: uint16(t)}
	var w int
	if tg.keyed() {
		if sh := r.p.shuffle; sh != nil && sh.byKey {
			// Not repartitioned: rec must be where its key's state is.
			if rerr := sh.checkKey(rec, op.GroupKey); rerr != nil {
				r.p.recycle(op)
				r.dead(out, rec, rerr)
				return
			}
		}
		m.hash = state.HashOf([]byte(op.GroupKey))
		w = state.WorkerOf(m.hash.Group(r.groups), r.workers, r.groups)
		if win := tg.window; win != nil && win.Late(at, wm) {
			r.p.recycle(op)
			if late := win.LateRecord(r.env, rec, at, wm); late != nil {
				out[w] = append(out[w], message{kind: msgLate, rec: late})
			}
			return
		}
	} else {
		w = partitionWorker(rec.Topic, rec.Partition, r.workers)
	}
	if slab != nil {
		r.sent++
	}
	out[w] = append(out[w], m)
}

// dead adds rec's dead letters to out, for the worker its input goes to.
func (r *router) dead(out [][]message, rec *kgo.Record, rerr *operator.RecordError) {
	w := r.deadLetterWorker(rec)
	out[w] = append(out[w], r.p.deadLetters(rec, rerr)...)
}

// deadLetterWorker is the worker rec's dead letters go through: by
// partition, for the order of an output's records; for a keyed job, whose
// dead letters have no key, any worker, as long as the same input always
// goes to the same one.
func (r *router) deadLetterWorker(rec *kgo.Record) int {
	if r.p.keyed {
		return int(uint32(rec.Partition) % uint32(r.workers))
	}
	return partitionWorker(rec.Topic, rec.Partition, r.workers)
}

// formatOf is the value format of topic's source, and the source's index.
// A poll's records come in runs of one topic (most jobs read one), so the
// last answer is kept instead of a map lookup per record.
func (r *router) formatOf(topic string) (config.Format, int) {
	if topic != r.lastTopic {
		r.lastTopic, r.lastFormat, r.lastSource = topic, r.p.format[topic], r.p.source[topic]
	}
	return r.lastFormat, r.lastSource
}

// record is the next unused operator.Record of the router's slab (r.slab
// after the call is the slab it is in).
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
// steps decide whether rec goes on, down which routes and to which key
// group, and run here alone. For each route to a keyed operator, what
// that operator reads of the result (shufflecodec.go: the group key, the
// aggregate's values evaluated, or an interval join's record) goes to
// the repartition partition that owns the key group (through any worker,
// which passes it to the sink), and its owner runs the keyed operator. A
// route to an output is written from here, as in single mode. Dead
// letters are written here, once.
func (r *router) shuffleOut(sh *shuffle, rec *kgo.Record, out [][]message) {
	format, src := r.formatOf(rec.Topic)
	// A linear keyed job's record goes no further than this call (what
	// crosses is encoded): the router's own Record will do. A graph's
	// may reach an output, whose worker keeps it.
	op := &r.shuffleOp
	if r.lin == nil {
		op = new(operator.Record)
	}
	*op = operator.Record{
		Key: rec.Key, Value: rec.Value, Timestamp: rec.Timestamp,
		Topic: rec.Topic, Partition: rec.Partition, Offset: rec.Offset,
		Format: format,
	}
	worker := int(uint32(rec.Partition) % uint32(r.workers))
	// Event time is placed here, on the source side, against the
	// partition's own clock: a record's lateness depends on its
	// partition's records alone, whoever owns its key group. A held
	// record was placed when it was read (asof.go).
	at, wm, ok := r.placed(r.released, src, rec, op, out)
	if !ok {
		return
	}
	op.AsOf = at
	emit := func(_, t int, rop *operator.Record, rerr *operator.RecordError) {
		if rerr != nil {
			r.dead(out, rec, rerr)
			return
		}
		tg := r.p.targets[t]
		if !tg.keyed() {
			w := partitionWorker(rec.Topic, rec.Partition, r.workers)
			// Its time too: a join's repartition topic carries it.
			out[w] = append(out[w], message{kind: msgRecord, rec: rec, op: rop, at: at, wm: wm, target: uint16(t)})
			return
		}
		kg := state.KeyGroupOf([]byte(rop.GroupKey), r.groups)
		q := sh.partitionOf(kg)
		if r.local != nil && r.local[q] {
			r.deliverLocal(t, rec, rop, at, wm, out)
			return
		}
		defer r.p.recycle(rop)
		if win := tg.window; win != nil && win.Late(at, wm) {
			// Late for every window: to the late topic from here, once.
			if late := win.LateRecord(r.env, rec, at, wm); late != nil {
				out[worker] = append(out[worker], message{kind: msgLate, rec: late})
			}
			return
		}
		s := shuffled{
			target: t, in: *rec, at: at, wm: wm, timed: r.clocks != nil,
			groupKey: rop.GroupKey, kind: rop.GroupKeyKind(),
		}
		var berr *operator.RecordError
		if tg.interval != nil {
			// The record whole (a join record's value), as single
			// mode's operator would read it: JSON would lose what a
			// schema format, an envelope or a map step gave it.
			s.interval, s.joinSide, s.noJoinKey = true, rop.JoinSide, rop.JoinNoKey
			s.body, berr = rop.AppendJoinValue(r.scratch[:0])
		} else {
			s.body, berr = r.aggregator(t).AppendInputs(r.scratch[:0], rop)
		}
		if berr != nil {
			// What the keyed operator would have failed on first: its
			// dead letter, written here.
			r.dead(out, rec, berr)
			return
		}
		r.scratch = s.body[:0]
		r.addFrame(sh, q, &s, out)
	}
	if r.lin != nil {
		keep, rerr := r.lin.Process(op)
		switch {
		case rerr != nil:
			emit(0, 0, op, rerr)
			r.lin.Recycle(op)
		case keep:
			emit(0, 0, op, nil)
		default:
			r.lin.Recycle(op)
		}
		return
	}
	if derr := r.branches.Process(src, op, newRecord, emit); derr != nil {
		r.branches.Recycle(op)
		r.dead(out, rec, derr)
	}
}

// deliverLocal hands rop, which reached keyed target t, to the worker of
// its key group in this process: the local shuffle (localshuffle.go).
// The keyed operator evaluates it as in single mode. A linear job's
// record is the router's own (shuffleOp), reused for the next input: the
// worker gets a copy from the slab.
func (r *router) deliverLocal(t int, rec *kgo.Record, rop *operator.Record, at, wm int64, out [][]message) {
	var slab *recordSlab
	if rop == &r.shuffleOp {
		r.reserve(1)
		cp := r.record()
		*cp = *rop
		rop, slab = cp, r.slab
	}
	r.deliver(t, rec, rop, slab, at, wm, out)
}

// addFrame adds s, encoded, to the bundle of repartition partition q,
// sending the bundle first if s would take it past maxBundleBytes.
func (r *router) addFrame(sh *shuffle, q int32, s *shuffled, out [][]message) {
	r.frame = appendShuffled(r.frame[:0], s)
	if int(q) >= len(r.bundles) {
		r.bundles = append(r.bundles, make([]shuffleBundle, int(q)+1-len(r.bundles))...)
	}
	b := &r.bundles[q]
	if len(b.value) > 0 && len(b.value)+binary.MaxVarintLen64+len(r.frame) > maxBundleBytes {
		r.sendBundle(sh, q, out)
	}
	if b.value == nil {
		b.value = make([]byte, 0, max(b.last+b.last/8, 2+binary.MaxVarintLen64+len(r.frame)))
		b.ts = s.in.Timestamp
	}
	b.value = appendFrame(b.value, r.frame)
	if s.in.Timestamp.After(b.ts) {
		b.ts = s.in.Timestamp
	}
}

// flushShuffle sends every bundle the source side filled since the last
// call, one repartition record each. The source task calls it before it
// sends a batch to the workers: what a poll routed goes in that poll's
// batches, so a bundle never spans a barrier, nor two epochs.
func (r *router) flushShuffle(out [][]message) {
	sh := r.p.shuffle
	for q := range r.bundles {
		if r.bundles[q].value != nil {
			r.sendBundle(sh, int32(q), out)
		}
	}
}

// sendBundle sends the bundle of repartition partition q on, through the
// worker that carries every one of q's bundles (so they reach the
// partition in the order they were filled).
func (r *router) sendBundle(sh *shuffle, q int32, out [][]message) {
	b := &r.bundles[q]
	w := int(uint32(q) % uint32(r.workers))
	out[w] = append(out[w], message{kind: msgShuffle, rec: &kgo.Record{
		Topic: sh.repartition, Partition: q, Value: b.value, Timestamp: b.ts,
	}})
	b.last, b.value = len(b.value), nil
}

// aggregator is the router's own copy of target t's aggregate (an
// Aggregator evaluates with a VM of its own).
func (r *router) aggregator(t int) *operator.Aggregator {
	if r.aggs == nil {
		r.aggs = make([]*operator.Aggregator, len(r.p.targets))
	}
	if r.aggs[t] == nil {
		r.aggs[t] = r.p.targets[t].agg.Clone()
	}
	return r.aggs[t]
}

// unshuffle is the keyed side of a group-mode keyed job: rec is a
// repartition record (shufflecodec.go), or a record of source partitions'
// event times (groupeventtime.go). The keyed operator takes what the
// source side evaluated; no step runs again.
func (r *router) unshuffle(rec *kgo.Record, out [][]message) {
	for _, h := range rec.Headers {
		if h.Key == headerEventTimes {
			if r.shuffled == nil { // the job no longer has event time
				return
			}
			if err := r.shuffled.observe(rec.Partition, rec.Value); err != nil {
				r.dead(out, rec, &operator.RecordError{Code: operator.CodeDecode, Reason: err.Error()})
			}
			return
		}
	}
	frames, err := shuffleFrames(rec.Value, r.frames[:0])
	if err != nil {
		// A bundle that does not parse: all of it a dead letter, nothing
		// taken from it.
		r.dead(out, rec, &operator.RecordError{Code: operator.CodeDecode, Reason: err.Error()})
		return
	}
	bundled := isBundle(rec.Value)
	// The inputs as read, one allocation for the bundle's (the workers
	// keep them until their outputs are written; they go together), and
	// room for the messages at once.
	ins := make([]kgo.Record, len(frames))
	if bundled {
		per := batchRoom(len(frames) / len(out))
		for w := range out {
			out[w] = slices.Grow(out[w], per)
		}
	}
	for i, f := range frames {
		r.unshuffleFrame(rec, &ins[i], f, bundled, i, len(frames), out)
	}
	clear(frames) // pins no record's value
	r.frames = frames[:0]
}

// unshuffleFrame hands the keyed operator frame i of n of rec, a
// repartition record (of a bundle, or rec's whole value), with in the
// input it carries.
func (r *router) unshuffleFrame(rec, in *kgo.Record, frame []byte, bundled bool, i, n int, out [][]message) {
	r.reserve(1)
	op := r.record()
	slab := r.slab
	s := &r.dec
	err := decodeShuffled(frame, s)
	if err == nil {
		err = r.checkShuffled(s)
	}
	if err != nil {
		// Not written by this job's source side: a dead letter, never a
		// silent drop. A bundle's frame is a dead letter of its own,
		// the frame its value.
		*op = operator.Record{}
		reason := err.Error()
		if bundled {
			reason = fmt.Sprintf("frame %d of %d of a bundle: %s", i+1, n, reason)
			rec = &kgo.Record{Topic: rec.Topic, Partition: rec.Partition, Offset: rec.Offset, Timestamp: rec.Timestamp, Value: frame}
		}
		r.dead(out, rec, &operator.RecordError{Code: operator.CodeDecode, Reason: reason})
		return
	}
	*in = s.in
	*op = operator.Record{
		Key: in.Key, Timestamp: in.Timestamp,
		Topic: in.Topic, Partition: in.Partition, Offset: in.Offset,
	}
	if s.interval {
		if rerr := op.SetJoinRecord(s.body, "the repartition topic"); rerr != nil {
			*op = operator.Record{}
			r.dead(out, in, rerr)
			return
		}
		op.JoinSide, op.JoinNoKey = s.joinSide, s.noJoinKey
		op.SetShuffled(s.groupKey, s.kind, nil)
	} else {
		op.SetShuffled(s.groupKey, s.kind, s.body)
	}
	r.deliver(s.target, in, op, slab, s.at, s.wm, out)
}

// checkShuffled refuses a repartition record that does not fit the job
// as this process runs it (a source side with another configuration).
func (r *router) checkShuffled(s *shuffled) error {
	if s.target >= len(r.p.targets) || !r.p.targets[s.target].keyed() {
		return fmt.Errorf("%w: operator %d is not a keyed operator of this job", errShuffled, s.target)
	}
	tg := r.p.targets[s.target]
	if s.interval != (tg.interval != nil) {
		return fmt.Errorf("%w: operator %d (%s) is not what the record was written for", errShuffled, s.target, tg.id)
	}
	if r.clocks != nil && !s.timed {
		return fmt.Errorf("%w: no event time, but the job has event time", errShuffled)
	}
	return nil
}

// eventTime is rec's event time: its source's timestamp expression, or
// the Kafka record timestamp.
func (r *router) eventTime(src int, st *sourceTime, rec *kgo.Record, op *operator.Record) (int64, *operator.RecordError) {
	if st.expr == nil {
		ms := rec.Timestamp.UnixMilli()
		return ms, operator.CheckEventTime(ms)
	}
	if r.lin != nil {
		return r.lin.EventTime(op, st.expr)
	}
	return r.branches.EventTime(src, op, st.expr)
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

// restoreCarriedKey gives a record of a join's repartition topic, keyed
// there by the join key, the key it had before the join, which it carries
// in header config.JoinKeyHeader: _key after the join is what it was
// before (config/joinrepartition.go). A record without the header keeps
// the join key.
func restoreCarriedKey(rec *kgo.Record) {
	for _, h := range rec.Headers {
		if h.Key == config.JoinKeyHeader {
			rec.Key = h.Value
			return
		}
	}
}
