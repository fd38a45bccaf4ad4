package state

import (
	"fmt"
	"slices"
)

// Restorable is a store a Restorer can fill: *Store[V] or *Compact, so
// that one Restorer can fill the stores of several operators of either
// form.
type Restorable interface {
	Operator() string
	KeyGroups() int
	Range() Range
	Len() int
	DirtyLen() int
	restore(kg KeyGroup, key, value []byte) error
}

var _ Restorable = (*Store[[]byte])(nil)

// Restorer rebuilds one worker's stores from the state topic. Give it the
// topic's records with Add in offset order; a later record for a key
// overrides an earlier one and a tombstone deletes. Records of several
// partitions may be interleaved in any way, provided the topic is
// partitioned by record key (each key lives in one partition). The same
// path restores a savepoint exported with All.
//
// Records of key groups outside the worker's range are skipped after
// reading three header fields; records of operators with no registered
// store are counted (see Unclaimed) and skipped.
type Restorer struct {
	groups int
	rng    Range
	stores map[string]Restorable
	// unclaimed holds, per operator without a store, the keys whose latest
	// record so far is a value: a key deleted since is not state any more
	// (an import deletes what a savepoint lacks, and compaction removes
	// the records only later).
	unclaimed map[string]map[string]struct{}
	stats     RestoreStats
}

// RestoreStats counts what a Restorer did with the records it was given.
type RestoreStats struct {
	Records     int // records given to Add
	Applied     int // values and tombstones applied to a store
	OtherGroups int // skipped: key group owned by another worker
	Unclaimed   int // skipped: no store registered for the operator
}

// NewRestorer returns a Restorer for the worker owning r, in a job of
// groups key groups.
func NewRestorer(groups int, r Range) (*Restorer, error) {
	if err := CheckKeyGroups(groups); err != nil {
		return nil, err
	}
	if r.Start > r.End || int(r.End) > groups {
		return nil, fmt.Errorf("state: key-group range %v does not fit %d key groups", r, groups)
	}
	return &Restorer{
		groups:    groups,
		rng:       r,
		stores:    make(map[string]Restorable),
		unclaimed: make(map[string]map[string]struct{}),
	}, nil
}

// Register adds an empty store to be filled with its operator's records.
// It must have the Restorer's key-group count and range.
func (r *Restorer) Register(s Restorable) error {
	op := s.Operator()
	switch {
	case s.KeyGroups() != r.groups:
		return fmt.Errorf("state: restore operator %q: store has %d key groups, restore has %d", op, s.KeyGroups(), r.groups)
	case s.Range() != r.rng:
		return fmt.Errorf("state: restore operator %q: store holds key groups %v, restore is for %v", op, s.Range(), r.rng)
	case s.Len() != 0 || s.DirtyLen() != 0:
		return fmt.Errorf("state: restore operator %q: store is not empty", op)
	}
	if _, dup := r.stores[op]; dup {
		return fmt.Errorf("state: restore operator %q: registered twice", op)
	}
	r.stores[op] = s
	return nil
}

// Add applies one state-topic record. It fails on a key it cannot decode,
// on a key group that does not fit the job's key-group count
// (ErrKeyGroupCount), and on a value the operator's Codec rejects; the
// caller should add the record's partition and offset to the error. After
// an error the stores are incomplete and must be discarded.
func (r *Restorer) Add(rec ChangelogRecord) error {
	r.stats.Records++
	op, kg, key, err := parseChangelogKey(rec.Key)
	if err != nil {
		return err
	}
	if int(kg) >= r.groups {
		return fmt.Errorf("%w: a record of operator %q is in key group %d, but the job has %d key groups",
			ErrKeyGroupCount, op, kg, r.groups)
	}
	if !r.rng.Contains(kg) {
		r.stats.OtherGroups++
		return nil
	}
	s, ok := r.stores[string(op)]
	if !ok {
		r.stats.Unclaimed++
		live := r.unclaimed[string(op)]
		if live == nil {
			live = map[string]struct{}{}
			r.unclaimed[string(op)] = live
		}
		if rec.Value == nil {
			delete(live, string(key))
		} else {
			live[string(key)] = struct{}{}
		}
		return nil
	}
	// The recorded group must be the key's group under today's count; a
	// count changed from G to a multiple or divisor of it would otherwise
	// pass the check above and scatter keys into the wrong groups.
	if want := KeyGroupOf(key, r.groups); want != kg {
		return fmt.Errorf("%w: a record of operator %q is in key group %d, but its key belongs to group %d of %d",
			ErrKeyGroupCount, op, kg, want, r.groups)
	}
	if err := s.restore(kg, key, rec.Value); err != nil {
		return err
	}
	r.stats.Applied++
	return nil
}

// Stats reports what Add has done so far.
func (r *Restorer) Stats() RestoreStats { return r.stats }

// Unclaimed lists, sorted, the operators that hold state (a key whose
// latest record is a value) in this worker's key groups but have no
// registered store: state of an operator that was removed or renamed.
// Refuse to start (or ask the user to confirm dropping it, like Flink's
// --allowNonRestoredState). An operator whose keys were all deleted is not
// listed.
func (r *Restorer) Unclaimed() []string {
	ops := make([]string, 0, len(r.unclaimed))
	for op, live := range r.unclaimed {
		if len(live) > 0 {
			ops = append(ops, op)
		}
	}
	slices.Sort(ops)
	return ops
}

// restore applies one changelog value (nil: tombstone) of kg to s. The
// key's value is marked persisted and clean: it is in the changelog.
func (s *Store[V]) restore(kg KeyGroup, key, value []byte) error {
	g := &s.byGroup[kg-s.rng.Start]
	e := g.entries[string(key)]
	if value == nil {
		if e != nil {
			delete(g.entries, e.key)
			s.live--
			s.bytes -= int64(len(e.key) + e.size)
		}
		return nil
	}
	v, err := s.codec.Decode(value)
	if err != nil {
		return fmt.Errorf("state: restore operator %q, key group %d, key %q: %w", s.operator, kg, key, err)
	}
	if e == nil {
		if g.entries == nil {
			g.entries = make(map[string]*entry[V])
		}
		e = newEntry[V](key)
		e.persisted = true
		g.entries[e.key] = e
		s.live++
		s.bytes += int64(len(e.key))
	}
	e.value = v
	s.bytes += int64(len(value) - e.size)
	e.size = len(value)
	return nil
}
