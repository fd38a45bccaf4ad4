package engine

import (
	"iter"
	"slices"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/checkpoint"
	"github.com/eoflow/pipeline/config"
	"github.com/eoflow/pipeline/operator"
	"github.com/eoflow/pipeline/state"
	"github.com/eoflow/pipeline/window"
)

// keyedStore is what the restore, savepoints and the state summary need of
// an operator's store, whatever its value type.
type keyedStore interface {
	state.Restorable
	All() iter.Seq[state.Entry]
	Grow(keys int)
	ApproxBytes() int64
	// SetRecordLimit, KeysInPieces and EntryRecords: a value larger than
	// a record of the state topic goes there in pieces (state/pieces.go).
	SetRecordLimit(n int)
	KeysInPieces() int
	EntryRecords(e state.Entry) []state.ChangelogRecord
}

// stateful is a keyed operator with keyed state: the aggregate and the
// window.
type stateful interface {
	keyedOperator
	operatorID() string
	keyedStore() keyedStore
	summary() checkpoint.StateSummary
}

var (
	_ stateful = (*aggregateOp)(nil)
	_ stateful = (*windowOp)(nil)
)

func (o *aggregateOp) operatorID() string     { return o.agg.ID() }
func (o *aggregateOp) keyedStore() keyedStore { return o.store }

// windowOp is a windowed aggregate over the key groups of one worker. Its
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
type windowOp struct {
	p     *plan
	t     *target
	w     *windowPlan
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
	buf  outBuf

	// watermark is the job's watermark at the last barrier: a window
	// that ends (plus lateness) at or before it has fired.
	watermark int64

	wins []window.Window // scratch of Assign
	keys []string        // scratch of PopUntil
}

func (o *windowOp) operatorID() string     { return o.agg.ID() }
func (o *windowOp) keyedStore() keyedStore { return o.store }

func (o *windowOp) summary() checkpoint.StateSummary {
	return checkpoint.StateSummary{Operator: o.agg.ID(), Keys: uint64(o.store.Len()), Bytes: uint64(max(0, o.store.ApproxBytes()))}
}

// buildTimers arms a timer for every restored key (the store is filled by
// a restore before the first record).
func (o *windowOp) buildTimers() {
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
func (o *windowOp) due(ws *operator.WindowState) (int64, bool) {
	if len(ws.Windows) == 0 {
		return 0, false
	}
	end := ws.Windows[0].End
	for _, w := range ws.Windows[1:] {
		end = min(end, w.End)
	}
	return window.SatAdd(end, o.w.lateness), true
}

func (o *windowOp) process(m message) (out []*kgo.Record, deadLetters []message) {
	defer o.p.recycle(m.op)
	o.buildTimers()
	// The windows closed for the record: those closed at its partition's
	// watermark (the source sent it on because one is open), and, only
	// for a partition behind the job's watermark (idle_timeout, a
	// partition added while the job ran), those fired meanwhile.
	wm := max(m.wm, o.watermark)
	if o.w.spec.Late(m.at, o.w.lateness, wm) {
		// Every window of the record fired already: it is late, as if
		// its partition had been behind (eventtime.go).
		return nil, o.late(m, wm)
	}
	key := m.op.GroupKey
	slot := o.store.Slot([]byte(key))
	ws, ok := slot.Get()
	if !ok {
		ws = &operator.WindowState{}
	}
	var updated []int // indices into ws.Windows of the windows the record changed
	var rerr *operator.RecordError
	opened := len(ws.Windows)
	if o.w.spec.Kind == window.Session {
		updated, rerr = o.addSession(ws, m)
	} else {
		updated, rerr = o.addFixed(ws, m, wm)
	}
	if rerr != nil {
		return nil, o.p.deadLetters(m.rec, rerr)
	}
	slot.Put([]byte(key), ws)
	// A timer per new window (a session's end moves with each record):
	// most records only add to windows that already have one.
	if len(ws.Windows) != opened || o.w.spec.Kind == window.Session {
		if due, ok := o.due(ws); ok {
			o.timers.Add(due, key)
		}
	}
	if o.w.emit != config.EmitEveryUpdate {
		return nil, nil
	}
	for _, i := range updated {
		win := ws.Windows[i]
		outs, rerr := o.output(key, win)
		if rerr != nil {
			return out, o.p.deadLetters(m.rec, rerr)
		}
		out = append(out, outs...)
	}
	return out, nil
}

// late is the late output of m, judged at watermark wm, or nothing when
// late records are dropped.
func (o *windowOp) late(m message, wm int64) []message {
	result := config.LateSideOutput
	if o.w.lateTopic == "" {
		result = config.LateDrop
	}
	if o.p.metrics != nil {
		o.p.metrics.LateRecord(string(result))
	}
	if o.w.lateTopic == "" {
		return nil
	}
	return []message{{kind: msgLate, rec: o.w.lateRecord(m.rec, m.at, wm)}}
}

// addFixed adds the record to each tumbling or hopping window it belongs
// to that is open at watermark wm, all or nothing: the values are the same
// record's in every window, so if one fails the first does, before
// anything changed. A closed window is skipped silently, as Flink skips a
// late window of a record its other windows take.
func (o *windowOp) addFixed(ws *operator.WindowState, m message, wm int64) ([]int, *operator.RecordError) {
	o.wins = o.w.spec.Assign(o.wins[:0], m.at)
	var updated []int
	for _, win := range o.wins {
		if window.Fires(win, o.w.lateness, wm) {
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
		if _, rerr := o.agg.Add(st, m.op); rerr != nil {
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
func (o *windowOp) addSession(ws *operator.WindowState, m message) ([]int, *operator.RecordError) {
	sessions := make([]window.Window, len(ws.Windows))
	for i, w := range ws.Windows {
		sessions[i] = window.Window{Start: w.Start, End: w.End}
	}
	proto := o.w.spec.Assign(o.wins[:0], m.at)[0]
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
	if _, rerr := o.agg.Add(st, m.op); rerr != nil {
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
func (o *windowOp) output(key string, win operator.OpenWindow) ([]*kgo.Record, *operator.RecordError) {
	value := o.buf.cut(win.State.AppendWindowOutput(o.buf.start(), key, win.Start, win.End))
	return o.t.keyedOutputs(&o.buf, time.UnixMilli(win.End-1), key, value)
}

// snapshot fires every window whose end plus allowed_lateness is at most
// the watermark — emitting it (on_window_close) and deleting it, and the
// key with its last window — then snapshots the state.
func (o *windowOp) snapshot(watermark int64) (outputs []*kgo.Record, changes stateChanges, summary []checkpoint.StateSummary) {
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
				if !window.Fires(window.Window{Start: win.Start, End: win.End}, o.w.lateness, watermark) {
					kept = append(kept, win)
					continue
				}
				fired++
				if o.w.emit == config.EmitOnWindowClose {
					outs, rerr := o.output(key, win)
					if rerr != nil {
						// A sink key expression that fails on the output: the
						// window's result goes to the dead-letter topics.
						for _, dl := range o.p.deadLetters(&kgo.Record{Topic: o.w.id, Key: kb, Value: win.State.AppendWindowOutput(nil, key, win.Start, win.End)}, rerr) {
							outputs = append(outputs, dl.rec)
						}
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
	if m := o.p.metrics; m != nil {
		if fired > 0 {
			m.WindowsFired(o.agg.ID(), fired)
		}
		m.SetOpenWindows(o.agg.ID(), o.open.Load())
	}
	changes = o.p.changelog(o.store.Snapshot())
	return outputs, changes, []checkpoint.StateSummary{o.summary()}
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
