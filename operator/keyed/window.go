package keyed

import (
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/checkpoint"
	"github.com/eoflow/pipeline/config"
	"github.com/eoflow/pipeline/internal/mutant"
	"github.com/eoflow/pipeline/operator"
	"github.com/eoflow/pipeline/sink"
	"github.com/eoflow/pipeline/state"
	"github.com/eoflow/pipeline/window"
)

// Headers of a record in the late topic, besides the source's
// (sink.HeaderTopic, HeaderPartition, HeaderOffset). Times are RFC 3339
// (operator.AppendTime: epoch milliseconds beyond the year 9999).
const (
	// HeaderLateWindowStart and HeaderLateWindowEnd are the window the
	// record missed that ends last (of a session window: the session
	// [ts, ts+gap) the record would have started).
	HeaderLateWindowStart = "pipeline.late.window_start"
	HeaderLateWindowEnd   = "pipeline.late.window_end"
	// HeaderLateWindows is how many windows the record missed, in
	// decimal: all of its windows (a late record counts in none), so 1
	// but for hopping windows, where they are the HeaderLateWindows
	// windows ending at HeaderLateWindowEnd and every advance before it.
	HeaderLateWindows = "pipeline.late.windows"
	// HeaderLateWatermark is the watermark the record was judged at: its
	// partition's just before it (or the job's, for a partition behind
	// it: see idle_timeout).
	HeaderLateWatermark = "pipeline.late.watermark"
)

// WindowSpec is a window step, compiled.
type WindowSpec struct {
	ID       string
	Spec     window.Spec
	Lateness int64 // allowed_lateness, ms
	Emit     config.WindowEmit
	// LateTopic receives late records ("" when they are dropped).
	LateTopic string
}

// Late reports whether a record of event time at is late for every one of
// its windows at watermark wm (each window's end + allowed_lateness is at
// most wm): it is written to the late topic, not counted.
func (w *WindowSpec) Late(at, wm int64) bool { return w.Spec.Late(at, w.Lateness, wm) }

// CompileWindow compiles the window step w of operator id of job cfg.
func CompileWindow(cfg *config.Config, id string, w *config.Window) *WindowSpec {
	wp := &WindowSpec{ID: id, Lateness: w.AllowedLateness.Milliseconds(), Emit: w.Emit}
	switch {
	case w.Tumbling > 0:
		wp.Spec = window.Spec{Kind: window.Tumbling, Size: w.Tumbling.Milliseconds()}
	case w.Hopping != nil:
		wp.Spec = window.Spec{Kind: window.Hopping, Size: w.Hopping.Size.Milliseconds(), Advance: w.Hopping.Advance.Milliseconds()}
	case w.Session != nil:
		wp.Spec = window.Spec{Kind: window.Session, Gap: w.Session.Gap.Milliseconds()}
	}
	if wp.Emit == "" {
		wp.Emit = config.EmitOnWindowClose
	}
	if w.LateRecords != config.LateDrop {
		wp.LateTopic = w.LateTopic
		if wp.LateTopic == "" {
			wp.LateTopic = cfg.Name + "-late"
		}
	}
	return wp
}

// LateRecord counts a record too late for all of its windows, judged at
// watermark, and returns it as written to the late topic (nil when late
// records are dropped): its key, value and
// timestamp unchanged, with headers saying where it was read, the windows
// it missed and the watermark they had closed at.
func (w *WindowSpec) LateRecord(env *Env, rec *kgo.Record, at, watermark int64) *kgo.Record {
	result := config.LateSideOutput
	if w.LateTopic == "" {
		result = config.LateDrop
	}
	if env != nil && env.Metrics != nil {
		env.Metrics.LateRecord(w.ID, string(result))
	}
	if w.LateTopic == "" {
		return nil
	}
	wins := w.Spec.Assign(nil, at)
	missed := wins[len(wins)-1]
	hdr := func(k string, v []byte) kgo.RecordHeader { return kgo.RecordHeader{Key: k, Value: v} }
	return &kgo.Record{
		Topic: w.LateTopic, Key: rec.Key, Value: rec.Value, Timestamp: rec.Timestamp,
		Headers: []kgo.RecordHeader{
			hdr(sink.HeaderTopic, []byte(rec.Topic)),
			hdr(sink.HeaderPartition, fmt.Appendf(nil, "%d", rec.Partition)),
			hdr(sink.HeaderOffset, fmt.Appendf(nil, "%d", rec.Offset)),
			hdr(HeaderLateWindowStart, operator.AppendTime(nil, missed.Start)),
			hdr(HeaderLateWindowEnd, operator.AppendTime(nil, missed.End)),
			hdr(HeaderLateWindows, fmt.Appendf(nil, "%d", len(wins))),
			hdr(HeaderLateWatermark, operator.AppendTime(nil, watermark)),
		},
	}
}

// Window is a windowed aggregate over the key groups of one worker. Its
// state is one operator.WindowState per group key: the key's open windows
// with their aggregates, so windows move with their key's group on restore
// and rescale, and sessions merge within one value. Timers say which keys
// have a window due at a watermark; they are not state: they are rebuilt
// from the store after a restore.
//
// A key's value grows with its open windows: tens of thousands of them
// (a silent partition holding the watermark back) make it larger than a
// record of the state topic, and the store then writes it in pieces. That
// was chosen over one changelog record per (key, window), which would
// bound a record by one window but change every window job's state
// format; state/pieces.go says why.
type Window struct {
	env   *Env
	sinks Sinks
	w     *WindowSpec
	agg   *operator.Aggregator
	store *state.Store[*operator.WindowState]
	// timers hold, per key, the time its earliest window fires (end +
	// allowed_lateness) — or a later time for a key added since: a key
	// popped with nothing due is looked at and re-armed (lazy deletion).
	timers      window.Timers
	timersBuilt bool
	// open counts the windows holding state over all workers, for the
	// metric.
	open *atomic.Int64
	buf  Buf

	// watermark is the job's watermark at the last barrier: a window
	// that ends (plus lateness) at or before it has fired.
	watermark int64

	wins []window.Window // scratch of Assign
	keys []string        // scratch of PopUntil
}

var _ Stateful = (*Window)(nil)

// NewWindow is a window of spec over agg (a clone of its own) on the key
// groups rng of groups, with an empty store, writing to sinks. open
// counts the window's open windows over every worker (one counter per
// window operator, shared by its workers' instances).
func NewWindow(env *Env, sinks Sinks, spec *WindowSpec, agg *operator.Aggregator, groups int, rng state.Range, open *atomic.Int64) (*Window, error) {
	agg = agg.Clone()
	store, err := state.New[*operator.WindowState](agg.ID(), groups, rng, windowCodec{agg})
	if err != nil {
		return nil, err
	}
	return &Window{env: env, sinks: sinks, w: spec, agg: agg, store: store, open: open, watermark: window.NoWatermark}, nil
}

// Resume sets what has fired before the operator starts: the watermark of
// the checkpoint it continues from.
func (o *Window) Resume(watermark int64) { o.watermark = watermark }

// ID is the window's operator id.
func (o *Window) ID() string { return o.agg.ID() }

// Retain is Stateful.Retain. The timers are rebuilt from the store on
// first use, which counts every key's windows as open again: what they
// counted so far is taken back first.
func (o *Window) Retain(keep func(kg state.KeyGroup, key []byte) bool) (int, error) {
	if o.store.DirtyLen() > 0 {
		return 0, state.ErrRetainDirty
	}
	if o.timersBuilt {
		for e := range o.store.All() {
			if ws, ok := o.store.Get(e.Key); ok {
				o.open.Add(-int64(len(ws.Windows)))
			}
		}
	}
	o.timers, o.timersBuilt = window.Timers{}, false
	return o.store.Retain(keep)
}

// Store is the window's keyed state.
func (o *Window) Store() Store { return o.store }

// Summary is the size of the window's state, for checkpoint records.
func (o *Window) Summary() checkpoint.StateSummary {
	return checkpoint.StateSummary{Operator: o.agg.ID(), Keys: uint64(o.store.Len()), Bytes: uint64(max(0, o.store.ApproxBytes()))}
}

// buildTimers arms a timer for every restored key (the store is filled by
// a restore before the first record).
func (o *Window) buildTimers() {
	if o.timersBuilt {
		return
	}
	o.timersBuilt = true
	for e := range o.store.All() {
		ws, ok := o.store.Get(e.Key)
		if !ok {
			continue
		}
		o.open.Add(int64(len(ws.Windows)))
		if due, ok := o.due(ws); ok {
			o.timers.Add(due, string(e.Key))
		}
	}
}

// due is when ws's earliest-ending window fires.
func (o *Window) due(ws *operator.WindowState) (int64, bool) {
	if len(ws.Windows) == 0 {
		return 0, false
	}
	end := ws.Windows[0].End
	for _, w := range ws.Windows[1:] {
		end = min(end, w.End)
	}
	return window.SatAdd(end, o.firingLateness()), true
}

// firingLateness is how long after its end (in event time) a window
// fires: the allowed lateness.
func (o *Window) firingLateness() int64 {
	if mutant.On("window-fires-ignoring-lateness") {
		return 0 // the bug: windows fire at their end
	}
	return o.w.Lateness
}

func (o *Window) Process(m *Input) Result {
	defer o.env.recycle(m.Op)
	o.buildTimers()
	// The windows closed for the record: those closed at its partition's
	// watermark (the source sent it on because one is open), and, only
	// for a partition behind the job's watermark (idle_timeout, a
	// partition added while the job ran), those fired meanwhile.
	wm := max(m.Wm, o.watermark)
	if o.w.Late(m.At, wm) {
		// Every window of the record fired already: it is late, as if
		// its partition had been behind (see the engine's eventtime.go).
		return Result{Late: o.late(m, wm)}
	}
	key := m.Op.GroupKey
	slot := o.store.Slot([]byte(key))
	ws, ok := slot.Get()
	if !ok {
		ws = &operator.WindowState{}
	}
	var updated []int // indices into ws.Windows of the windows the record changed
	var rerr *operator.RecordError
	opened := len(ws.Windows)
	if o.w.Spec.Kind == window.Session {
		updated, rerr = o.addSession(ws, m)
	} else {
		updated, rerr = o.addFixed(ws, m, wm)
	}
	if rerr != nil {
		return Result{DeadLetters: o.env.deadLetters(m.Rec, rerr)}
	}
	slot.Put([]byte(key), ws)
	// A timer per new window (a session's end moves with each record):
	// most records only add to windows that already have one.
	if len(ws.Windows) != opened || o.w.Spec.Kind == window.Session {
		if due, ok := o.due(ws); ok {
			o.timers.Add(due, key)
		}
	}
	if o.w.Emit != config.EmitEveryUpdate {
		return Result{}
	}
	var out []*kgo.Record
	for _, i := range updated {
		win := ws.Windows[i]
		outs, rerr := o.output(key, win)
		if rerr != nil {
			return Result{Outputs: out, DeadLetters: o.env.deadLetters(m.Rec, rerr)}
		}
		out = append(out, outs...)
	}
	return Result{Outputs: out}
}

// late is the late output of m, judged at watermark wm, or nothing when
// late records are dropped.
func (o *Window) late(m *Input, wm int64) []*kgo.Record {
	if rec := o.w.LateRecord(o.env, m.Rec, m.At, wm); rec != nil {
		return []*kgo.Record{rec}
	}
	return nil
}

// addFixed adds the record to each tumbling or hopping window it belongs
// to that is open at watermark wm, all or nothing: the values are the same
// record's in every window, so if one fails the first does, before
// anything changed. A closed window is skipped silently, as Flink skips a
// late window of a record its other windows take.
func (o *Window) addFixed(ws *operator.WindowState, m *Input, wm int64) ([]int, *operator.RecordError) {
	o.wins = o.w.Spec.Assign(o.wins[:0], m.At)
	var updated []int
	for _, win := range o.wins {
		if window.Fires(win, o.w.Lateness, wm) {
			continue // closed for the record: the later ones take it
		}
		i, found := slices.BinarySearchFunc(ws.Windows, win.Start, func(ow operator.OpenWindow, start int64) int {
			switch {
			case ow.Start < start:
				return -1
			case ow.Start > start:
				return 1
			}
			return 0
		})
		st := o.agg.NewState()
		if found {
			st = ws.Windows[i].State
		}
		if _, rerr := o.agg.Add(st, m.Op); rerr != nil {
			if len(updated) > 0 {
				panic("window: a value failed in one window after succeeding in another")
			}
			return nil, rerr
		}
		if !found {
			ws.Windows = slices.Insert(ws.Windows, i, operator.OpenWindow{Start: win.Start, End: win.End, State: st})
			o.open.Add(1)
			for j := range updated {
				if updated[j] >= i {
					updated[j]++
				}
			}
		}
		updated = append(updated, i)
	}
	return updated, nil
}

// addSession adds the record's session [at, at+gap) to the key's
// sessions, merging every session it overlaps into one.
func (o *Window) addSession(ws *operator.WindowState, m *Input) ([]int, *operator.RecordError) {
	sessions := make([]window.Window, len(ws.Windows))
	for i, w := range ws.Windows {
		sessions[i] = window.Window{Start: w.Start, End: w.End}
	}
	proto := o.w.Spec.Assign(o.wins[:0], m.At)[0]
	_, into, merged := window.MergeSession(sessions, proto)
	st := o.agg.NewState()
	if len(merged) > 0 {
		parts := make([]*operator.AggregateState, len(merged))
		for i, j := range merged {
			parts[i] = ws.Windows[j].State
		}
		var rerr *operator.RecordError
		if len(parts) == 1 {
			st = parts[0]
		} else if st, rerr = o.agg.MergeStates(parts...); rerr != nil {
			return nil, rerr
		}
	}
	// Add to a copy when the state is a session's own: all or nothing.
	if _, rerr := o.agg.Add(st, m.Op); rerr != nil {
		return nil, rerr
	}
	kept := ws.Windows[:0]
	for i, w := range ws.Windows {
		if !slices.Contains(merged, i) {
			kept = append(kept, w)
		}
	}
	o.open.Add(1 - int64(len(merged)))
	i, _ := slices.BinarySearchFunc(kept, into.Start, func(ow operator.OpenWindow, start int64) int {
		switch {
		case ow.Start < start:
			return -1
		case ow.Start > start:
			return 1
		}
		return 0
	})
	ws.Windows = slices.Insert(kept, i, operator.OpenWindow{Start: into.Start, End: into.End, State: st})
	return []int{i}, nil
}

// output is the result record of one window of key for every sink, with
// the window's last millisecond as its timestamp.
func (o *Window) output(key string, win operator.OpenWindow) ([]*kgo.Record, *operator.RecordError) {
	value := o.buf.cut(win.State.AppendWindowOutput(o.buf.start(), key, win.Start, win.End))
	return o.sinks.Keyed(&o.buf, time.UnixMilli(win.End-1), key, value)
}

// snapshot fires every window whose end plus allowed_lateness is at most
// the watermark — emitting it (on_window_close) and deleting it, and the
// key with its last window — then snapshots the state.
func (o *Window) Barrier(watermark int64) (Result, []state.ChangelogRecord, []checkpoint.StateSummary) {
	var outputs []*kgo.Record
	o.buildTimers()
	fired := 0
	o.watermark = max(o.watermark, watermark)
	if watermark != window.NoWatermark {
		o.keys = o.timers.PopUntil(watermark, o.keys[:0])
		for _, key := range o.keys {
			kb := []byte(key)
			ws, ok := o.store.Get(kb)
			if !ok {
				continue
			}
			kept := ws.Windows[:0]
			for _, win := range ws.Windows {
				if !window.Fires(window.Window{Start: win.Start, End: win.End}, o.firingLateness(), watermark) {
					kept = append(kept, win)
					continue
				}
				fired++
				if o.w.Emit == config.EmitOnWindowClose {
					outs, rerr := o.output(key, win)
					if rerr != nil {
						// A sink key expression that fails on the output: the
						// window's result goes to the dead-letter topics.
						outputs = append(outputs, o.env.deadLetters(&kgo.Record{Topic: o.w.ID, Key: kb, Value: win.State.AppendWindowOutput(nil, key, win.Start, win.End)}, rerr)...)
						continue
					}
					outputs = append(outputs, outs...)
				}
			}
			ws.Windows = kept
			if len(kept) == 0 {
				o.store.Delete(kb)
				continue
			}
			o.store.Put(kb, ws)
			if due, ok := o.due(ws); ok {
				o.timers.Add(due, key)
			}
		}
		o.open.Add(-int64(fired))
	}
	if m := o.env.Metrics; m != nil {
		if fired > 0 {
			m.WindowsFired(o.agg.ID(), fired)
		}
		m.SetOpenWindows(o.agg.ID(), o.open.Load())
	}
	return Result{Outputs: outputs}, o.store.Snapshot().Records(), []checkpoint.StateSummary{o.Summary()}
}

// windowCodec stores window states in the changelog.
type windowCodec struct{ agg *operator.Aggregator }

func (c windowCodec) Append(dst []byte, ws *operator.WindowState) []byte {
	b, err := c.agg.AppendWindowState(dst, ws)
	if err != nil {
		panic("encoding window state: " + err.Error())
	}
	return b
}

func (c windowCodec) Decode(b []byte) (*operator.WindowState, error) {
	return c.agg.DecodeWindowState(b)
}

// Open is how many windows hold state, over every worker's instance of
// the operator.
func (o *Window) Open() int64 { return o.open.Load() }
