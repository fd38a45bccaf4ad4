package operator

// AsOfJoin is a stream–table join as of event time, as a pure machine:
// the table's records go in with TableRecord, the stream's with
// StreamRecord, and Barrier (at each checkpoint) releases the held stream
// records the table's event time has passed, each with the table's value
// as of its event time. history bounds the versions kept: at a barrier
// with the job's watermark W (the stream's) and the table's event time
// T, the table's horizon moves to min(W, T) − history, but never past the
// least held record's event time, which still needs its version.
//
// What a released record meets depends on the table's topic and the
// record's event time alone, not on the order the two topics were read
// in, provided each table partition's records come in event-time order
// (as with LogAppendTime, or a producer that stamps in order): a record
// of a partition at an event time below one it gave already is applied,
// but stream records released meanwhile did not wait for it. A stream
// record more than history behind the horizon is late: it finds nothing
// (Kafka Streams' versioned store returns null for a query older than its
// history retention), and which records are late depends on the
// watermark at their arrival, as a window's late records do.
type AsOfJoin struct {
	table   *VersionedTable
	clock   *TableClock
	hold    Hold
	history int64
}

// AsOfResult is one stream record a barrier released, and what the table
// held for its key as of its event time: the value, the bytes it was
// decoded from, and whether there was one. Late: the record came after
// the horizon had passed its event time, and found nothing.
type AsOfResult struct {
	Held  HeldRecord
	Value any
	Raw   []byte
	Found bool
	Late  bool
}

// NewAsOfJoin joins with table t (its formats) read from the given
// partitions, keeping history (in the event time's unit, milliseconds) of
// versions behind the horizon.
func NewAsOfJoin(t *Table, partitions []int32, history int64) *AsOfJoin {
	return &AsOfJoin{table: NewVersionedTable(t), clock: NewTableClock(partitions), history: history}
}

// TableRecord applies a record of table partition p at event time at
// (its timestamp); as VersionedTable.ApplyAt.
func (j *AsOfJoin) TableRecord(p int32, key, value []byte, at int64) (late bool, skip SkipReason, rerr *RecordError) {
	j.clock.Observe(p, at)
	return j.table.ApplyAt(key, value, at)
}

// StreamRecord holds a stream record until the table's event time passes
// it (Barrier).
func (j *AsOfJoin) StreamRecord(r HeldRecord) { j.hold.Add(r) }

// Held is the stream records held.
func (j *AsOfJoin) Held() *Hold { return &j.hold }

// SetHeld replaces the held records (a restore).
func (j *AsOfJoin) SetHeld(h *Hold) { j.hold = *h }

// Table is the versioned table.
func (j *AsOfJoin) Table() *VersionedTable { return j.table }

// Barrier releases, in order (Hold.Release), the held records before the
// table's event time, each looked up as of its event time, then moves the
// horizon. wm is the job's watermark (ok false: none yet); idle says
// which table partitions are idle.
func (j *AsOfJoin) Barrier(wm int64, wmOK bool, idle func(p int32) bool) []AsOfResult {
	tw, ok := j.clock.Watermark(idle)
	if !ok {
		return nil
	}
	var out []AsOfResult
	for _, h := range j.hold.Release(tw) {
		v, raw, found, late := j.table.LookupAsOf(h.Key, h.At)
		out = append(out, AsOfResult{Held: h, Value: v, Raw: raw, Found: found, Late: late})
	}
	if !wmOK {
		return out
	}
	horizon := min(wm, tw)
	if horizon < minInt64+j.history {
		return out
	}
	horizon -= j.history
	if m, ok := j.hold.Min(); ok {
		horizon = min(horizon, m)
	}
	j.table.Expire(horizon)
	return out
}

const minInt64 = -1 << 63
