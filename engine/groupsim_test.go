package engine

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/eoflow/pipeline/internal/testkit/memkafka"
	"github.com/eoflow/pipeline/state"
)

// The broker-free simulation of group mode's protocol (group.go): N
// processes share a keyed job through one consumer group on the Kafka
// model (internal/testkit/memkafka, whose group coordinator and transactions are
// checked against the real broker), with the steps group mode takes, in
// seeded random order: joins, eager rebalances that revoke every
// responsive member's attempt, static members replaced by their restarted
// process, members expiring after the session timeout and fenced by the
// survivors, processes crashing at any call into Kafka, and processes
// paused past the session timeout that wake up as zombies of an old
// generation. Each attempt fetches the group's stable offsets, waits for
// its state partitions to settle, restores them, shuffles source records
// to the repartition partition of their key group, aggregates repartition
// records, and commits outputs, state and offsets (as the member of its
// generation) in one transaction. The brokers write a transaction's
// markers one at a time, some steps after it ended (memkafka's marker
// lag), so the group's offsets can take effect before the state they go
// with is readable. A record read is on its way through the
// process for a while, and an epoch's barrier may fall among the records
// on their way (the rest belong to the next epoch). At the end every
// output must be exactly one failure-free run's: per key, counts 1..n
// once each and the exact sum. Other schedules end in a stop with a
// savepoint of the last process (runStop), or take a savepoint of the
// running group (runLive); a savepoint's state must be that of exactly
// the inputs its offsets cover. The real runtime's group mode is proven
// against Kafka by cmd/pipeline's TestGroupModeExactUnderFaults; this
// explores the schedules a real cluster cannot be driven through.

const (
	gsimJob        = "gsim"
	gsimIn         = "gsim-in"
	gsimRep        = "gsim-repartition"
	gsimState      = "gsim-group-state"
	gsimOut        = "gsim-out"
	gsimCkpt       = "gsim-checkpoints"
	gsimInParts    = 4
	gsimRepParts   = 3
	gsimKeyGroups  = 12
	gsimKeys       = 5
	gsimSession    = 6 * time.Second
	gsimTxnTimeout = time.Minute
	gsimStep       = 100 * time.Millisecond
)

// gsimBugs injects known mistakes, to show the simulation finds them.
type gsimBugs struct {
	// memberless commits offsets without the member and generation
	// (plain TxnOffsetCommit): a zombie's commit is accepted.
	memberless bool
	// offsetsAtAssignment starts every attempt from the offsets fetched
	// when the generation was assigned, not the newest committed ones.
	offsetsAtAssignment bool
	// noOwnFence: a restarted process joins without first fencing its own
	// transactional id; a predecessor killed while committing then holds
	// the offsets it needs until the transaction timeout.
	noOwnFence bool
	// fenceAfterFetch: survivors fence a departed member only once they
	// have fetched their new generation's offsets, which the departed
	// member's pending offsets hold until the transaction timeout.
	fenceAfterFetch bool
	// noFenceOfUnseen: a process fences, on its first assignment, only
	// members it saw leave, not the ones that left while no member was
	// there to see it (their checkpoint records name them).
	noFenceOfUnseen bool
	// drainBeforePause: a stop with a savepoint takes any checkpoint that
	// completes after the sources paused as proof of the drain, also one
	// whose barrier came before the pause, while records read before the
	// pause are still on their way to the repartition topic.
	drainBeforePause bool
	// exportWithoutRecheck: a live savepoint's export takes the offsets
	// and reads the state without making sure the members did not read
	// on in between (their pause may run out meanwhile).
	exportWithoutRecheck bool
	// restoreBeforeMarkers: an attempt restores its state partitions
	// without waiting for the markers of the transactions that wrote
	// them (awaitSettled), which may still be on their way after the
	// group's offsets took effect.
	restoreBeforeMarkers bool
}

type gsim struct {
	rng   *rand.Rand
	k     *memkafka.Cluster
	procs []*gproc
	bugs  gsimBugs
	fed   int64 // numbers 1..fed are in the input
	trace []string
	// unfenced are the processes the group dropped while a live member
	// was there to fence them, until their transactional id is
	// initialized again: nobody may wait for a transaction of theirs.
	unfenced map[string]bool
	// orphaned are the processes the group dropped while no live member
	// was there to fence them, and when: a process started after that
	// fences them on its first assignment, and must not wait for them.
	orphaned map[string]time.Time
	// stalled is the first wait for a transaction that should have been
	// fenced (a liveness violation: only the transaction timeout ends it).
	stalled error
	// stop is the stop with a savepoint asked of the sole owner (runStop),
	// nil until asked.
	stop *gstop
	// live is the savepoint taken while the group runs (runLive), nil
	// until asked.
	live *glive
}

// glive is a savepoint of the group while it runs (groupsavepoint.go):
// the asker posts a pause; each member sees it when it sees it, stops
// reading its source partitions, and acks in the transaction of its first
// checkpoint whose barrier came after that; once every member acked and
// the repartition topic is drained, the asker takes the group's offsets
// and, some steps later (reading a large state takes time), the state
// topic. Members read on once the pause is lifted or runs out.
type glive struct {
	id    string
	asker *gproc
	until time.Time
	// ready: every member acked and the topic is drained; the export
	// starts at the asker's next step.
	ready bool
	// offsets are the group's source offsets the export took (nil
	// before), and readIn the steps until it reads the state.
	offsets map[memkafka.TP]int64
	readIn  int
	saved   *gsaved
	failed  string
}

// pausing reports whether p's attempt has seen the pause in force and
// reads no source partition.
func (s *gsim) pausing(a *gattempt) bool {
	l := s.live
	return l != nil && a.pauseSeen == l.id && !s.k.Now().After(l.until)
}

// gstop is a stop with a savepoint of the process that owns every
// partition (coordinatorLoop.onStop): its sources pause, it commits
// epochs reading only the repartition topic until a checkpoint whose
// barrier came after the pause shows it drained, and its next checkpoint
// is the savepoint.
type gstop struct {
	p *gproc
	// pausedAt is the sequence number of the first read after the pause.
	pausedAt int64
	drained  bool
	// saved is the final checkpoint: its state, and its source offsets.
	saved *gsaved
}

type gsaved struct {
	offsets map[memkafka.TP]int64
	sums    map[string][2]int64
}

type gproc struct {
	id     string
	up     bool      // the process runs
	paused bool      // SIGSTOPped: takes no step
	since  time.Time // when it crashed or was paused
	member memkafka.GroupMember
	in     bool // the coordinator has it as a member (member is current)
	att    *gattempt
	// assignedAt are the group's offsets when its generation was
	// assigned (for the offsetsAtAssignment bug).
	assignedAt map[memkafka.TP]int64
	// toFence are departed members it fences after its next offset
	// fetch (the fenceAfterFetch bug).
	toFence []*gproc
	// started is when the process last started.
	started time.Time
}

type gattempt struct {
	member memkafka.GroupMember
	tps    []memkafka.TP
	prod   *memkafka.Producer
	pos    map[memkafka.TP]int64
	sums   map[string][2]int64 // key -> count, sum
	dirty  map[string]bool
	begun  bool
	// held are the records read and not yet through the process (on
	// their way through its graph, or held by its sink while an epoch
	// commits), in read order; seq numbers the reads.
	held []gheld
	seq  int64
	// pauseSeen is the live savepoint's pause the attempt has seen, and
	// pausedAt the sequence number of its first read after that.
	pauseSeen string
	pausedAt  int64
}

// gheld is a record read, and the sequence number of its read.
type gheld struct {
	tp  memkafka.TP
	rec memkafka.Record
	seq int64
}

// gsimCrash is a process killed at a call into the model.
type gsimCrash struct{}

func (s *gsim) log(format string, args ...any) {
	s.trace = append(s.trace, fmt.Sprintf("%s %s", s.k.Now().Format("15:04:05.0"), fmt.Sprintf(format, args...)))
}

// call is a call into the model by p: it may kill p before or after it
// takes effect.
func (s *gsim) call(p *gproc, crashP float64, what string, fn func() error) error {
	if s.rng.Float64() < crashP/2 {
		s.log("%s crashes before %s", p.id, what)
		panic(gsimCrash{})
	}
	err := fn()
	if s.rng.Float64() < crashP/2 {
		s.log("%s crashes after %s (%v)", p.id, what, err)
		panic(gsimCrash{})
	}
	return err
}

func newGsim(seed uint64, procs int, bugs gsimBugs) *gsim {
	s := &gsim{rng: rand.New(rand.NewPCG(seed, 14)), k: memkafka.New(time.Unix(1_800_000_000, 0)), bugs: bugs, unfenced: map[string]bool{}, orphaned: map[string]time.Time{}}
	s.k.SetMarkerLag(true)
	for _, t := range []struct {
		name  string
		parts int
	}{{gsimIn, gsimInParts}, {gsimRep, gsimRepParts}, {gsimState, gsimRepParts}, {gsimOut, 1}, {gsimCkpt, 1}} {
		if err := s.k.CreateTopic(t.name, t.parts); err != nil {
			panic(err)
		}
	}
	for i := range procs {
		s.procs = append(s.procs, &gproc{id: string(rune('a' + i))})
	}
	return s
}

func gsimKey(n int64) string { return "k" + strconv.FormatInt(n%gsimKeys, 10) }

func gsimPartition(key string) int32 {
	kg := state.KeyGroupOf([]byte(key), gsimKeyGroups)
	return int32(state.WorkerOf(kg, gsimRepParts, gsimKeyGroups))
}

// assignment deals every partition round-robin over the members' sorted
// instance ids (the group leader's balancer).
func (s *gsim) assignment(id string) []memkafka.TP {
	var ids []string
	for _, p := range s.procs {
		if p.in {
			ids = append(ids, p.id)
		}
	}
	slices.Sort(ids)
	var all []memkafka.TP
	for i := range gsimInParts {
		all = append(all, memkafka.TP{Topic: gsimIn, Partition: int32(i)})
	}
	for i := range gsimRepParts {
		all = append(all, memkafka.TP{Topic: gsimRep, Partition: int32(i)})
	}
	var mine []memkafka.TP
	for i, tp := range all {
		if ids[i%len(ids)] == id {
			mine = append(mine, tp)
		}
	}
	return mine
}

// rebalance is an eager rebalance into the coordinator's new generation:
// every responsive member's attempt is revoked (its epoch aborted) before
// anyone reads on; a paused member misses it and is out of the group.
func (s *gsim) rebalance() {
	gen := s.k.Generation(gsimJob)
	offsets := s.k.GroupOffsets(gsimJob)
	var missed []*gproc
	for _, p := range s.procs {
		if !p.in {
			continue
		}
		if p.paused {
			s.log("%s misses the rebalance to generation %d and is out of the group", p.id, gen)
			_ = s.k.LeaveGroup(gsimJob, p.member)
			p.in = false
			missed = append(missed, p)
			continue
		}
		if p.att != nil && p.att.begun {
			_ = p.att.prod.End(false)
		}
		p.att = nil
		p.member.Generation = gen
		p.assignedAt = offsets
	}
	if s.k.Generation(gsimJob) != gen {
		s.rebalance() // a paused member left: one more generation
	}
	for _, p := range missed {
		s.departed(p)
	}
}

// departed: the group dropped gone. The members of the new generation
// fence its transactional id when they are assigned, before they fetch
// their offsets (membership.onAssigned); with no live member, nobody does.
func (s *gsim) departed(gone *gproc) {
	var witness *gproc
	for _, p := range s.procs {
		if p != gone && p.up && !p.paused && p.in {
			witness = p
			break
		}
	}
	if witness == nil {
		s.log("no live member is there to fence %s's transactional id", gone.id)
		s.orphaned[gone.id] = s.k.Now()
		return
	}
	s.unfenced[gone.id] = true
	if s.bugs.fenceAfterFetch {
		witness.toFence = append(witness.toFence, gone)
		return
	}
	s.fence(gone, "survivors fence")
}

// fence initializes p's transactional id, aborting its open transaction.
func (s *gsim) fence(p *gproc, who string) {
	if _, err := s.k.InitProducer(gsimJob+"-"+p.id, gsimTxnTimeout); err != nil {
		panic(err)
	}
	delete(s.unfenced, p.id)
	delete(s.orphaned, p.id)
	s.log("%s %s's transactional id", who, p.id)
}

// fenceUnseen is a started process's first assignment: every process
// named by a checkpoint record (here: any other) that is out of the
// group with a transaction open is fenced (membership.fenceDeparted).
func (s *gsim) fenceUnseen(p *gproc) {
	open := s.k.OpenTransactions()
	for _, q := range s.procs {
		if q == p || q.in {
			continue
		}
		if slices.Contains(open, gsimJob+"-"+q.id) {
			s.fence(q, p.id+", started, fences the unseen")
		} else {
			delete(s.orphaned, q.id)
		}
	}
}

// join puts p (started, or awake after being dropped) into the group.
func (s *gsim) join(p *gproc) {
	m, err := s.k.JoinGroup(gsimJob, p.id)
	if err != nil {
		panic(err)
	}
	replaced := p.in // a static member back before the group dropped it
	p.member, p.in = m, true
	// Back in the group, it is no longer one that left unseen: it ended
	// its own transaction when it learned it was out (or fenced its id on
	// start), and if it dies again, the group drops it with members there.
	delete(s.orphaned, p.id)
	s.log("%s joins as %s in generation %d (static replacement: %v)", p.id, m.MemberID, m.Generation, replaced)
	if replaced {
		p.assignedAt = s.k.GroupOffsets(gsimJob)
		return
	}
	s.rebalance()
}

// tick ends a scheduler step: time moves on, the brokers write some of
// the markers of decided transactions (each on its own, in any order:
// marker lag), and the group drops members past the session timeout.
func (s *gsim) tick() {
	s.k.Advance(gsimStep)
	if n := s.k.PendingMarkers(); n > 0 && s.rng.IntN(3) == 0 {
		s.k.DeliverMarker(s.rng.IntN(n))
	}
	s.expire()
}

// settleMarkers writes every pending marker: the brokers do, in the end.
func (s *gsim) settleMarkers() {
	for s.k.PendingMarkers() > 0 {
		s.k.DeliverMarker(0)
	}
}

// expire drops members that have not been heard of for the session
// timeout: crashed and not back, or paused.
func (s *gsim) expire() {
	for _, p := range s.procs {
		if p.in && (!p.up || p.paused) && s.k.Now().Sub(p.since) > gsimSession {
			s.log("the group drops %s after the session timeout", p.id)
			_ = s.k.LeaveGroup(gsimJob, p.member)
			p.in = false
			s.rebalance()
			s.departed(p)
		}
	}
}

// startAttempt begins p's attempt on its assignment, unless it has to
// wait (offsets unstable, state partitions unsettled).
func (s *gsim) startAttempt(p *gproc, crashP float64) {
	tps := s.assignment(p.id)
	if len(tps) == 0 {
		return
	}
	if s.k.PendingOffsets(gsimJob, tps) {
		return // a stable fetch is refused until their marker is written
	}
	if holders := s.k.UnstableOffsets(gsimJob, tps); len(holders) > 0 {
		// require_stable: wait for the transactions holding them. Not
		// for one that should have been fenced: only its timeout would
		// end it.
		for _, h := range holders {
			id := strings.TrimPrefix(h, gsimJob+"-")
			orphaned, ok := s.orphaned[id]
			if s.stalled == nil && (id == p.id || s.unfenced[id] || ok && !p.started.Before(orphaned)) {
				s.stalled = fmt.Errorf("%s waits for its offsets held by the open transaction of %s, which nobody fenced: only the transaction timeout ends it", p.id, h)
				s.log("%v", s.stalled)
			}
		}
		return
	}
	for _, gone := range p.toFence {
		s.fence(gone, p.id+", its offsets fetched, fences")
	}
	p.toFence = nil
	var owned []memkafka.TP
	for _, tp := range tps {
		if tp.Topic == gsimRep {
			stp := memkafka.TP{Topic: gsimState, Partition: tp.Partition}
			o, _ := s.k.EndOffsets(stp)
			if o.LastStable < o.HighWatermark && !s.bugs.restoreBeforeMarkers {
				return // awaitSettled
			}
			owned = append(owned, stp)
		}
	}
	a := &gattempt{member: p.member, tps: tps, pos: map[memkafka.TP]int64{}, sums: map[string][2]int64{}, dirty: map[string]bool{}}
	_ = s.call(p, crashP, "InitProducer", func() error {
		var err error
		a.prod, err = s.k.InitProducer(gsimJob+"-"+p.id, gsimTxnTimeout)
		return err
	})
	delete(s.unfenced, p.id)
	offsets := s.k.GroupOffsets(gsimJob)
	if s.bugs.offsetsAtAssignment {
		offsets = p.assignedAt
	}
	for _, tp := range tps {
		a.pos[tp] = offsets[tp]
	}
	for _, stp := range owned {
		if err := s.readCommitted(stp, func(r memkafka.Record) error {
			a.sums[string(r.Key)] = parseSums(r.Value)
			return nil
		}); err != nil {
			panic(err)
		}
	}
	p.att = a
	s.log("%s starts an attempt in generation %d on %v at %v", p.id, a.member.Generation, tps, a.pos)
}

// process reads a few records of one of p's partitions (the repartition
// topic's alone once a stop paused its sources), or passes some of what
// it read through the operators into its epoch.
func (s *gsim) process(p *gproc, crashP float64) {
	a := p.att
	if l := s.live; l != nil && a.pauseSeen != l.id && !s.k.Now().After(l.until) && s.rng.IntN(3) == 0 {
		// It reads the pause record from the checkpoint topic.
		a.pauseSeen, a.pausedAt = l.id, a.seq
		s.log("%s sees the pause (read %d)", p.id, a.seq)
	}
	if len(a.held) > 0 && s.rng.IntN(2) == 0 {
		s.deliver(p, crashP, 1+s.rng.IntN(len(a.held)))
		return
	}
	tps := a.tps
	if s.stop != nil && s.stop.p == p || s.pausing(a) {
		tps = slices.DeleteFunc(slices.Clone(tps), func(tp memkafka.TP) bool { return tp.Topic != gsimRep })
	}
	if len(tps) == 0 {
		return
	}
	tp := tps[s.rng.IntN(len(tps))]
	recs, next, err := s.k.ReadCommitted(tp, a.pos[tp], 1+s.rng.IntN(5))
	if err != nil || len(recs) == 0 {
		a.pos[tp] = max(a.pos[tp], next)
		return
	}
	for _, r := range recs {
		a.held = append(a.held, gheld{tp: tp, rec: r, seq: a.seq})
		a.seq++
	}
	a.pos[tp] = next
}

// deliver passes the first n records p holds through its operators: a
// source record to the repartition partition of its key, a repartition
// record into its key's sum and an output. It reports whether the attempt
// goes on.
func (s *gsim) deliver(p *gproc, crashP float64, n int) bool {
	a := p.att
	if !a.begun {
		if err := a.prod.Begin(); err != nil {
			p.att = nil
			return false
		}
		a.begun = true
	}
	for range n {
		h := a.held[0]
		a.held = a.held[1:]
		num, _ := strconv.ParseInt(string(h.rec.Value), 10, 64)
		key := gsimKey(num)
		var out memkafka.Record
		if h.tp.Topic == gsimIn {
			out = memkafka.Record{Topic: gsimRep, Partition: gsimPartition(key), Key: []byte(key), Value: h.rec.Value}
		} else {
			v := a.sums[key]
			v = [2]int64{v[0] + 1, v[1] + num}
			a.sums[key], a.dirty[key] = v, true
			out = memkafka.Record{Topic: gsimOut, Partition: 0, Key: []byte(key), Value: fmt.Appendf(nil, "%d,%d", v[0], v[1])}
		}
		if err := s.call(p, crashP, "Produce", func() error { _, err := a.prod.Produce(out); return err }); err != nil {
			s.log("%s: produce failed (%v); the attempt ends", p.id, err)
			_ = a.prod.End(false)
			p.att = nil
			return false
		}
	}
	return true
}

// commit ends p's epoch at a barrier among the records it holds: those
// read before the barrier go through into the epoch, the rest stay held
// for the next one (a sink holds what arrives while an epoch commits).
// Then state records, the barrier's offsets as the member of its
// generation, and the commit.
func (s *gsim) commit(p *gproc, crashP float64, faults bool) {
	a := p.att
	if !s.deliver(p, crashP, s.rng.IntN(len(a.held)+1)) {
		return
	}
	barrier := a.seq // the sequence number of the first read after it
	offsets := maps.Clone(a.pos)
	for i, h := range a.held {
		if i == 0 {
			barrier = h.seq
		}
		if o := h.rec.Offset; o < offsets[h.tp] {
			offsets[h.tp] = o
		}
	}
	if faults && s.rng.IntN(20) == 0 {
		// A broker hiccup: the epoch aborts and the attempt restarts on
		// the same assignment (no rebalance).
		s.log("%s: the commit fails (a broker hiccup); the attempt ends", p.id)
		_ = a.prod.End(false)
		p.att = nil
		return
	}
	fail := func(what string, err error) {
		s.log("%s: %s failed (%v); the attempt ends", p.id, what, err)
		_ = a.prod.End(false)
		p.att = nil
		if errors.Is(err, kerr.IllegalGeneration) || errors.Is(err, kerr.UnknownMemberID) || errors.Is(err, kerr.FencedInstanceID) {
			p.in = false // it learns it is out of the group: rejoin
		}
	}
	for _, key := range slices.Sorted(func(yield func(string) bool) {
		for k := range a.dirty {
			if !yield(k) {
				return
			}
		}
	}) {
		v := a.sums[key]
		rec := memkafka.Record{Topic: gsimState, Partition: gsimPartition(key), Key: []byte(key), Value: fmt.Appendf(nil, "%d,%d", v[0], v[1])}
		if err := s.call(p, crashP, "Produce state", func() error { _, err := a.prod.Produce(rec); return err }); err != nil {
			fail("produce state", err)
			return
		}
	}
	clear(a.dirty)
	if s.pausing(a) && barrier >= a.pausedAt {
		ack := memkafka.Record{Topic: gsimCkpt, Key: []byte("paused/" + p.id), Value: []byte(s.live.id)}
		if err := s.call(p, crashP, "Produce ack", func() error { _, err := a.prod.Produce(ack); return err }); err != nil {
			fail("produce ack", err)
			return
		}
	}
	err := s.call(p, crashP, "TxnCommitOffsets", func() error {
		if s.bugs.memberless {
			return a.prod.TxnCommitOffsets(gsimJob, offsets)
		}
		return a.prod.TxnCommitOffsetsAs(gsimJob, a.member, offsets)
	})
	if err != nil {
		fail("offset commit", err)
		return
	}
	if err := s.call(p, crashP, "EndTxn", func() error { return a.prod.End(true) }); err != nil {
		fail("commit", err)
		return
	}
	a.begun = false
	s.log("%s commits %v (generation %d)", p.id, offsets, a.member.Generation)
	if st := s.stop; st != nil && st.p == p {
		s.stopCommitted(barrier, offsets)
	}
}

// stopCommitted is the stop's step after each checkpoint of the stopping
// process: the final one is the savepoint; before that, a checkpoint whose
// barrier came after the pause shows the drain when no transaction is open
// on the repartition topic and no committed record is after its offsets
// (repartitionDrained).
func (s *gsim) stopCommitted(barrier int64, offsets map[memkafka.TP]int64) {
	st := s.stop
	if st.drained {
		saved := &gsaved{offsets: map[memkafka.TP]int64{}, sums: maps.Clone(st.p.att.sums)}
		for tp, o := range offsets {
			if tp.Topic == gsimIn {
				saved.offsets[tp] = o
			}
		}
		st.saved = saved
		s.log("%s's final checkpoint is the savepoint: %v", st.p.id, saved.offsets)
		return
	}
	if barrier < st.pausedAt && !s.bugs.drainBeforePause {
		return // a checkpoint from before the pause shows nothing
	}
	if !s.drainedAt(offsets) {
		return
	}
	st.drained = true
	s.log("the repartition topic is drained (barrier at read %d, the pause at %d)", barrier, st.pausedAt)
}

// step is one scheduler step of p, under faults or not.
func (s *gsim) step(p *gproc, faults bool) {
	crashP := 0.0
	if faults {
		crashP = 0.02
	}
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(gsimCrash); !ok {
				panic(r)
			}
			p.up, p.att, p.since, p.toFence = false, nil, s.k.Now(), nil // its transaction stays open
		}
	}()
	switch {
	case !p.up:
		if !faults || s.rng.IntN(40) == 0 {
			p.up, p.started = true, s.k.Now()
			s.log("%s restarts", p.id)
			if !s.bugs.noOwnFence {
				// Job.Run: end what a predecessor with this instance
				// id left open, before joining.
				_ = s.call(p, crashP, "InitProducer (its own id, on start)", func() error {
					s.fence(p, p.id+" fences")
					return nil
				})
			}
			s.join(p)
			if !s.bugs.noFenceOfUnseen {
				s.fenceUnseen(p)
			}
		}
	case p.paused:
		if !faults || s.rng.IntN(60) == 0 {
			p.paused = false
			s.log("%s wakes up (SIGCONT)", p.id)
		}
	case faults && s.rng.IntN(300) == 0:
		p.paused, p.since = true, s.k.Now()
		s.log("%s is paused (SIGSTOP)", p.id)
	case p.att != nil && !p.in && s.rng.IntN(3) == 0:
		// A zombie learns it is out (its heartbeat fails) and lets
		// its attempt go; until then it works on.
		s.log("%s learns it is out of the group; its attempt ends", p.id)
		if p.att.begun {
			_ = p.att.prod.End(false)
		}
		p.att = nil
	case p.att == nil && !p.in:
		s.join(p)
	case p.att == nil:
		s.startAttempt(p, crashP)
	case s.rng.IntN(4) == 0 && (p.att.begun || len(p.att.held) > 0 || s.rng.IntN(2) == 0):
		// An epoch with nothing in it commits too: its offsets (and,
		// in the runtime, its checkpoint record).
		s.commit(p, crashP, faults)
	default:
		s.process(p, crashP)
	}
}

// feed appends a few numbers to the input.
func (s *gsim) feed(upTo int64) {
	for range 1 + s.rng.IntN(4) {
		if s.fed >= upTo {
			return
		}
		s.fed++
		v := strconv.FormatInt(s.fed, 10)
		if _, err := s.k.Append(memkafka.Record{Topic: gsimIn, Partition: int32(s.rng.IntN(gsimInParts)), Value: []byte(v)}); err != nil {
			panic(err)
		}
	}
}

// run plays a schedule: input arrives and processes fail for steps, then
// everyone recovers and the job drains; it returns the first violation.
func (s *gsim) run(inputs int64, steps int) error {
	for i := 0; i < steps; i++ {
		s.feed(inputs)
		p := s.procs[s.rng.IntN(len(s.procs))]
		s.step(p, true)
		s.tick()
	}
	return s.finish(inputs)
}

// finish: the rest of the input arrives, everyone recovers and the job
// drains; the outputs must be exact.
func (s *gsim) finish(inputs int64) error {
	for s.fed < inputs {
		s.feed(inputs)
	}
	for i := 0; i < 20000; i++ {
		s.liveStep()
		s.step(s.procs[i%len(s.procs)], false)
		s.tick()
		if i%50 == 0 && s.drained() && s.liveDone() {
			break
		}
	}
	s.settleMarkers()
	if err := s.check(inputs); err != nil {
		return err
	}
	return s.stalled
}

// drained: the group committed the end of every input and repartition
// partition, and nothing is open.
func (s *gsim) drained() bool {
	committed := s.k.GroupOffsets(gsimJob)
	for _, t := range []struct {
		topic string
		parts int
	}{{gsimIn, gsimInParts}, {gsimRep, gsimRepParts}} {
		for i := range t.parts {
			tp := memkafka.TP{Topic: t.topic, Partition: int32(i)}
			o, _ := s.k.EndOffsets(tp)
			if o.LastStable != o.HighWatermark || committed[tp] < o.HighWatermark {
				return false
			}
		}
	}
	return true
}

// check: per key, committed outputs count 1..n once each, in order, and
// the last sum is exact.
func (s *gsim) check(inputs int64) error {
	want := map[string][2]int64{}
	for n := int64(1); n <= inputs; n++ {
		v := want[gsimKey(n)]
		want[gsimKey(n)] = [2]int64{v[0] + 1, v[1] + n}
	}
	last, err := s.outputs()
	if err != nil {
		return err
	}
	for key, w := range want {
		if last[key] != w {
			return fmt.Errorf("key %s: final {count %d, sum %d}, want {count %d, sum %d} (drained: %v)", key, last[key][0], last[key][1], w[0], w[1], s.drained())
		}
	}
	return nil
}

// outputs are the last committed output of each key, {count, sum}, once
// the outputs are checked to count 1..n once each, in order.
func (s *gsim) outputs() (map[string][2]int64, error) {
	last := map[string][2]int64{}
	err := s.readCommitted(memkafka.TP{Topic: gsimOut}, func(r memkafka.Record) error {
		v, key := parseSums(r.Value), string(r.Key)
		if v[0] != last[key][0]+1 {
			return fmt.Errorf("key %s: output count %d follows %d (offset %d): an input counted twice or lost", key, v[0], last[key][0], r.Offset)
		}
		last[key] = v
		return nil
	})
	if err != nil {
		return nil, err
	}
	return last, nil
}

// parseSums decodes a "count,sum" value: an output, or a state record.
func parseSums(v []byte) [2]int64 {
	c, sum, _ := strings.Cut(string(v), ",")
	cn, _ := strconv.ParseInt(c, 10, 64)
	sn, _ := strconv.ParseInt(sum, 10, 64)
	return [2]int64{cn, sn}
}

// runStop plays a schedule that ends in a stop with a savepoint: input
// arrives and processes fail for steps; then every process but the first
// stops, and while input still arrives the first, once the others are
// out of the group, is asked to stop with a savepoint. It returns the
// first violation: the savepoint's state must be that of exactly the
// inputs its offsets cover, and the outputs must end at it.
func (s *gsim) runStop(inputs int64, steps int) error {
	for i := 0; i < steps; i++ {
		s.feed(inputs / 2)
		s.step(s.procs[s.rng.IntN(len(s.procs))], true)
		s.tick()
	}
	p := s.procs[0]
	for _, o := range s.procs[1:] {
		s.shutdown(o)
	}
	// The stop is asked at a random step, or (half the schedules) at
	// the first moment when the keyed side has read everything shuffled
	// and the process has just read source records that are not through
	// it yet: where a drain could be seen too early.
	askAt, waitForFresh := s.rng.IntN(150), s.rng.IntN(2) == 0
	for i := 0; i < 20000 && (s.stop == nil || s.stop.saved == nil); i++ {
		switch {
		case !waitForFresh || s.stop != nil:
			if s.rng.IntN(10) == 0 {
				s.feed(inputs) // slower than the process reads
			}
		case p.att != nil && !p.att.begun && s.readAll(p):
			s.feed(inputs) // a burst, once it has caught up
		}
		if s.stop == nil && i >= askAt && p.att != nil && s.alone(p) && (!waitForFresh || i > askAt+5000 || s.freshReads(p)) {
			s.stop = &gstop{p: p, pausedAt: p.att.seq}
			s.log("%s is asked to stop with a savepoint: its sources pause (read %d)", p.id, p.att.seq)
		}
		s.step(p, false)
		s.tick()
	}
	if s.stop == nil || s.stop.saved == nil {
		return errors.New("the stop with a savepoint did not finish")
	}
	// The process stops after its final checkpoint, with nothing open; a
	// transaction that a killed process left open, with nobody there to
	// fence it, ends at its timeout (it holds the outputs' last stable
	// offset until then).
	if a := p.att; a != nil && a.begun {
		_ = a.prod.End(false)
	}
	s.k.Advance(gsimTxnTimeout + gsimStep)
	s.settleMarkers()
	if err := s.checkSaved(); err != nil {
		return err
	}
	return s.stalled
}

// shutdown ends o for good: a live process stops (Job.Stop: its epoch
// ends, here aborted, and it leaves the group); a crashed or paused one
// is killed, its transaction left for the group to drop and fence it.
func (s *gsim) shutdown(o *gproc) {
	if o.up && !o.paused {
		if o.att != nil && o.att.begun {
			_ = o.att.prod.End(false)
		}
		o.att = nil
		if o.in {
			_ = s.k.LeaveGroup(gsimJob, o.member)
			o.in = false
			s.log("%s stops and leaves the group", o.id)
			s.rebalance()
		}
	} else {
		s.log("%s is killed", o.id)
	}
	o.up, o.paused, o.att = false, false, nil
}

// freshReads: p's open epoch has nothing in it, it holds records read
// from the sources, and the repartition topic has nothing committed or
// open that it has not read.
func (s *gsim) freshReads(p *gproc) bool {
	a := p.att
	if a.begun || !slices.ContainsFunc(a.held, func(h gheld) bool { return h.tp.Topic == gsimIn }) {
		return false
	}
	return s.drainedAt(a.pos) && !slices.ContainsFunc(a.held, func(h gheld) bool { return h.tp.Topic == gsimRep })
}

// readAll: p holds nothing, and none of its partitions has anything
// committed or open that it has not read.
func (s *gsim) readAll(p *gproc) bool {
	a := p.att
	if len(a.held) > 0 {
		return false
	}
	for _, tp := range a.tps {
		if !s.readTo(tp, a.pos[tp]) {
			return false
		}
	}
	return true
}

// alone: p is the group's only member, so it owns every partition.
func (s *gsim) alone(p *gproc) bool {
	for _, o := range s.procs {
		if o != p && o.in {
			return false
		}
	}
	return p.in
}

// checkSaved: the stop's savepoint holds the state of exactly the inputs
// before its source offsets, and the committed outputs end at it.
func (s *gsim) checkSaved() error {
	want, err := s.savedMatchesInputs(s.stop.saved)
	if err != nil {
		return err
	}
	last, err := s.outputs()
	if err != nil {
		return err
	}
	for i := range gsimKeys {
		key := gsimKey(int64(i))
		if last[key] != want[key] {
			return fmt.Errorf("key %s: the outputs end at {count %d, sum %d}, the savepoint at {count %d, sum %d}", key, last[key][0], last[key][1], want[key][0], want[key][1])
		}
	}
	return nil
}

// savedMatchesInputs: saved's sums are those of exactly the inputs before
// its source offsets, which it returns.
func (s *gsim) savedMatchesInputs(saved *gsaved) (map[string][2]int64, error) {
	want := map[string][2]int64{}
	for tp, end := range saved.offsets {
		err := s.readCommitted(tp, func(r memkafka.Record) error {
			if r.Offset < end {
				n, _ := strconv.ParseInt(string(r.Value), 10, 64)
				v := want[gsimKey(n)]
				want[gsimKey(n)] = [2]int64{v[0] + 1, v[1] + n}
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	for i := range gsimKeys {
		key := gsimKey(int64(i))
		if got := saved.sums[key]; got != want[key] {
			return nil, fmt.Errorf("key %s: the savepoint holds {count %d, sum %d}, but its source offsets cover {count %d, sum %d}", key, got[0], got[1], want[key][0], want[key][1])
		}
	}
	return want, nil
}

// runLive plays a schedule in which a random process asks for a
// savepoint of the running group: half the time among the crashes of the
// faulty part, half the time after it, while the rest of the input
// arrives and the job drains. Whatever else happens, a savepoint written
// must hold the state of exactly the inputs its offsets cover, and the
// run's outputs must be exact.
func (s *gsim) runLive(inputs int64, steps int) error {
	askAt := s.rng.IntN(2 * steps)
	for i := 0; i < steps; i++ {
		s.feed(inputs / 2)
		if i == askAt {
			s.askLive()
		}
		s.liveStep()
		s.step(s.procs[s.rng.IntN(len(s.procs))], true)
		s.tick()
	}
	for i := steps; i < 2*steps; i++ {
		if s.rng.IntN(4) == 0 {
			s.feed(inputs)
		}
		if i == askAt {
			s.askLive()
		}
		s.liveStep()
		s.step(s.procs[i%len(s.procs)], false)
		s.tick()
	}
	if err := s.finish(inputs); err != nil {
		return err
	}
	if l := s.live; l != nil && l.saved != nil {
		if _, err := s.savedMatchesInputs(l.saved); err != nil {
			return err
		}
	}
	return nil
}

// gsimPause is how long a pause lasts: twice the checkpoint timeout in
// the runtime; here long enough for most pauses to drain, and shorter
// than the longest exports.
const gsimPause = 200 * gsimStep

// gsimInputs are the input topic's partitions.
func gsimInputs() []memkafka.TP {
	tps := make([]memkafka.TP, gsimInParts)
	for i := range tps {
		tps[i] = memkafka.TP{Topic: gsimIn, Partition: int32(i)}
	}
	return tps
}

// liveDone: no live savepoint is asked, or it is written or failed.
func (s *gsim) liveDone() bool {
	l := s.live
	return l == nil || l.saved != nil || l.failed != ""
}

// askLive posts a pause for a savepoint by a live process.
func (s *gsim) askLive() {
	var up []*gproc
	for _, p := range s.procs {
		if p.up && !p.paused {
			up = append(up, p)
		}
	}
	if len(up) == 0 {
		return
	}
	asker := up[s.rng.IntN(len(up))]
	s.live = &glive{id: fmt.Sprintf("%s-%d", asker.id, s.k.Now().UnixMilli()), asker: asker, until: s.k.Now().Add(gsimPause)}
	s.log("%s asks for a savepoint of the group: pause %s until %s", asker.id, s.live.id, s.live.until.Format("15:04:05.0"))
}

// liveStep is the asker's step of the live savepoint (groupSavepoint):
// wait for every member's ack and the drain, then export.
func (s *gsim) liveStep() {
	l := s.live
	if l == nil || l.saved != nil || l.failed != "" {
		return
	}
	if !l.asker.up || l.asker.paused {
		if !l.asker.up {
			l.failed = "the asker died"
			s.log("the savepoint is abandoned: %s", l.failed)
		}
		return
	}
	end := func(failed string) {
		l.failed = failed
		l.until = s.k.Now() // lifted: the members read on
		s.log("the savepoint fails: %s", failed)
	}
	switch {
	case l.offsets == nil && !l.ready:
		if s.k.Now().After(l.until.Add(-gsimPause / 4)) {
			end("the group did not pause and drain in time")
			return
		}
		l.ready = s.allAcked(l.id) && s.repartitionDrained()
	case l.offsets == nil:
		if s.k.PendingOffsets(gsimJob, gsimInputs()) {
			return // fetchStableOffsets waits
		}
		l.offsets = map[memkafka.TP]int64{}
		committed := s.k.GroupOffsets(gsimJob)
		for i := range gsimInParts {
			tp := memkafka.TP{Topic: gsimIn, Partition: int32(i)}
			o, ok := committed[tp]
			if !ok {
				end("a partition has no committed offset yet")
				return
			}
			l.offsets[tp] = o
		}
		if !s.bugs.exportWithoutRecheck && !s.repartitionDrained() {
			end("the group read on before the export (drain)")
			return
		}
		if s.rng.IntN(2) == 0 {
			// Reading a large state takes a while; a small one is read
			// at once.
			l.readIn = s.rng.IntN(3 * int(gsimPause/gsimStep) / 2)
		}
		s.log("%s exports: offsets %v, the state read in %d steps", l.asker.id, l.offsets, l.readIn)
	case l.readIn > 0:
		l.readIn--
	default:
		for i := range gsimRepParts {
			o, _ := s.k.EndOffsets(memkafka.TP{Topic: gsimState, Partition: int32(i)})
			if o.LastStable < o.HighWatermark {
				return // awaitSettled
			}
		}
		if s.k.PendingOffsets(gsimJob, gsimInputs()) {
			return // fetchStableOffsets waits
		}
		sums := map[string][2]int64{}
		for i := range gsimRepParts {
			if err := s.readCommitted(memkafka.TP{Topic: gsimState, Partition: int32(i)}, func(r memkafka.Record) error {
				sums[string(r.Key)] = parseSums(r.Value)
				return nil
			}); err != nil {
				panic(err)
			}
		}
		committed := s.k.GroupOffsets(gsimJob)
		for tp, o := range l.offsets {
			if committed[tp] != o && !s.bugs.exportWithoutRecheck {
				end("the group read on while the state was read")
				return
			}
		}
		l.saved = &gsaved{offsets: l.offsets, sums: sums}
		l.until = s.k.Now()
		s.log("%s wrote the savepoint", l.asker.id)
	}
}

// allAcked: every member of the group has acked pause id, in a committed
// transaction.
func (s *gsim) allAcked(id string) bool {
	acked := map[string]string{}
	if err := s.readCommitted(memkafka.TP{Topic: gsimCkpt}, func(r memkafka.Record) error {
		acked[strings.TrimPrefix(string(r.Key), "paused/")] = string(r.Value)
		return nil
	}); err != nil {
		panic(err)
	}
	members := 0
	for _, p := range s.procs {
		if p.in {
			members++
			if acked[p.id] != id {
				return false
			}
		}
	}
	return members > 0
}

// repartitionDrained: the repartition topic is drained at the group's
// offsets (the runtime's repartitionDrainedForGroup).
func (s *gsim) repartitionDrained() bool { return s.drainedAt(s.k.GroupOffsets(gsimJob)) }

// drainedAt: no transaction is open on the repartition topic, and no
// committed record of it is at or after the positions pos
// (repartitionDrained).
func (s *gsim) drainedAt(pos map[memkafka.TP]int64) bool {
	for i := range gsimRepParts {
		tp := memkafka.TP{Topic: gsimRep, Partition: int32(i)}
		if !s.readTo(tp, pos[tp]) {
			return false
		}
	}
	return true
}

// readTo: no transaction is open on tp, and no committed record of it is
// at or after offset from.
func (s *gsim) readTo(tp memkafka.TP, from int64) bool {
	o, _ := s.k.EndOffsets(tp)
	recs, _, err := s.k.ReadCommitted(tp, from, 1)
	return o.LastStable == o.HighWatermark && err == nil && len(recs) == 0
}

// readCommitted calls fn for every committed record of tp, until fn
// fails.
func (s *gsim) readCommitted(tp memkafka.TP, fn func(memkafka.Record) error) error {
	for from := int64(0); ; {
		recs, next, err := s.k.ReadCommitted(tp, from, 100)
		if err != nil {
			return err
		}
		for _, r := range recs {
			if err := fn(r); err != nil {
				return err
			}
		}
		if next == from {
			return nil
		}
		from = next
	}
}

func gsimSeeds(t *testing.T) (first uint64, n int) {
	switch {
	case *simSeed != 0:
		return *simSeed, 1
	case *simSeeds != 0:
		return 1, *simSeeds
	case raceEnabled:
		return 1, 50
	case testing.Short():
		return 1, 300
	}
	return 1, 1000
}

// TestSimulationGroupMode: many seeded schedules of 3 processes with crashes,
// pauses past the session timeout, restarts with the same instance id and
// rebalances; every one ends with exactly one failure-free run's outputs.
func TestSimulationGroupMode(t *testing.T) {
	first, n := gsimSeeds(t)
	rebalances := 0
	for seed := first; seed < first+uint64(n); seed++ {
		s := newGsim(seed, 3, gsimBugs{})
		if err := s.run(300, 1500); err != nil {
			t.Fatalf("seed %d: %v\n(replay: go test ./engine -run TestSimulationGroupMode -sim.seed=%d)\n%s", seed, err, seed, strings.Join(lastLines(s.trace, 60), "\n"))
		}
		rebalances += int(s.k.Generation(gsimJob))
		if *simSeed != 0 {
			t.Logf("seed %d:\n%s", seed, strings.Join(s.trace, "\n"))
		}
	}
	t.Logf("%d schedules, %d generations in all", n, rebalances)
}

// TestSimulationGroupModeStopWithSavepoint: schedules with crashes end in
// a stop with a savepoint of the last process, asked while input arrives
// and records are on their way through it; every savepoint holds the
// state of exactly the inputs its offsets cover.
func TestSimulationGroupModeStopWithSavepoint(t *testing.T) {
	first, n := gsimSeeds(t)
	for seed := first; seed < first+uint64(n); seed++ {
		s := newGsim(seed, 3, gsimBugs{})
		if err := s.runStop(600, 600); err != nil {
			t.Fatalf("seed %d: %v\n(replay: go test ./engine -run TestSimulationGroupModeStopWithSavepoint -sim.seed=%d)\n%s", seed, err, seed, strings.Join(lastLines(s.trace, 60), "\n"))
		}
		if *simSeed != 0 {
			t.Logf("seed %d:\n%s", seed, strings.Join(s.trace, "\n"))
		}
	}
	t.Logf("%d schedules", n)
}

// TestSimulationGroupModeLiveSavepoint: schedules with crashes in which a
// process asks for a savepoint of the running group; every savepoint
// written holds the state of exactly the inputs its offsets cover, and
// the outputs stay exact. Some pauses run out while the export reads the
// state: those savepoints fail.
func TestSimulationGroupModeLiveSavepoint(t *testing.T) {
	first, n := gsimSeeds(t)
	outcomes := map[string]int{}
	for seed := first; seed < first+uint64(n); seed++ {
		s := newGsim(seed, 3, gsimBugs{})
		if err := s.runLive(300, 1500); err != nil {
			t.Fatalf("seed %d: %v\n(replay: go test ./engine -run TestSimulationGroupModeLiveSavepoint -sim.seed=%d)\n%s", seed, err, seed, strings.Join(lastLines(s.trace, 60), "\n"))
		}
		switch l := s.live; {
		case l == nil:
			outcomes["not asked (nobody up)"]++
		case l.saved != nil:
			outcomes["written"]++
		default:
			outcomes[l.failed]++
		}
		if *simSeed != 0 {
			t.Logf("seed %d:\n%s", seed, strings.Join(s.trace, "\n"))
		}
	}
	if outcomes["written"] == 0 && n >= 50 {
		t.Fatalf("no schedule wrote a savepoint: %v", outcomes)
	}
	t.Logf("%d schedules: %v", n, outcomes)
}

// TestSimulationGroupModeFindsInjectedBugs: the schedules find the mistakes
// group mode must not make: offsets committed without the member's
// generation (a zombie's epoch commits), an attempt that restarts on an
// assignment from the offsets of when it was assigned, and the fences
// that keep an open transaction from holding the group's offsets until it
// times out. A zombie is fenced by the members that saw it leave in most
// schedules, so the generation check (its second line of defence) has
// more schedules to be found in.
func TestSimulationGroupModeFindsInjectedBugs(t *testing.T) {
	for _, tc := range []struct {
		name  string
		bugs  gsimBugs
		seeds uint64
	}{
		{"memberless offset commits", gsimBugs{memberless: true}, 500},
		{"offsets fetched once per assignment", gsimBugs{offsetsAtAssignment: true}, 100},
		{"a restarted process does not fence its own transactional id", gsimBugs{noOwnFence: true}, 100},
		{"departed members fenced after the offset fetch", gsimBugs{fenceAfterFetch: true}, 100},
		{"members that left unseen not fenced", gsimBugs{noFenceOfUnseen: true}, 100},
		{"a stop's drain shown by a checkpoint from before the pause", gsimBugs{drainBeforePause: true}, 100},
		{"a live savepoint's export not rechecked", gsimBugs{exportWithoutRecheck: true}, 300},
		{"state restored before its markers", gsimBugs{restoreBeforeMarkers: true}, 300},
	} {
		t.Run(tc.name, func(t *testing.T) {
			found := 0
			for seed := uint64(1); seed <= tc.seeds; seed++ {
				s := newGsim(seed, 3, tc.bugs)
				var err error
				switch {
				case tc.bugs.drainBeforePause:
					err = s.runStop(600, 600)
				case tc.bugs.exportWithoutRecheck:
					err = s.runLive(300, 1500)
				default:
					err = s.run(300, 1500)
				}
				if err != nil {
					if found == 0 {
						t.Logf("seed %d: %v", seed, err)
					}
					found++
				}
			}
			if found == 0 {
				t.Fatalf("no schedule of %d found the bug", tc.seeds)
			}
			t.Logf("%d of %d schedules found it", found, tc.seeds)
		})
	}
}

func lastLines(lines []string, n int) []string {
	if len(lines) <= n {
		return lines
	}
	return lines[len(lines)-n:]
}
