package engine

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/eoflow/pipeline/checkpoint"
	"github.com/eoflow/pipeline/checkpoint/savepoint"
	"github.com/eoflow/pipeline/internal/testkit/memkafka"
)

// Savepoints of the group simulation's join as of event time
// (groupsimasofjoin_test.go), and continuations from them: a process
// asks for a savepoint of the running group (groupSavepoint) while the
// join holds records, among the faults or after them; once one is
// written, a new group of another process count (one, two or four)
// starts from it (run --from-savepoint: one member imports it, the
// others wait for that) on a cluster holding the same inputs and table
// versions, and runs on, with faults, while the rest of the inputs and
// table changes arrive.
//
// The savepoint is judged by what the first group had committed when it
// was written (cutAt), not by what it holds: its source offsets, and the
// records the group's checkpoint topic then held at those offsets, per
// source partition (groupheld.go). The continuation must commit each
// good input at or after the savepoint's offsets, and each input held at
// them, exactly once with the tier its key had as of its event time (the
// as-of oracle, asOfTableModel), and nothing else below those offsets;
// each bad input after them is one dead letter.

// gsimFrom is the savepoint a continuation starts from: its reader, the
// restore options and plan, and the cut of the run that wrote it.
type gsimFrom struct {
	r    *savepoint.Reader
	opts savepoint.RestoreOptions
	plan *savepoint.RestorePlan
	cut  *gsimCut
}

// gsimCut is what a run had committed as it wrote savepoint dir: the
// savepoint's offsets of the input partitions (base), and the inputs the
// group's checkpoint topic held at them.
type gsimCut struct {
	dir  string
	base []int64
	held map[simTP]bool
}

// cutAt notes the cut of the savepoint just written at dir, from the
// run's committed records alone (no step of the world since the
// savepoint's last read): for each input partition, the newest
// held-records value of the checkpoint topic must be at the savepoint's
// offset (or absent), and its records are the inputs held there.
func (s *gsim) cutAt(dir string) error {
	r, err := savepoint.Open(dir)
	if err != nil {
		return s.violation("opening savepoint %s: %v", dir, err)
	}
	cut := &gsimCut{dir: dir, base: make([]int64, gsimInParts), held: map[simTP]bool{}}
	for _, o := range r.Manifest().Offsets() {
		if o.Topic == s.joinTopic {
			continue // what it holds past them is in flight (checkWindowSavepoint)
		}
		if o.Topic != "in" || o.Partition >= gsimInParts || int(o.Offset) > len(s.inputs[o.Partition]) {
			return s.violation("savepoint %s: offset %+v beyond the input", dir, o)
		}
		cut.base[o.Partition] = o.Offset
	}
	newest := map[int32][]byte{}
	tp := memkafka.TP{Topic: checkpoint.TopicName(gsimJob)}
	recs, _, err := s.w.kafka.ReadCommitted(tp, 0, 1<<30)
	if err != nil {
		return err
	}
	for _, rec := range recs {
		if k, ok := (&Job{cfg: s.cfg}).parseHeldKey(rec.Key); ok && k.topic == "in" {
			newest[k.partition] = rec.Value
		}
	}
	for p, v := range newest {
		if v == nil {
			continue
		}
		off, h, err := decodeHeldValue(v)
		if err != nil {
			return s.violation("the held records of in/%d: %v", p, err)
		}
		if off != cut.base[p] {
			if h.Len() > 0 {
				return s.violation("savepoint %s: the group holds %d records of in/%d at offset %d, the savepoint's offset is %d", dir, h.Len(), p, off, cut.base[p])
			}
			continue
		}
		for _, hr := range h.Records() {
			cut.held[simTP{hr.Partition, hr.Offset}] = true
		}
	}
	s.cut = cut
	if len(cut.held) > 0 {
		s.counts["savepoints at held records"]++
	}
	s.log("savepoint %s: offsets %v, %d records held there", dir, cut.base, len(cut.held))
	return nil
}

// playAsOfContinued: a savepoint of the running group among the faults
// (asked again while one fails), then a continuation from it with another
// process count, with faults while the rest of the input and of the
// table's changes arrives, judged against the savepoint's cut.
func playAsOfContinued(s *gsim) error {
	const faultSteps = 4000
	s.want = 300
	askAt := s.w.rng.IntN(faultSteps)
	for s.cut == nil {
		if s.steps >= 4*faultSteps {
			s.counts["runs without a savepoint to continue from"]++
			return s.finish()
		}
		if s.steps >= faultSteps {
			s.faults, s.w.crashP = false, 0
		}
		if l := s.live; l != nil && l.failed != "" {
			s.counts["group savepoints failed"]++
			s.live, askAt = nil, s.steps+s.w.rng.IntN(500)
		}
		if s.live == nil && s.steps >= askAt {
			if err := s.askLive(); err != nil {
				return err
			}
		}
		if err := s.next(s.procs, 1); err != nil {
			return err
		}
	}
	c, err := s.continuation()
	if err != nil {
		return err
	}
	err = c.faulty(faultSteps / 2)
	if err == nil {
		err = c.finish()
	}
	if err == nil {
		err = c.importedOnce()
	}
	// The run's report is the first run's: it gets the continuation's
	// trace and counts.
	s.w.trace, s.w.hash, s.steps = c.w.trace, c.w.hash, s.steps+c.steps
	for k, v := range c.counts {
		s.counts[k] += v
	}
	if err != nil {
		return fmt.Errorf("continued from a savepoint with %d processes: %w", len(c.procs), err)
	}
	if len(s.cut.held) > 0 {
		s.counts["continuations from held records"]++
	}
	return nil
}

// continuation is a new group of one, two or four processes started from
// savepoint s.cut.dir, on a cluster holding s's inputs and table
// versions and nothing else.
func (s *gsim) continuation() (*gsim, error) {
	cut := s.cut
	r, err := savepoint.Open(cut.dir)
	if err != nil {
		return nil, s.violation("opening savepoint %s: %v", cut.dir, err)
	}
	c := &gsim{t: s.t, clock: s.clock, began: s.began, cfg: s.cfg, plantedBug: s.plantedBug, dir: filepath.Join(s.dir, "continued"),
		burst: 1, faults: true, orphaned: map[string]time.Time{}, counts: map[string]int{},
		markers: s.markers, pauseEvery: s.pauseEvery, fenceFails: s.fenceFails,
		fed: s.fed, want: s.want, asOf: true}
	c.w = &world{rng: s.w.rng, kafka: memkafka.New(s.clock), trace: s.w.trace, hash: s.w.hash, root: s.w.root,
		crashP: []float64{0.002, 0.005, 0.01}[s.w.rng.IntN(3)], manual: s.w.manual}
	c.w.kafka.SetMarkerLag(true)
	if err := c.createTopics(); err != nil {
		return nil, err
	}
	c.asOfPartitioned = s.asOfPartitioned
	c.asOfTable = asOfTableModel{w: c.w, partitions: s.asOfTable.partitions}
	if err := c.asOfTable.replay(s.asOfTable.versions, s.asOfTable.ts); err != nil {
		return nil, err
	}
	c.aview.writes, c.aview.closed = s.aview.writes, s.aview.closed
	c.inputs = make([][]simInput, gsimInParts)
	for p, ins := range s.inputs {
		c.inputs[p] = slices.Clone(ins)
		for _, in := range ins {
			if _, err := c.w.kafka.Append(c.inputRecord(int32(p), in)); err != nil {
				return nil, err
			}
		}
	}
	n := []int{1, 2, 4}[c.w.rng.IntN(3)]
	for _, id := range []string{"a", "b", "c", "d"}[:n] {
		c.procs = append(c.procs, &gproc{id: id})
	}
	opts := savepoint.RestoreOptions{Partitions: map[string]int{"in": gsimInParts}}
	plan, err := savepoint.CheckRestore(r.Manifest(), savepoint.DescribeConfig(c.cfg), opts)
	if err != nil {
		return nil, c.violation("savepoint %s refused: %v", cut.dir, err)
	}
	c.from = &gsimFrom{r: r, opts: opts, plan: plan, cut: cut}
	c.log("continuing from savepoint %s (offsets %v, %d records held) with %d processes", cut.dir, cut.base, len(cut.held), n)
	return c, nil
}

// createTopics creates the job's topics on s's cluster.
func (s *gsim) createTopics() error {
	for topic, n := range map[string]int{
		"in": gsimInParts, "out": 1, s.cfg.Sinks[0].DeadLetterTopic: 1, checkpoint.TopicName(gsimJob): 1,
		RepartitionTopic(gsimJob): s.cfg.Scale.Partitions, GroupStateTopic(gsimJob): s.cfg.Scale.Partitions, simLateTopic: 1,
	} {
		if err := s.w.kafka.CreateTopic(topic, n); err != nil {
			return err
		}
	}
	return nil
}

// continued reports whether input in/p@off is a continuation's to commit
// (always, outside a continuation): at or after the savepoint's offset,
// or held there.
func (s *gsim) continued(p int32, off int64) bool {
	if s.from == nil {
		return true
	}
	cut := s.from.cut
	return off >= cut.base[p] || cut.held[simTP{p, off}]
}

// inputAt is where input n is: its partition and offset (ok false: no
// such input).
func (s *gsim) inputAt(n int64) (int32, int64, bool) {
	for p, ins := range s.inputs {
		for off, in := range ins {
			if in.n == n {
				return int32(p), int64(off), true
			}
		}
	}
	return 0, 0, false
}

// deadAt parses the partition and offset of a dead letter's "/p/o".
func deadAt(at string) (int32, int64, bool) {
	var p int32
	var off int64
	if _, err := fmt.Sscanf(strings.TrimPrefix(at, "/"), "%d/%d", &p, &off); err != nil {
		return 0, 0, false
	}
	return p, off, true
}

// heldAsCut: savepoint r holds the records its cut says the group held
// at its offsets (s.cut), no more, no fewer.
func (s *gsim) heldAsCut(r *savepoint.Reader) error {
	recs, err := r.Held()
	if err != nil {
		return s.violation("savepoint %s: %v", r.Dir(), err)
	}
	got := map[simTP]bool{}
	for _, h := range recs {
		got[simTP{h.Partition, h.Offset}] = true
	}
	if !maps.Equal(got, s.cut.held) {
		return s.violation("savepoint %s holds %d records held for the join, at %v; the group held %d at its offsets, at %v", r.Dir(), len(got), got, len(s.cut.held), s.cut.held)
	}
	return nil
}

// importedOnce: the savepoint was imported by one member once. Each
// import commits, with the savepoint's offsets, a tombstone for a
// single-mode record of the job's name (importMember), which nothing
// else writes: a second import would commit the savepoint's offsets again
// over what the group committed since.
func (s *gsim) importedOnce() error {
	recs, _, err := s.w.kafka.ReadCommitted(memkafka.TP{Topic: checkpoint.TopicName(gsimJob)}, 0, 1<<30)
	if err != nil {
		return err
	}
	n := 0
	for _, r := range recs {
		if string(r.Key) == gsimJob && r.Value == nil {
			n++
		}
	}
	if n != 1 {
		return s.violation("savepoint %s imported %d times", s.from.cut.dir, n)
	}
	return nil
}
