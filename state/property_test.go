package state

import (
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"testing"
)

var (
	propertySeed  = flag.Uint64("state.seed", 0, "replay one seed of TestChangelogProperty")
	propertySeeds = flag.Int("state.seeds", 400, "seeds TestChangelogProperty runs (-short: 50)")
)

// TestChangelogProperty runs random sequences of Put, Delete, Get and
// checkpoints (committed or aborted), with crashes and rescales, against a
// map model. The state topic is the concatenation of the committed deltas,
// sometimes compacted and read in a partition-interleaved order; after
// every restart the restored stores must equal the model as of the last
// committed checkpoint. Half the seeds give the stores a record limit
// and values that grow past it and shrink back: every record must fit the
// limit, and the pieces must come back as the values they were.
func TestChangelogProperty(t *testing.T) {
	if *propertySeed != 0 {
		if err := runChangelogProperty(*propertySeed); err != nil {
			t.Fatalf("seed %d: %v", *propertySeed, err)
		}
		return
	}
	n := *propertySeeds
	if testing.Short() {
		n = 50
	}
	for seed := uint64(1); seed <= uint64(n); seed++ {
		if err := runChangelogProperty(seed); err != nil {
			t.Fatalf("seed %d: %v\nreplay: go test ./state -run TestChangelogProperty -state.seed %d -v", seed, err, seed)
		}
	}
}

// propertyOps are two operators whose ids are prefixes of each other, with
// the same keys, so that the changelog key must keep them apart.
var propertyOps = []string{"agg", "agg2"}

type propertyJob struct {
	rnd     *rand.Rand
	groups  int
	workers int
	stores  map[string][]*Store[[]byte] // by operator, then worker
	log     []ChangelogRecord           // the committed state topic
	model   map[string]map[string]string
	// committed is the model as of the last committed checkpoint: what a
	// restart must restore.
	committed map[string]map[string]string
	keys      [][]byte
	// limit is the stores' record limit (0: none), and big how long a
	// value may grow.
	limit, big int
}

func runChangelogProperty(seed uint64) error {
	rnd := rand.New(rand.NewPCG(seed, 0x5eed))
	j := &propertyJob{
		rnd:       rnd,
		groups:    []int{1, 2, 3, 8, 16, 128}[rnd.IntN(6)],
		model:     map[string]map[string]string{},
		committed: map[string]map[string]string{},
	}
	for _, op := range propertyOps {
		j.model[op], j.committed[op] = map[string]string{}, map[string]string{}
	}
	if rnd.IntN(2) == 0 {
		// Record keys are at most 11 bytes (a piece's 21): pieces hold 27
		// to 79 bytes of a value.
		j.limit, j.big = []int{48, 64, 100}[rnd.IntN(3)], 400
	}
	j.keys = append(j.keys, []byte{}, []byte{0}, []byte{0xff, 0x00})
	for i := range 2 + rnd.IntN(60) {
		j.keys = append(j.keys, fmt.Appendf(nil, "k%d", i))
	}
	if err := j.restart(); err != nil {
		return err
	}

	steps := 50 + rnd.IntN(600)
	for step := range steps {
		op := propertyOps[rnd.IntN(len(propertyOps))]
		key := j.keys[rnd.IntN(len(j.keys))]
		s := j.storeOf(op, key)
		switch r := rnd.IntN(100); {
		case r < 45:
			n := rnd.IntN(6)
			if j.big > 0 && rnd.IntN(4) == 0 {
				n = rnd.IntN(j.big)
			}
			v := make([]byte, n)
			for i := range v {
				v[i] = byte('a' + rnd.IntN(26))
			}
			s.Put(key, v)
			j.model[op][string(key)] = string(v)
		case r < 70:
			s.Delete(key)
			delete(j.model[op], string(key))
		case r < 82:
			got, ok := s.Get(key)
			want, wantOK := j.model[op][string(key)]
			if ok != wantOK || string(got) != want {
				return fmt.Errorf("step %d: Get(%s, %q) = %q, %v; model %q, %v", step, op, key, got, ok, want, wantOK)
			}
		case r < 92:
			if err := j.checkpoint(true); err != nil {
				return fmt.Errorf("step %d: %w", step, err)
			}
		case r < 95:
			// Checkpoint aborted: its delta never reaches the topic, and the
			// job must restart from the last completed checkpoint.
			if err := j.checkpoint(false); err != nil {
				return fmt.Errorf("step %d: %w", step, err)
			}
			if err := j.restart(); err != nil {
				return fmt.Errorf("step %d, restart after abort: %w", step, err)
			}
		default: // crash: changes since the last checkpoint are lost
			if err := j.restart(); err != nil {
				return fmt.Errorf("step %d, restart after crash: %w", step, err)
			}
		}
	}
	if err := j.checkpoint(true); err != nil {
		return err
	}
	for _, workers := range []int{1, 2, 5, j.groups + 1} {
		j.workers = workers
		if err := j.restartWith(workers); err != nil {
			return fmt.Errorf("final restore on %d workers: %w", workers, err)
		}
	}
	return nil
}

func (j *propertyJob) storeOf(op string, key []byte) *Store[[]byte] {
	return j.stores[op][WorkerOf(KeyGroupOf(key, j.groups), j.workers, j.groups)]
}

// checkpoint snapshots every store; a committed one appends the deltas to
// the topic and moves the committed model.
func (j *propertyJob) checkpoint(commit bool) error {
	for _, op := range propertyOps {
		live, bytes := 0, int64(0)
		for _, s := range j.stores[op] {
			recs := s.Snapshot().Records()
			for _, rec := range recs {
				if j.limit > 0 && len(rec.Key)+len(rec.Value) > j.limit {
					return fmt.Errorf("%s: a record of %d bytes, limit %d", op, len(rec.Key)+len(rec.Value), j.limit)
				}
			}
			if commit {
				j.log = append(j.log, recs...)
			}
			live += s.Len()
			bytes += s.ApproxBytes()
		}
		// Right after a snapshot the counters are exact.
		wantBytes := int64(0)
		for k, v := range j.model[op] {
			wantBytes += int64(len(k) + len(v))
		}
		if live != len(j.model[op]) || bytes != wantBytes {
			return fmt.Errorf("%s after snapshot: %d keys, %d bytes; model %d keys, %d bytes", op, live, bytes, len(j.model[op]), wantBytes)
		}
	}
	if commit {
		for _, op := range propertyOps {
			j.committed[op] = maps.Clone(j.model[op])
		}
	}
	return nil
}

func (j *propertyJob) restart() error {
	return j.restartWith(1 + j.rnd.IntN(6))
}

// restartWith rebuilds the stores on workers workers from the topic, as the
// broker would serve it, and compares them with the committed model.
func (j *propertyJob) restartWith(workers int) error {
	log := j.log
	if j.rnd.IntN(2) == 0 {
		log = compact(log, j.rnd)
	}
	log = interleavePartitions(log, 1+j.rnd.IntN(4), j.rnd)
	stores, err := restoreWorkers(log, j.groups, workers, propertyOps...)
	if err != nil {
		return err
	}
	for _, ss := range stores {
		for _, s := range ss {
			s.SetRecordLimit(j.limit)
		}
	}
	j.stores, j.workers = stores, workers
	for _, op := range propertyOps {
		j.model[op] = maps.Clone(j.committed[op])
		got, err := storeContents(stores[op])
		if err != nil {
			return fmt.Errorf("%s on %d workers: %w", op, workers, err)
		}
		if !maps.Equal(got, j.model[op]) {
			return fmt.Errorf("%s on %d workers: restored %q, committed %q", op, workers, got, j.model[op])
		}
	}
	return nil
}

// compact does what log compaction may do: keep only the last record of
// each record key (in offset order) and drop some tombstones that are
// the only record left for their key.
func compact(log []ChangelogRecord, rnd *rand.Rand) []ChangelogRecord {
	last := make(map[string]int)
	for i, rec := range log {
		last[string(rec.Key)] = i
	}
	var out []ChangelogRecord
	for i, rec := range log {
		if last[string(rec.Key)] != i || rec.Value == nil && rnd.IntN(2) == 0 {
			continue
		}
		out = append(out, rec)
	}
	return out
}

// interleavePartitions spreads log over partitions by record key (as a key
// partitioner does) and merges them back in a random order that keeps each
// partition's own order: what a consumer of several partitions sees.
func interleavePartitions(log []ChangelogRecord, partitions int, rnd *rand.Rand) []ChangelogRecord {
	parts := make([][]ChangelogRecord, partitions)
	for _, rec := range log {
		p := int(murmur3(rec.Key, 7) % uint32(partitions))
		parts[p] = append(parts[p], rec)
	}
	out := make([]ChangelogRecord, 0, len(log))
	for len(out) < len(log) {
		p := rnd.IntN(partitions)
		if len(parts[p]) > 0 {
			out = append(out, parts[p][0])
			parts[p] = parts[p][1:]
		}
	}
	return out
}
