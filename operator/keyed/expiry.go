package keyed

import (
	"time"

	"github.com/eoflow/pipeline/operator"
	"github.com/eoflow/pipeline/window"
)

// expiry is aggregate.ttl: a key whose state was not updated for the TTL
// is deleted at a barrier — a tombstone in the state topic, in that
// checkpoint's transaction — and a later record for it starts afresh.
// Time is event time when the job has it (a key updated by a record of
// event time t expires at the first barrier whose watermark is at least
// t + ttl: deterministic, like windows) and processing time otherwise.
//
// Each key has one timer, armed when the key is created or restored: a
// timer that comes due for a key updated since is re-armed at the key's
// real expiry, so a record costs no timer work.
type expiry struct {
	ttl       int64 // ms
	eventTime bool
	now       func() time.Time
	timers    window.Timers
	// built: the timers of the restored keys are armed (on first use, as
	// the store is filled by a restore before).
	built bool
	keys  []string
	// deleted are the keys the last expire deleted.
	deleted []string
}

// touch records that st (of key, new when created) was updated by a
// record of event time at, and reports whether its update time changed.
func (e *expiry) touch(st *operator.AggregateState, at int64, created bool, key string) bool {
	t := at
	if !e.eventTime {
		t = e.now().UnixMilli()
	}
	if created {
		st.SetUpdated(t)
		e.timers.Add(window.SatAdd(t, e.ttl), key)
		return true
	}
	if t <= st.Updated() {
		return false // an older event never moves the expiry back
	}
	st.SetUpdated(t)
	return true
}

// expire deletes the keys of o's store whose time is up at the barrier
// with watermark (event time) or now (processing time), and returns them
// (valid until the next call) and the time it judged them at.
func (e *expiry) expire(o *Aggregate, watermark int64) (deleted []string, at int64) {
	now := watermark
	if !e.eventTime {
		now = e.now().UnixMilli()
	}
	store := o.store
	if !e.built {
		e.built = true
		for en := range store.All() {
			o.decode(en.Value)
			// A state restored without an update time (written before the
			// TTL was set) counts from its first barrier here.
			e.timers.Add(window.SatAdd(o.st.Updated(), e.ttl), string(en.Key))
		}
	}
	if now == window.NoWatermark {
		return nil, now
	}
	e.deleted = e.deleted[:0]
	e.keys = e.timers.PopUntil(now, e.keys[:0])
	for _, key := range e.keys {
		kb := []byte(key)
		slot := store.Slot(kb)
		st, ok := o.load(slot)
		switch {
		case !ok:
		case st.Updated() == 0:
			st.SetUpdated(now)
			o.put(slot, kb, st)
			e.timers.Add(window.SatAdd(now, e.ttl), key)
		case window.SatAdd(st.Updated(), e.ttl) <= now:
			store.Delete(kb)
			e.deleted = append(e.deleted, key)
		default:
			e.timers.Add(window.SatAdd(st.Updated(), e.ttl), key)
		}
	}
	return e.deleted, now
}
