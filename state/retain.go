package state

import "errors"

// ErrRetainDirty is Retain's error on a store with changes not yet
// snapshotted: the keys it lets go of must be exactly what the changelog
// holds of them, or their next owner restores something else.
var ErrRetainDirty = errors.New("state: Retain on a store with changes since its last snapshot")

// Retain lets go of every key for which keep reports false, as if the
// store had never held it: no tombstone, no change for the next Snapshot.
// It is for a worker that keeps its state across a rebalance of a
// group-mode job (the key groups that moved away are another process's
// now, and the changelog still holds them for it), so it is refused
// (ErrRetainDirty) unless the last Snapshot took every change. It returns
// how many keys it dropped.
func (s *Store[V]) Retain(keep func(kg KeyGroup, key []byte) bool) (int, error) {
	if s.dirty > 0 {
		return 0, ErrRetainDirty
	}
	dropped := 0
	for i := range s.byGroup {
		g := &s.byGroup[i]
		kg := s.rng.Start + KeyGroup(i)
		for k, e := range g.entries {
			if keep(kg, []byte(k)) {
				continue
			}
			if !e.deleted {
				s.live--
				s.bytes -= int64(len(e.key) + e.size)
				dropped++
			}
			if e.inPieces {
				s.split.forget(s.operator, kg, []byte(k))
			}
			delete(g.entries, k)
		}
		if len(g.entries) == 0 {
			g.entries = nil // a group that moved away holds no map
		}
	}
	return dropped, nil
}

// Retain is Store.Retain.
func (s *Compact) Retain(keep func(kg KeyGroup, key []byte) bool) (int, error) {
	if s.dirtyN > 0 {
		return 0, ErrRetainDirty
	}
	dropped := 0
	m := s.m
	for i, sl := range m.table {
		if sl == 0 || sl == slotRemoved {
			continue
		}
		r := m.record(uint32(sl))
		kg := KeyGroup(uint32(sl>>32) % uint32(s.groups))
		if keep(kg, r.key()) {
			continue
		}
		if r.flags()&flagDeleted == 0 {
			s.live--
			s.bytes -= int64(r.klen + r.vlen)
			dropped++
		}
		if r.flags()&flagInPieces != 0 {
			s.split.forget(s.operator, kg, r.key())
		}
		s.remove(i, r)
	}
	if m.removed > 0 && m.removed*2 > len(m.table)/2 {
		// Most of the table moved away: probes would walk the removed
		// slots until the next growth.
		s.rehash(tableFor(s.live))
	}
	s.compactIfWasteful()
	return dropped, nil
}
