package operator

import (
	"math"
	"slices"
	"sort"
	"sync"
)

// A versioned table is a table as of any event time within its history:
// each key keeps the values its topic gave it, each at the record's event
// time (its Kafka timestamp), so that a join with time: event_time can
// look a stream record up as of the record's own event time. The rules
// are Kafka Streams' versioned key-value store's (KIP-914):
//
//  1. A lookup of key as of t finds the version with the largest event
//     time at or before t; a tombstone there, or no version, is no value.
//  2. Two versions of one key at one event time: the later record (in its
//     partition's order) replaces the earlier, as a put with an equal
//     timestamp does in Kafka Streams.
//  3. Expire(h) may drop what no lookup as of h or later can find: for
//     each key, every version older than the newest at or before h, and
//     that one too when it is a tombstone. h is the table's horizon from
//     then on (it only grows).
//  4. A lookup as of a time before the horizon is late: its version may
//     be gone, so it finds nothing (Kafka Streams returns null for a
//     query older than the store's history retention), and says so.
//  5. A record at an event time before the horizon is late too: it is not
//     applied (Kafka Streams drops a put older than history retention),
//     since a lookup that could find it is late by rule 4 anyway.
//
// Unlike Table, a versioned table is not meant for lookups while it is
// applied to by another goroutine in arrival order: a join as of event
// time looks a record up only once the table's event time has passed the
// record's (TableClock, Hold), so that the version it needs has surely
// been applied, whatever the order the two topics were read in. It still
// takes a lock, so that metrics may read its size meanwhile.
type VersionedTable struct {
	t  *Table // decodes keys and values, in the table's formats
	mu sync.RWMutex
	// keys holds each key's versions, oldest first, at distinct times.
	keys map[string][]tableVersion
	// horizon is the largest Expire; lookups before it are late.
	horizon    int64
	hasHorizon bool
	versions   int64
}

// tableVersion is one value of a key from an event time on; deleted: a
// tombstone (no value from then on).
type tableVersion struct {
	at      int64
	value   any
	raw     []byte
	deleted bool
}

// NewVersionedTable is an empty versioned table decoding as t does (its
// formats and schema decoders).
func NewVersionedTable(t *Table) *VersionedTable {
	return &VersionedTable{t: t, keys: map[string][]tableVersion{}}
}

// ApplyAt applies one record of the table's topic at event time at:
// value nil is a tombstone. late reports a record before the horizon,
// which is not applied (rule 5); skip is as Table.Apply's.
func (vt *VersionedTable) ApplyAt(key, value []byte, at int64) (late bool, skip SkipReason, rerr *RecordError) {
	vt.mu.Lock()
	defer vt.mu.Unlock()
	k, v, skip, rerr := vt.t.decodeRecord(&vt.t.dec, key, value)
	if skip != "" {
		return false, skip, rerr
	}
	if vt.hasHorizon && at < vt.horizon {
		return true, "", nil
	}
	nv := tableVersion{at: at, value: v, raw: value, deleted: value == nil}
	vs := vt.keys[k]
	i := sort.Search(len(vs), func(i int) bool { return vs[i].at >= at })
	switch {
	case i < len(vs) && vs[i].at == at:
		vs[i] = nv // rule 2
	default:
		vs = slices.Insert(vs, i, nv)
		vt.versions++
	}
	vt.keys[k] = vs
	return false, "", nil
}

// LookupAsOf returns the value key had at event time at (rule 1), the
// bytes it was decoded from, and whether there was one; late: at is
// before the horizon, and nothing is found (rule 4).
func (vt *VersionedTable) LookupAsOf(key string, at int64) (value any, raw []byte, found, late bool) {
	vt.mu.RLock()
	defer vt.mu.RUnlock()
	if vt.hasHorizon && at < vt.horizon {
		return nil, nil, false, true
	}
	vs := vt.keys[key]
	i := sort.Search(len(vs), func(i int) bool { return vs[i].at > at }) - 1
	if i < 0 || vs[i].deleted {
		return nil, nil, false, false
	}
	return vs[i].value, vs[i].raw, true, false
}

// Expire drops the versions no lookup as of h or later can find (rule 3)
// and makes h the horizon, if it is past the current one.
func (vt *VersionedTable) Expire(h int64) {
	vt.mu.Lock()
	defer vt.mu.Unlock()
	if vt.hasHorizon && h <= vt.horizon {
		return
	}
	vt.horizon, vt.hasHorizon = h, true
	for k, vs := range vt.keys {
		// The newest version at or before h stays (a lookup as of h finds
		// it), unless it is a tombstone: then no lookup needs it.
		i := sort.Search(len(vs), func(i int) bool { return vs[i].at > h }) - 1
		drop := max(i, 0)
		if i >= 0 && vs[i].deleted {
			drop = i + 1
		}
		if drop == 0 {
			continue
		}
		vt.versions -= int64(drop)
		if drop == len(vs) {
			delete(vt.keys, k)
			continue
		}
		vt.keys[k] = slices.Clone(vs[drop:])
	}
}

// Horizon is the table's horizon (ok false: none yet).
func (vt *VersionedTable) Horizon() (h int64, ok bool) {
	vt.mu.RLock()
	defer vt.mu.RUnlock()
	return vt.horizon, vt.hasHorizon
}

// Len is how many keys, and how many versions, the table holds.
func (vt *VersionedTable) Len() (keys, versions int64) {
	vt.mu.RLock()
	defer vt.mu.RUnlock()
	return int64(len(vt.keys)), vt.versions
}

// TableClock is a table's event time: the least over its partitions of
// the largest event time each has given, as a source's watermark is the
// least over its partitions'. A partition that has given nothing yet
// holds it back, unless it is idle; when every partition is idle the
// table holds nothing back (Watermark is math.MaxInt64), as Flink leaves
// an idle input out of a join's watermark.
type TableClock struct {
	max  map[int32]int64
	seen map[int32]bool
}

// NewTableClock is the clock of a table with the given partitions.
func NewTableClock(partitions []int32) *TableClock {
	c := &TableClock{max: map[int32]int64{}, seen: map[int32]bool{}}
	for _, p := range partitions {
		c.seen[p] = false
	}
	return c
}

// Observe notes a record of partition p at event time at.
func (c *TableClock) Observe(p int32, at int64) {
	if !c.seen[p] || at > c.max[p] {
		c.max[p] = at
	}
	c.seen[p] = true
}

// Watermark is the table's event time, leaving out the partitions idle
// says are idle (nil: none); ok false: a partition that is not idle has
// given no record yet.
func (c *TableClock) Watermark(idle func(p int32) bool) (wm int64, ok bool) {
	wm, any := int64(math.MaxInt64), false
	for p, seen := range c.seen {
		if idle != nil && idle(p) {
			continue
		}
		if !seen {
			return 0, false
		}
		any = true
		wm = min(wm, c.max[p])
	}
	if !any {
		return math.MaxInt64, true
	}
	return wm, true
}
