package state

import (
	"bytes"
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
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
	// restorePieces gives key, which has no value, the value the
	// changelog holds in n pieces, joined.
	restorePieces(kg KeyGroup, key, value []byte, n int) error
}

var _ Restorable = (*Store[[]byte])(nil)

// Restorer rebuilds one worker's stores from the state topic. Give it the
// topic's records with Add in offset order, then call Finish; a later
// record for a key overrides an earlier one and a tombstone deletes.
// Records of several partitions may be interleaved in any way, provided
// the topic is partitioned by record key (each key lives in one
// partition). The same path restores a savepoint exported with All.
//
// Records of key groups outside the worker's range are skipped after
// reading three header fields; records of operators with no registered
// store are counted (see Unclaimed) and skipped. The pieces of a value
// larger than a record (see pieces.go) are kept aside until Finish joins
// them: only the whole topic says which pieces are a value's latest.
type Restorer struct {
	groups int
	rng    Range
	stores map[string]Restorable
	// unclaimed holds, per operator without a store, the record keys whose
	// latest record so far is a value: a key deleted since is not state
	// any more (an import deletes what a savepoint lacks, and compaction
	// removes the records only later).
	unclaimed map[string]map[string]struct{}
	// pieces holds the latest piece records of each key whose latest
	// piece so far is a value, for Finish.
	pieces map[pieceOf]*pendingValue
	stats  RestoreStats
}

// pieceOf names one key of one store in Restorer.pieces.
type pieceOf struct{ operator, key string }

// pendingValue is the pieces of one key read so far, by place.
type pendingValue struct {
	store Restorable
	group KeyGroup
	parts map[piece][]byte
}

// RestoreStats counts what a Restorer did with the records it was given.
type RestoreStats struct {
	Records     int // records given to Add
	Applied     int // values and tombstones applied to a store
	Pieces      int // pieces of values kept for Finish, and their tombstones
	Joined      int // values Finish joined from pieces and applied
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
	if s.Len() != 0 || s.DirtyLen() != 0 {
		return fmt.Errorf("state: restore operator %q: store is not empty", s.Operator())
	}
	return r.register(s)
}

// RegisterRetained adds a store that holds what Retain kept, to be
// filled with the records of the key groups it let go of and now holds
// again (a rebalance of a group-mode job gave them back, or gave it new
// ones). The records added must be of those key groups only: a record of
// a key the store kept would replace its value with an older one. The
// store must have no change its last Snapshot did not take.
func (r *Restorer) RegisterRetained(s Restorable) error {
	if s.DirtyLen() != 0 {
		return fmt.Errorf("state: restore operator %q: %w", s.Operator(), ErrRetainDirty)
	}
	return r.register(s)
}

func (r *Restorer) register(s Restorable) error {
	op := s.Operator()
	switch {
	case s.KeyGroups() != r.groups:
		return fmt.Errorf("state: restore operator %q: store has %d key groups, restore has %d", op, s.KeyGroups(), r.groups)
	case s.Range() != r.rng:
		return fmt.Errorf("state: restore operator %q: store holds key groups %v, restore is for %v", op, s.Range(), r.rng)
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
	op, kg, key, pc, err := parseChangelogKey(rec.Key)
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
			delete(live, string(rec.Key))
		} else {
			live[string(rec.Key)] = struct{}{}
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
	if pc.count != 0 {
		r.addPiece(s, kg, key, pc, rec.Value)
		return nil
	}
	if err := s.restore(kg, key, rec.Value); err != nil {
		return err
	}
	r.stats.Applied++
	return nil
}

// addPiece keeps the piece pc of key of store s, or forgets it for a
// tombstone.
func (r *Restorer) addPiece(s Restorable, kg KeyGroup, key []byte, pc piece, value []byte) {
	r.stats.Pieces++
	at := pieceOf{operator: s.Operator(), key: string(key)}
	p := r.pieces[at]
	if value == nil {
		if p != nil {
			delete(p.parts, pc)
			if len(p.parts) == 0 {
				delete(r.pieces, at)
			}
		}
		return
	}
	if p == nil {
		if r.pieces == nil {
			r.pieces = make(map[pieceOf]*pendingValue)
		}
		p = &pendingValue{store: s, group: kg, parts: make(map[piece][]byte)}
		r.pieces[at] = p
	}
	p.parts[pc] = bytes.Clone(value) // the caller's bytes are only valid during Add
}

// Finish joins the values written in pieces and gives them to their
// stores. Call it once every record has been added: until then, the
// stores lack those values. A value whose latest pieces are not one
// complete set (pieces 0..n-1 of one count n), or a key that has both a
// whole value and pieces, is ErrPieces: the topic is damaged.
func (r *Restorer) Finish() error {
	at := slices.SortedFunc(maps.Keys(r.pieces), func(a, b pieceOf) int {
		return cmp.Or(cmp.Compare(a.operator, b.operator), cmp.Compare(a.key, b.key))
	})
	for _, k := range at {
		p := r.pieces[k]
		n := 0
		for pc := range p.parts {
			n = max(n, pc.count)
		}
		// Complete: n parts, each of count n, so no other count either.
		complete, size := len(p.parts) == n, 0
		for i := 0; complete && i < n; i++ {
			part, ok := p.parts[piece{count: n, index: i}]
			complete = ok
			size += len(part)
		}
		if !complete {
			return fmt.Errorf("%w: operator %q, key %q: the state topic holds %s", ErrPieces, k.operator, k.key, describePieces(p.parts))
		}
		value := make([]byte, 0, size)
		for i := range n {
			value = append(value, p.parts[piece{count: n, index: i}]...)
		}
		if err := p.store.restorePieces(p.group, []byte(k.key), value, n); err != nil {
			return err
		}
		r.stats.Joined++
		delete(r.pieces, k)
	}
	return nil
}

// describePieces lists parts for an error: "pieces 0, 2 of 3".
func describePieces(parts map[piece][]byte) string {
	pcs := slices.SortedFunc(maps.Keys(parts), func(a, b piece) int {
		return cmp.Or(cmp.Compare(a.count, b.count), cmp.Compare(a.index, b.index))
	})
	var b strings.Builder
	for i, pc := range pcs {
		switch {
		case i == 0:
			b.WriteString("pieces ")
		case pcs[i-1].count != pc.count:
			fmt.Fprintf(&b, " of %d and ", pcs[i-1].count)
		default:
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%d", pc.index)
	}
	fmt.Fprintf(&b, " of %d", pcs[len(pcs)-1].count)
	return b.String()
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

// restorePieces gives key the value the changelog holds in n pieces.
func (s *Store[V]) restorePieces(kg KeyGroup, key, value []byte, n int) error {
	if e := s.byGroup[kg-s.rng.Start].entries[string(key)]; e != nil {
		return fmt.Errorf("%w: operator %q, key group %d, key %q: the state topic holds both a whole value and pieces of one", ErrPieces, s.operator, kg, key)
	}
	if err := s.restore(kg, key, value); err != nil {
		return err
	}
	s.byGroup[kg-s.rng.Start].entries[string(key)].inPieces = true
	s.split.restored(s.operator, kg, key, n)
	return nil
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
