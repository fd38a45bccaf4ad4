package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/eoflow/pipeline/checkpoint"
	"github.com/eoflow/pipeline/checkpoint/savepoint"
	"github.com/eoflow/pipeline/config"
	"github.com/eoflow/pipeline/internal/testkit/memkafka"
	"github.com/eoflow/pipeline/operator"
	"github.com/eoflow/pipeline/sink"
	"github.com/eoflow/pipeline/source"
	"github.com/eoflow/pipeline/state"
)

// The broker-free simulation of group mode (docs/testing.md, "The seeded
// simulations"): three processes share a keyed job through one consumer
// group on the Kafka model (internal/testkit/memkafka: transactions,
// marker lag and the group coordinator's generation checks, each checked
// against the real broker). Each process is a real Job in group mode and
// each of its assignments becomes real attempts: groupMode's recovery over
// a member transaction whose offsets the model's group coordinator
// checks, groupMode.restoreMember through the cluster seam (the stable
// offset fetch, the wait for the state partitions' markers, their read),
// the task graph with the router's shuffle to the repartition topic and
// the keyed side, groupMode.wire (the member's records, the sources' gate,
// the stop's drain), the coordinator loop, and a group savepoint's steps
// (groupPause), one step at a time under the single-mode simulation's
// scheduler (simGraph).
//
// Membership is a model, since franz-go's group client cannot run on the
// Kafka model: generations, assignments (round-robin over the sorted
// instance ids), eager rebalances that revoke every responsive member's
// attempt (its epoch aborted and its own transactional id fenced, as
// groupRun does), static members replaced by their restarted process,
// members dropped after the session timeout and fenced by a survivor
// (fenceDeparted), and zombies: processes paused through a rebalance
// (static members stay in the group; their commits get
// ILLEGAL_GENERATION) or past the session timeout (UNKNOWN_MEMBER_ID).
// Any call into the model may kill its process, before or after it took
// effect; a fence may fail, and an offset commit may fail (the attempt
// restarts on the same assignment).
//
// The oracle reads the committed outputs after every commit: per key the
// counts go 1, 2, 3... and each sum adds one input of the key not counted
// before; no input becomes two dead letters. At the end every input is
// counted once. A savepoint must hold the state of exactly the inputs its
// offsets cover. TestSimulationGroupModeFindsBugs puts known mistakes
// into the production code (plantedbug.go) and requires the schedules to
// catch each. Replay one seed with its trace:
//
//	go test ./engine -run 'TestSimulationGroupMode/faults' -sim.seed=N -v

const (
	gsimJob     = "gsim"
	gsimInParts = 4
	gsimKeys    = 5
	gsimSession = 6 * time.Second
	// gsimMaxSteps bounds a run: one not drained by then stopped making
	// progress.
	gsimMaxSteps = 60_000
)

// The group simulation's own steps, beside simGraph's.
const (
	gstepFeed simStep = 100 + iota
	gstepClock
	gstepMarker
	gstepProc
	gstepWatch
)

func gsimKey(n int64) string { return "k" + strconv.FormatInt(n%gsimKeys, 10) }

// key is input n's group key: gsimKey, or one of s.keys when the job
// has more.
func (s *gsim) key(n int64) string {
	if s.keys == 0 {
		return gsimKey(n)
	}
	return "k" + strconv.FormatInt(n%int64(s.keys), 10)
}

// gsim is one seeded run: the model, the processes and the oracle.
type gsim struct {
	t     testing.TB
	w     *world
	clock time.Time
	began time.Time
	cfg   *config.Config
	// partOf is the input partition of each input, by its number.
	partOf     map[int64]int
	procs      []*gproc
	plantedBug plantedBug
	dir        string
	// inputs[p] are the inputs of partition p, by offset; fed of want are
	// written, at most burst at once (one while the faults last, so that
	// input arrives all along).
	inputs           [][]simInput
	fed, want, burst int
	// faults: crashes, pauses, failing fences and commits happen.
	faults bool
	steps  int
	// Drawn per seed: how eagerly the brokers write markers (a weight
	// among the steps; 1: seldom), how often a process is paused, the
	// chance that a fence fails (the coordinator is slow or away).
	markers, pauseEvery int
	fenceFails          float64
	// orphaned are the instances the group dropped with no live member
	// there to fence them, and when: a process started later fences them
	// if their transaction is open (membership.unseen), and must never
	// wait for one. stalled is the first such wait.
	orphaned map[string]time.Time
	stalled  error
	view     gsimView
	stop     *gsimStop // runStop's
	live     *gsimLive // runLive's
	// table: the job joins the table tiers (groupsimjoin_test.go);
	// moveTier: halfway through, the table moves key k0 to tier k0x, and
	// moved says it did.
	table, moveTier, moved bool
	// tableBad counts the table's records that are not JSON: one
	// written before any process starts, one more at each quarter of the
	// input (maybeMoveTier).
	tableBad int
	// joinTopic is the table job's repartition topic when its table is
	// partitioned and joined by a field: the stream crosses it, keyed by
	// the join key (config/joinrepartition.go). "": none.
	joinTopic string
	// tableParts is the table topic's partition count.
	tableParts int
	// inFlight are the inputs a savepoint being checked leaves in the
	// join's repartition topic, unread (inFlightAt).
	inFlight map[int64]bool
	// counts are what happened, for the log; broken is a violation found
	// by steps taken inside another's call (meanwhile).
	counts map[string]int
	broken error
	// windowed: the job is parity-windows (groupsimwindows_test.go) with
	// windows of kind windowKind, judged by its oracle; lateness is its
	// allowed lateness.
	windowed   bool
	windowKind simWindowKind
	// copartitioned: the input is keyed by the group key and the job
	// does not repartition (scale.key_by_is_record_key); one in 40
	// inputs is keyed or placed otherwise, and must become a dead letter.
	copartitioned bool
	// keys is how many group keys the inputs have (0: gsimKeys): a
	// co-partitioned windowed job has keys in every input partition, so
	// that every partition's watermark moves.
	keys     int
	lateness int64
	wview    gsimWindowView
	// joined: the job is the interval join (groupsimintervaljoin_test.go),
	// judged by its oracle.
	joined bool
	pview  gsimPairView
	// asOf: the job is the join as of event time
	// (groupsimasofjoin_test.go), its table asOfTable, judged by its
	// oracle.
	asOf      bool
	asOfTable asOfTableModel
	aview     gsimAsOfView
	// asOfPartitioned: the table of the join as of event time is
	// partitioned (tables[].mode: partitioned), its topic with as many
	// partitions as the input's, each input keyed by its join key and in
	// the partition the table's records of that key are in.
	asOfPartitioned bool
	// asOfKeyed: the join as of event time is followed by the keyed sums,
	// keyed by the tier each input met (judged by check, the sums'
	// oracle, with groupKey).
	asOfKeyed bool
	// from: the processes start from a group savepoint of a run before
	// (groupsimasofsavepoint_test.go); cut is what that run had
	// committed at its savepoint's offsets, as it wrote the savepoint.
	from *gsimFrom
	cut  *gsimCut
}

// gproc is one process: a Job with its own instance id, and its member
// of the group as the model has it.
type gproc struct {
	id string
	j  *Job // this life's: a restarted process is a new Job
	// life counts its starts; since is when it died or was paused,
	// started when it last started; gone: stopped for good.
	life             int
	up, paused, gone bool
	since, started   time.Time
	member           memkafka.GroupMember
	in               bool        // the coordinator has it as a member
	asg              *assignment // its share of a generation, until revoked
	att              *gsimAttempt
	watched          int64       // where its pause watch reads the checkpoint topic
	rejoinAt         time.Time   // left behind by a rebalance: joins again from then on
	pause            *groupPause // the group savepoint it asked for
	exporting        bool
}

// gsimAttempt is an attempt: restoring until s is set, then running.
type gsimAttempt struct {
	a *attempt
	m *groupMode
	s *simGraph
}

// gsimView is what the oracle has read of the committed outputs.
type gsimView struct {
	next    map[memkafka.TP]int64
	last    map[string]simAgg         // key -> last output
	counted map[string]map[int64]bool // key -> the inputs its sums added
	dead    map[string]bool           // partition/offset of each dead letter
	// lastN is, by key and input partition, the last input counted
	// (checkOrder).
	lastN map[string]map[int]int64
	// tableDead are the dead letters of the table's records (the table
	// job, groupsimjoin_test.go), by partition/offset.
	tableDead map[string]bool
}

// gsimKind is the job the simulation runs: the keyed sum through the
// repartition topic, parity-windows with tumbling, hopping or session
// windows, the keyed sum of an input already partitioned by its key, or
// the interval join of two streams.
type gsimKind int

const (
	gsimSums gsimKind = iota
	gsimWindows
	gsimHopping
	gsimSessions
	gsimCopartitioned
	gsimIntervalJoin
	gsimAsOfJoin
	gsimAsOfWindows
	gsimAsOfSums
	// gsimCoWindows, gsimCoHopping and gsimCoSessions are parity-windows
	// (tumbling, hopping, sessions) on an input partitioned by its group
	// key, not repartitioned.
	gsimCoWindows
	gsimCoHopping
	gsimCoSessions
	gsimAsOfPartitioned
	// gsimAsOfCoWindows is asof-windows (tumbling windows behind a join
	// as of event time) on an input partitioned by its group key, not
	// repartitioned: the records the join holds are held on the keyed
	// operator's own process.
	gsimAsOfCoWindows
	// gsimAsOfRepartitioned is asof-windows with its table partitioned
	// and the stream not partitioned by the join key: the job
	// repartitions the stream by it (config/joinrepartition.go), and the
	// records' event times, the stream partitions' watermarks and the
	// join's held records cross that topic (jointime.go).
	gsimAsOfRepartitioned
)

// copartitioned reports whether kind's input is partitioned by its group
// key and the job does not repartition (scale.key_by_is_record_key).
func (kind gsimKind) copartitioned() bool {
	return kind == gsimCopartitioned || kind == gsimCoWindows || kind == gsimCoHopping || kind == gsimCoSessions || kind == gsimAsOfCoWindows
}

// windows reports whether kind is a windowed job, and its windows.
func (kind gsimKind) windows() (simWindowKind, bool) {
	switch kind {
	case gsimWindows, gsimCoWindows:
		return simTumbling, true
	case gsimHopping, gsimCoHopping:
		return simHopping, true
	case gsimSessions, gsimCoSessions:
		return simSessions, true
	case gsimAsOfWindows, gsimAsOfCoWindows, gsimAsOfRepartitioned:
		return simTumbling, true
	}
	return 0, false
}

func newGsim(t testing.TB, seed uint64, m plantedBug, dir string, kind gsimKind) *gsim {
	rng := rand.New(rand.NewPCG(seed, 0x6e0))
	start := time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)
	s := &gsim{t: t, clock: start, began: start, plantedBug: m, dir: dir, burst: 1, faults: true,
		orphaned: map[string]time.Time{}, counts: map[string]int{}}
	s.w = &world{rng: rng, kafka: memkafka.New(start), root: dir, crashP: []float64{0.002, 0.005, 0.01}[rng.IntN(3)],
		manual: map[string]bool{RepartitionTopic(gsimJob): true, GroupStateTopic(gsimJob): true}}
	s.w.kafka.SetMarkerLag(true)
	s.markers = []int{1, 3, 8}[rng.IntN(3)]
	s.pauseEvery = []int{300, 1500}[rng.IntN(2)]
	s.fenceFails = []float64{0, 0.5}[rng.IntN(2)]
	env := map[string]string{
		"KAFKA_BROKERS": "127.0.0.1:9", "JOB_NAME": gsimJob, "INPUT_TOPIC": "in", "OUTPUT_TOPIC": "out",
		"GUARANTEE": "exactly_once", "CHECKPOINT_INTERVAL": []string{"50ms", "100ms", "300ms"}[rng.IntN(3)],
		"ADMIN_LISTEN": "off", "SCALE_MODE": "group", "SCALE_PARTITIONS": "3", "SESSION_TIMEOUT": gsimSession.String(),
	}
	base := paritySumYAML
	if w, ok := kind.windows(); ok {
		base = s.windowsConfig(env, w)
	}
	if kind == gsimIntervalJoin {
		base = s.intervalJoinConfig(env)
	}
	switch kind {
	case gsimAsOfJoin:
		base = s.asOfJoinConfig(env)
	case gsimAsOfWindows, gsimAsOfCoWindows:
		base = s.withAsOfTable(asOfWindowsJob.config)
	case gsimAsOfSums:
		base = s.asOfSumsConfig(env)
	case gsimAsOfPartitioned:
		base = s.asOfPartitionedConfig(env)
	case gsimAsOfRepartitioned:
		base = s.asOfRepartitionedConfig()
	}
	keys := gsimKeys
	if kind.copartitioned() {
		// One state partition per input partition.
		env["SCALE_PARTITIONS"] = strconv.Itoa(gsimInParts)
		if _, windowed := kind.windows(); windowed {
			// k0 to k19 land in every partition of 4 (k14 and k18 in
			// partition 3); k0 to k4 only in partitions 0 and 1.
			s.keys, keys = 20, 20
		}
	}
	yaml := strings.Replace(base, `'n % 2 == 0 ? "even" : "odd"'`, fmt.Sprintf(`'"k" + string(n %% %d)'`, keys), 1)
	s.cfg = parseConfig(t, []byte(yaml), env)
	if kind.copartitioned() {
		s.copartitioned, s.cfg.Scale.KeyByIsRecordKey = true, true
	}
	s.cfg.Workers = 1 + rng.IntN(2)
	s.cfg.Checkpoint.KeyGroups = 12
	s.cfg.Checkpoint.Timeout = 4 * time.Second // a group savepoint's pause: 8s
	topics := map[string]int{
		"in": gsimInParts, "out": 1, s.cfg.Sinks[0].DeadLetterTopic: 1, checkpoint.TopicName(gsimJob): 1,
		RepartitionTopic(gsimJob): s.cfg.Scale.Partitions, GroupStateTopic(gsimJob): s.cfg.Scale.Partitions, simLateTopic: 1,
	}
	if s.copartitioned {
		// No repartition topic, as on a cluster: a record written there
		// fails its transaction.
		delete(topics, RepartitionTopic(gsimJob))
	}
	for topic, n := range topics {
		if err := s.w.kafka.CreateTopic(topic, n); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []string{"a", "b", "c"} {
		s.procs = append(s.procs, &gproc{id: id})
	}
	s.inputs = make([][]simInput, gsimInParts)
	return s
}

func (s *gsim) log(format string, args ...any) {
	s.w.log("%7.3fs %s", s.clock.Sub(s.began).Seconds(), fmt.Sprintf(format, args...))
}

// violation is a broken invariant, as opposed to a failure the job must
// survive.
func (s *gsim) violation(format string, args ...any) error {
	err := fmt.Errorf("%w: %s", errViolation, fmt.Sprintf(format, args...))
	s.log("%v", err)
	return err
}

// cluster is what p's code reads of the model. Its stable offset fetch
// must never wait for a transaction that should have been fenced.
func (s *gsim) cluster(p *gproc) simCluster {
	return simCluster{w: s.w, job: gsimJob, members: s.members, seen: map[memkafka.TP]int64{}, unstable: func(holders []string) {
		for _, h := range holders {
			id := strings.TrimPrefix(h, gsimJob+"-")
			orphaned, ok := s.orphaned[id]
			if s.stalled == nil && (id == p.id || ok && !p.started.Before(orphaned)) {
				s.stalled = s.violation("%s waits for its offsets held by the open transaction of %s, which nobody fenced: only the transaction timeout ends it", p.id, h)
			}
		}
	}}
}

// members are the instance ids the coordinator has in the group.
func (s *gsim) members() []string {
	var ids []string
	for _, p := range s.procs {
		if p.in {
			ids = append(ids, p.id)
		}
	}
	return ids
}

// as runs fn as a step of p: its calls are p's, and a crash (a panic
// from a call into the model) kills p, if the step is still of the life
// that crashed.
func (s *gsim) as(p *gproc, fn func() error) error {
	prev, life := s.w.who, p.life
	s.w.who = p.id
	defer func() {
		s.w.who = prev
		if r := recover(); r != nil {
			if _, ok := r.(simCrash); !ok {
				panic(r)
			}
			if p.life == life && p.up {
				s.kill(p)
			}
		}
	}()
	return fn()
}

// kill is a kill -9: everything the process held goes, its transaction
// stays open, and the group keeps it as a member until the session
// timeout.
func (s *gsim) kill(p *gproc) {
	s.log("%s is killed", p.id)
	s.counts["kills"]++
	p.up, p.paused, p.att, p.asg, p.pause, p.exporting = false, false, nil, nil, nil, false
	p.since = s.clock
	p.life++
	if l := s.live; l != nil && l.asker == p && !l.saved && l.failed == "" {
		l.failed = "the asker died"
	}
}

// start is a process (re)started as a new Job: it ends what its instance
// id left open (endOwnTransaction), joins, and fences the instances that
// left unseen (membership.unseen).
func (s *gsim) start(p *gproc) error {
	opts := []Option{WithInstanceID(p.id), withPlantedBug(s.plantedBug)}
	if s.from != nil {
		opts = append(opts, WithSavepointRestore(s.from.r, s.from.opts))
	}
	j, err := New(s.cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), opts...)
	if err != nil {
		s.t.Fatal(err)
	}
	j.importWait = 0 // asked again at a later step
	j.now = func() time.Time { return s.clock }
	p.j, p.up, p.started, p.watched = j, true, s.clock, 0
	p.life++
	s.log("%s starts", p.id)
	return s.as(p, func() error {
		s.fenceOwn(p)
		s.join(p)
		open := s.w.kafka.OpenTransactions()
		for _, q := range s.procs {
			if q != p && !q.in && slices.Contains(open, sink.MemberTransactionalID(gsimJob, q.id)) {
				s.log("%s, started, fences %s, which left unseen", p.id, q.id)
				s.fence(q.id)
			} else if q != p && !q.in {
				delete(s.orphaned, q.id)
			}
		}
		return nil
	})
}

// fenceOwn initializes p's own transactional id, aborting what it left
// open (endOwnTransaction).
func (s *gsim) fenceOwn(p *gproc) {
	after := s.w.io("init its own producer id")
	s.fence(p.id)
	after()
}

func (s *gsim) fence(instance string) {
	if _, err := s.w.kafka.InitProducer(sink.MemberTransactionalID(gsimJob, instance), s.cfg.Kafka.TransactionTimeout); err != nil {
		panic(err)
	}
	delete(s.orphaned, instance)
}

// fenceFailed draws whether a fence fails now: its caller logs it and
// goes on.
func (s *gsim) fenceFailed() bool { return s.faults && s.w.rng.Float64() < s.fenceFails }

// join puts p into the group: a static member back before the group
// dropped it replaces itself in its generation; anyone else starts a new
// one.
func (s *gsim) join(p *gproc) {
	if !p.in {
		// A new member: the group rebalances, and its members commit
		// first.
		s.yieldAll(p.id + " joins")
	}
	m, err := s.w.kafka.JoinGroup(gsimJob, p.id)
	if err != nil {
		panic(err)
	}
	replaced := p.in
	p.member, p.in = m, true
	delete(s.orphaned, p.id)
	s.log("%s joins as %s in generation %d (static replacement: %v)", p.id, m.MemberID, m.Generation, replaced)
	if replaced {
		s.counts["static restarts"]++
		p.asg = s.assignment(p)
		return
	}
	s.rebalance()
}

// assignment is p's share of the generation: every partition dealt
// round-robin over the members' sorted instance ids.
func (s *gsim) assignment(p *gproc) *assignment {
	ids := s.members()
	slices.Sort(ids)
	var all []source.TopicPartition
	for i := range int32(gsimInParts) {
		all = append(all, source.TopicPartition{Topic: "in", Partition: i})
	}
	for i := range int32(s.cfg.Scale.Partitions) {
		if !s.copartitioned {
			all = append(all, source.TopicPartition{Topic: RepartitionTopic(gsimJob), Partition: i})
		}
	}
	if s.joinTopic != "" {
		for i := range int32(s.tableParts) {
			all = append(all, source.TopicPartition{Topic: s.joinTopic, Partition: i})
		}
	}
	a := &assignment{member: sink.GroupMember{Group: gsimJob, MemberID: p.member.MemberID, InstanceID: p.id, Generation: p.member.Generation}, members: ids}
	for i, tp := range all {
		if ids[i%len(ids)] == p.id {
			a.tps = append(a.tps, tp)
		}
	}
	sortPartitions(a.tps)
	return a
}

// rebalance is an eager rebalance into the coordinator's new generation:
// every responsive member's attempt is revoked before anyone reads on. A
// paused member does not rejoin, and stays in the group all the same (the
// coordinator removes only dynamic members that miss a rebalance; a
// static one stays until its session times out) with its share: it wakes
// up as a zombie of the old generation.
func (s *gsim) rebalance() {
	gen := s.w.kafka.Generation(gsimJob)
	for _, p := range s.procs {
		if p.in && p.up && !p.paused {
			_ = s.as(p, func() error { s.revoke(p, "the group rebalanced"); return nil })
			p.member.Generation = gen
		}
	}
	for _, p := range s.procs {
		if p.in && p.up && !p.paused {
			p.asg = s.assignment(p)
		}
	}
	s.log("generation %d: %v", gen, s.members())
}

// yieldSteps bounds the steps of a revoked attempt's final checkpoint
// (groupRun's yieldWait): one still running after them is cancelled, its
// epoch aborted, when the rebalance revokes it.
const yieldSteps = 300

// yieldAll: the coordinator is about to form a new generation (why), and
// every responsive member of the current one learns it first: its
// running attempt commits what it did while its generation still holds
// (coordinatorLoop.onYield, asked by groupRun on the revocation), within
// yieldSteps of its own. Members do that concurrently in the real group;
// here one after the other, the others waiting, which is one of those
// orders. Paused members and zombies do not hear of it, and an attempt
// still restoring is cancelled at the revocation (rebalance) instead.
func (s *gsim) yieldAll(why string) {
	for _, p := range s.procs {
		if !p.in || !p.up || p.paused || s.stale(p) || p.att == nil || p.att.s == nil {
			continue
		}
		s.log("%s: %s; the group revokes its assignment, and its attempt commits first", p.id, why)
		err := s.as(p, func() error {
			if err := p.att.s.g.loop.onYield(); err != nil {
				return s.ended(p, err)
			}
			for range yieldSteps {
				if p.att == nil || p.att.s == nil {
					return nil
				}
				if err := s.graphStep(p); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil && s.broken == nil {
			s.broken = err
		}
		if p.up && p.in && p.att == nil && s.faults && s.w.rng.IntN(5) == 0 {
			// Its commit outlasted the rebalance timeout: the coordinator
			// forms the next generation without it, and it joins again
			// later, its kept state a generation behind.
			s.log("%s: its commit outlasts the rebalance timeout; the group goes on without it", p.id)
			s.counts["members left behind by a rebalance"]++
			_ = s.w.kafka.LeaveGroup(gsimJob, p.member)
			p.in, p.asg = false, nil
			// It learns so at its next heartbeat, a second later.
			p.rejoinAt = s.clock.Add(time.Second)
			s.departed(p)
		}
	}
}

// stale reports whether p is a member of an old generation: it missed
// the rebalances since.
func (s *gsim) stale(p *gproc) bool {
	return p.in && p.member.Generation != s.w.kafka.Generation(gsimJob)
}

// revoke ends p's attempt as groupRun does when the group takes the
// assignment back: the attempt's epoch aborted, then its own
// transactional id fenced (which may fail: the transaction coordinator
// may still be writing the markers of its last commit).
func (s *gsim) revoke(p *gproc, why string) {
	p.asg = nil
	at := p.att
	if at == nil {
		return
	}
	s.log("%s: %s; its attempt ends", p.id, why)
	p.att = nil
	if at.s != nil {
		_ = at.m.finish(at.a, errRebalanced)
	}
	if s.fenceFailed() {
		s.log("%s: fencing its own transactional id fails", p.id)
		return
	}
	s.fenceOwn(p)
}

// departed: the group dropped gone. A live member of the new generation
// fences its transactional id before it fetches its offsets
// (membership.fenceDeparted); if that fails, the generation check is what
// stops the zombie. With no live member, nobody does.
func (s *gsim) departed(gone *gproc) {
	for _, p := range s.procs {
		if p != gone && p.up && !p.paused && p.in {
			if s.fenceFailed() {
				s.log("%s's fence of %s, which left, fails", p.id, gone.id)
			} else {
				s.log("%s fences %s, which left", p.id, gone.id)
				s.fence(gone.id)
			}
			return
		}
	}
	s.log("no live member is there to fence %s", gone.id)
	s.orphaned[gone.id] = s.clock
}

// expire drops the members not heard of for the session timeout:
// crashed and not back, or paused.
func (s *gsim) expire() {
	for _, p := range s.procs {
		if p.in && (!p.up || p.paused) && s.clock.Sub(p.since) > gsimSession {
			s.log("the group drops %s after the session timeout", p.id)
			s.counts["members dropped"]++
			s.yieldAll(p.id + " is dropped")
			_ = s.w.kafka.LeaveGroup(gsimJob, p.member)
			p.in = false
			s.rebalance()
			s.departed(p)
		}
	}
}

// begin starts an attempt of p on its assignment: groupMode's recovery
// over the member's transaction, then its restore.
func (s *gsim) begin(p *gproc) error {
	if len(p.asg.tps) == 0 {
		return nil // groupAttempt waits for a share
	}
	recs := &jobRecords{} // as prepare reads them
	fold := foldJobRecords(gsimJob, recs)
	for _, r := range s.w.readAll(checkpoint.TopicName(gsimJob)) {
		if err := fold(r); err != nil {
			return s.violation("reading the checkpoint topic: %v", err)
		}
	}
	m := &groupMode{asg: p.asg, records: recs}
	// The member's own recovery and producers (groupMode.recover), on
	// the model's clients.
	a := &attempt{j: p.j, mode: m, cluster: s.cluster(p), adapters: simAdapters{
		w: s.w, now: func() time.Time { return s.clock },
		hiccup: func() bool { return s.faults && s.w.rng.IntN(30) == 0 },
		busy:   s.fenceFailed,
	}}
	p.att = &gsimAttempt{a: a, m: m}
	err := m.recover(context.Background(), a)
	if errors.Is(err, errSimWait) {
		p.att = nil // begun again at a later step
		return nil
	}
	s.log("%s: attempt in generation %d on %v", p.id, p.asg.member.Generation, p.asg.tps)
	if err != nil {
		return s.ended(p, fmt.Errorf("recovering: %w", err))
	}
	return s.restore(p)
}

// restore runs the attempt's restore (asked again at a later step while
// it waits), then builds and wires its task graph.
func (s *gsim) restore(p *gproc) error {
	at := p.att
	var plan *savepoint.RestorePlan
	if s.from != nil {
		plan = s.from.plan
	}
	err := at.m.restore(context.Background(), at.a, plan)
	if errors.Is(err, errSimWait) {
		return nil
	}
	if err != nil {
		return s.ended(p, err)
	}
	if err := s.loadTable(at.a); err != nil {
		return s.ended(p, err)
	}
	if err := s.tablesAtEnd(p, at.a); err != nil {
		return err
	}
	if s.asOf {
		if err := s.restoredAsOf(p, at.a); err != nil {
			return err
		}
	}
	readers, err := at.m.readers(at.a)
	if err != nil {
		return s.ended(p, err)
	}
	g, err := newGraph(at.a, readers)
	if err != nil {
		return s.ended(p, err)
	}
	at.m.wire(at.a, g)
	at.s = newSimGraph(s.w, at.a, g)
	at.s.committed = func(checkpoint.ID) error { return s.check() }
	s.log("%s: restored at %v", p.id, at.a.offsets)
	s.countLocalShuffle(at.a)
	if at.m.continued {
		s.counts["attempts that kept their state"]++
		s.log("%s: kept the state of %v from the last generation", p.id, at.m.owned)
	}
	return s.askStop(p)
}

// countLocalShuffle counts the attempts whose repartition partitions
// all took the local shuffle (localshuffle.go), and those that found
// records left in some of theirs, which go through the topic.
func (s *gsim) countLocalShuffle(a *attempt) {
	owned, local := 0, 0
	for tp := range a.offsets {
		if tp.Topic == RepartitionTopic(gsimJob) {
			owned++
			if a.localShuffle != nil && a.localShuffle[tp.Partition] {
				local++
			}
		}
	}
	switch {
	case owned == 0:
	case local == owned:
		s.counts["attempts all local"]++
	case local > 0:
		s.counts["attempts partly local"]++
	default:
		s.counts["attempts all through the topic"]++
	}
}

// localShuffleExercised: a keyed sums job's schedules took both the
// local shuffle and, where records were left to read, the topic.
func localShuffleExercised(kind gsimKind, n int, counts map[string]int) error {
	if kind != gsimSums && kind != gsimWindows || n < 3 {
		return nil
	}
	if counts["attempts all local"] == 0 || counts["attempts partly local"]+counts["attempts all through the topic"] == 0 {
		return fmt.Errorf("%d schedules: attempts all local %d, partly %d, none %d: the simulation does not exercise both paths of the shuffle",
			n, counts["attempts all local"], counts["attempts partly local"], counts["attempts all through the topic"])
	}
	return nil
}

// ended ends p's attempt with err (not a crash) as attempt.run does, its
// epoch aborted; the process starts another on its assignment. A failure
// that would stop the process is a violation.
func (s *gsim) ended(p *gproc, err error) error {
	at := p.att
	p.att = nil
	s.log("%s: the attempt ends: %v", p.id, err)
	if errors.Is(err, errYielded) {
		s.counts["attempts committed at the revocation"]++
	}

	if errors.Is(err, kerr.IllegalGeneration) || errors.Is(err, kerr.UnknownMemberID) || errors.Is(err, kerr.FencedInstanceID) {
		s.counts["commits refused"]++
	}
	if at.s != nil {
		_ = at.m.finish(at.a, err)
	}
	if permanent(err) {
		return s.violation("%s would stop: %v", p.id, err)
	}
	return nil
}

// step is one step of p: start, wake, pause, learn it is out, (re)join,
// begin or restore an attempt, or a step of its running one.
func (s *gsim) step(p *gproc) error {
	rng := s.w.rng
	switch {
	case p.gone:
		return nil
	case !p.up:
		if !s.faults || rng.IntN(300) == 0 {
			return s.start(p)
		}
		return nil
	case p.paused:
		if !s.faults || rng.IntN(600) == 0 {
			p.paused = false
			s.log("%s wakes up (SIGCONT)", p.id)
		}
		return nil
	case s.faults && rng.IntN(s.pauseEvery) == 0:
		p.paused, p.since = true, s.clock
		s.log("%s is paused (SIGSTOP)", p.id)
		return nil
	}
	return s.as(p, func() error {
		switch {
		case s.faults && rng.IntN(1500) == 0:
			s.log("%s: crash between steps", p.id)
			panic(simCrash{at: "between steps"})
		case (!p.in || s.stale(p)) && p.asg != nil && rng.IntN(80) == 0:
			// A zombie learns at a heartbeat that the group moved on;
			// until then it works on, and starts attempts on its old
			// assignment.
			s.counts["zombies"]++
			s.revoke(p, "it learns the group moved on")
		case !p.in && s.clock.Before(p.rejoinAt):
			// Left behind by a rebalance; it has not heard yet.
		case (!p.in || s.stale(p)) && p.asg == nil:
			s.join(p)
		case p.att == nil && p.asg != nil:
			return s.begin(p)
		case p.att == nil:
		case p.att.s == nil:
			return s.restore(p)
		default:
			return s.graphStep(p)
		}
		return nil
	})
}

// graphStep is a step of p's running attempt: one of its graph's, its
// loop's tick, its pause watch, or the group savepoint it asked for.
func (s *gsim) graphStep(p *gproc) error {
	g := p.att.s
	var opts simOptions
	g.options(opts.add)
	opts.add(stepTick, 0, 2)
	opts.add(gstepWatch, 0, 1)
	if p.pause != nil && !p.exporting {
		opts.add(stepSavepoint, 0, 2)
	}
	if s.asOf || s.table && s.fed >= s.want {
		// The table's task reads on: the table's event time moves
		// within the attempt. The table job's tasks read on once every
		// input is written, for the dead letters of the table's last
		// bad records (drained).
		for i := range g.g.tables.tasks {
			opts.add(stepTable, i, 2)
		}
	}
	var err error
	switch step, arg := opts.pick(s.w.rng); step {
	case stepTick:
		g.g.loop.onTick()
	case gstepWatch:
		// pauseWatch.run: the checkpoint topic's news.
		after := s.w.io("poll the checkpoint topic")
		recs, next, rerr := s.w.kafka.ReadCommitted(memkafka.TP{Topic: checkpoint.TopicName(gsimJob)}, p.watched, 100)
		if rerr != nil {
			panic(rerr)
		}
		for _, r := range recs {
			p.j.pauses.add(fromModel(r))
		}
		p.watched = next
		after()
	case stepSavepoint:
		return s.liveStep(p)
	case stepTable:
		err = g.g.tables.tasks[arg].poll(g.ctx)
	default:
		err = g.step(step, arg)
	}
	if err == nil {
		err = g.g.loop.react()
	}
	switch {
	case err == nil:
		return nil
	case errors.Is(err, errViolation):
		return err
	case errors.Is(err, errStopped):
		return s.stopped(p, err)
	}
	return s.ended(p, err)
}

// next is one scheduler step: input arrives, the clock moves (and the
// group drops members past the session timeout), the brokers write a
// marker, or a process takes a step.
func (s *gsim) next(procs []*gproc, feedWeight int) error {
	if s.broken != nil {
		return s.broken
	}
	s.steps++
	var opts simOptions
	if s.fed < s.want {
		opts.add(gstepFeed, 0, feedWeight)
	}
	opts.add(gstepClock, 0, 3)
	if s.w.kafka.PendingMarkers() > 0 {
		opts.add(gstepMarker, 0, s.markers)
	}
	for i := range procs {
		opts.add(gstepProc, i, 6)
	}
	switch step, i := opts.pick(s.w.rng); step {
	case gstepFeed:
		// One in 40 cannot be decoded: exactly one dead letter.
		for k := 1 + s.w.rng.IntN(s.burst); k > 0 && s.fed < s.want; k-- {
			s.fed++
			in := simInput{n: int64(s.fed), bad: s.w.rng.IntN(40) == 0}
			if s.windowed || s.joined || s.asOf {
				in.ts = s.eventTime(in.n)
			}
			p := s.w.rng.IntN(gsimInParts)
			rec := s.inputRecord(int32(p), in)
			if s.copartitioned {
				s.keyInput(&rec, &in)
			}
			p = int(rec.Partition)
			if _, err := s.w.kafka.Append(rec); err != nil {
				panic(err)
			}
			s.inputs[p] = append(s.inputs[p], in)
			if s.partOf == nil {
				s.partOf = map[int64]int{}
			}
			s.partOf[in.n] = p
		}
		s.maybeMoveTier()
		s.maybeWriteAsOf()
	case gstepClock:
		d := time.Duration(1+s.w.rng.IntN(60)) * time.Millisecond
		s.clock = s.clock.Add(d)
		s.w.kafka.Advance(d)
		s.expire()
	case gstepMarker:
		// Each marker of a decided transaction on its own (marker lag);
		// slow brokers seldom.
		if s.markers > 1 || s.w.rng.IntN(20) == 0 {
			s.w.kafka.DeliverMarker(s.w.rng.IntN(s.w.kafka.PendingMarkers()))
		}
	default:
		return s.step(procs[i])
	}
	return nil
}

// faulty runs steps with faults until step until.
func (s *gsim) faulty(until int) error {
	for s.steps < until {
		if err := s.next(s.procs, 1); err != nil {
			return err
		}
	}
	s.faults, s.w.crashP = false, 0
	return nil
}

// finish: the faults are over, the rest of the input arrives, and the
// job must drain with every output exact.
func (s *gsim) finish() error {
	s.faults, s.w.crashP, s.burst = false, 0, 5
	for i := 0; s.steps < gsimMaxSteps; i++ {
		if err := s.next(s.procs, 2); err != nil {
			return err
		}
		if i%20 == 0 && s.drained() && s.windowsDue() && (s.live == nil || s.live.saved || s.live.failed != "") {
			return s.checkEnd()
		}
	}
	return s.violation("no end after %d steps: the group stopped making progress (%s)", s.steps, s.describe())
}

// describe says where each process is, for a run that does not end.
func (s *gsim) describe() string {
	var out []string
	for _, p := range s.procs {
		what := "running"
		switch {
		case p.gone:
			what = "gone"
		case !p.up:
			what = "down"
		case p.paused:
			what = "paused"
		case p.att == nil:
			what = "without an attempt"
		case p.att.s == nil:
			what = "restoring"
		}
		out = append(out, fmt.Sprintf("%s: %s, in the group %v, assigned %v", p.id, what, p.in, p.asg != nil))
	}
	return fmt.Sprintf("%s; group offsets %v", strings.Join(out, "; "), s.w.kafka.GroupOffsets(gsimJob))
}

// drained: every input was written, the group committed offsets past
// every record of the source and repartition partitions (a reader's
// position is after the last record it read, before the marker that ends
// its transaction), and no transaction is open there or on the outputs
// (the late topic included).
func (s *gsim) drained() bool {
	if s.fed < s.want {
		return false
	}
	committed := s.w.kafka.GroupOffsets(gsimJob)
	read := map[string]int{"in": gsimInParts, RepartitionTopic(gsimJob): s.cfg.Scale.Partitions}
	// The late topic too: a zombie's transaction left open there (its
	// source side judged a record late, as its successor did) holds back
	// what read_committed readers see of the successor's late records.
	topics := map[string]int{"in": gsimInParts, RepartitionTopic(gsimJob): s.cfg.Scale.Partitions, "out": 1, s.cfg.Sinks[0].DeadLetterTopic: 1, simLateTopic: 1}
	if s.copartitioned {
		delete(topics, RepartitionTopic(gsimJob))
	}
	if s.joinTopic != "" {
		read[s.joinTopic], topics[s.joinTopic] = s.tableParts, s.tableParts
	}
	for topic, n := range topics {
		for p := range int32(n) {
			tp := memkafka.TP{Topic: topic, Partition: p}
			o, _ := s.w.kafka.EndOffsets(tp)
			left, _, err := s.w.kafka.ReadCommitted(tp, committed[tp], 1)
			if o.LastStable != o.HighWatermark || err != nil || read[topic] > 0 && len(left) > 0 {
				return false
			}
		}
	}
	if s.table {
		// The table job's tables are drained when the group committed
		// a position at the end of every partition: every bad record's
		// dead letter is committed by then.
		n, _ := s.w.kafka.Partitions(gsimTable)
		for p := range int32(n) {
			tp := memkafka.TP{Topic: gsimTable, Partition: p}
			o, _ := s.w.kafka.EndOffsets(tp)
			if at, ok := committed[tp]; !ok || at < o.LastStable {
				return false
			}
		}
	}
	if s.asOf {
		// Records held at the committed offsets are not drained.
		if held, err := s.asOfHeld(); err != nil || held > 0 {
			return false
		}
	}
	return true
}

// check reads what was committed since its last call: per key the counts
// go 1, 2, 3... in order, each sum adds an input of the key not counted
// before, and no input becomes two dead letters.
func (s *gsim) check() error {
	if s.asOf {
		if _, err := s.asOfHeld(); err != nil {
			return err
		}
	}
	if s.windowed {
		return s.checkWindows(false)
	}
	if s.joined {
		return s.checkPairs(false)
	}
	if s.asOf && !s.asOfKeyed {
		return s.checkAsOf(false)
	}
	v := &s.view
	if v.next == nil {
		v.next, v.last, v.counted, v.dead, v.tableDead = map[memkafka.TP]int64{}, map[string]simAgg{}, map[string]map[int64]bool{}, map[string]bool{}, map[string]bool{}
	}
	tail := func(topic string) []memkafka.Record {
		tp := memkafka.TP{Topic: topic}
		recs, next, err := s.w.kafka.ReadCommitted(tp, v.next[tp], 1<<20)
		if err != nil {
			panic(err)
		}
		v.next[tp] = next
		return recs
	}
	for _, r := range tail("out") {
		var o struct {
			Key        string
			Count, Sum int64
		}
		if err := json.Unmarshal(r.Value, &o); err != nil {
			return s.violation("output %s: %v", r.Value, err)
		}
		prev := v.last[o.Key]
		n := o.Sum - prev.sum
		switch {
		case o.Count != prev.count+1:
			return s.violation("key %s: output count %d follows %d (offset %d): an input counted twice or lost", o.Key, o.Count, prev.count, r.Offset)
		case n < 1 || n > int64(s.fed) || s.bad(n) || !s.keyOf(n, o.Key):
			return s.violation("key %s: output %+v adds %d to the sum, not an input of the key", o.Key, o, n)
		case v.counted[o.Key][n] || s.countedElsewhere(o.Key, n):
			return s.violation("key %s: output %+v counts input %d again", o.Key, o, n)
		}
		if err := s.checkOrder(o.Key, n, r.Offset); err != nil {
			return err
		}
		if v.counted[o.Key] == nil {
			v.counted[o.Key] = map[int64]bool{}
		}
		v.counted[o.Key][n] = true
		v.last[o.Key] = simAgg{o.Count, o.Sum}
	}
	for _, r := range tail(s.cfg.Sinks[0].DeadLetterTopic) {
		at, table := "", false
		for _, h := range r.Headers {
			if h.Key == sink.HeaderPartition || h.Key == sink.HeaderOffset {
				at += "/" + string(h.Value)
			}
			table = table || h.Key == sink.HeaderTopic && string(h.Value) == gsimTable
		}
		if table {
			if v.tableDead[at] {
				return s.violation("table record %s dead-lettered twice", at)
			}
			v.tableDead[at] = true
			continue
		}
		if v.dead[at] {
			return s.violation("input %s dead-lettered twice", at)
		}
		v.dead[at] = true
	}
	return nil
}

// checkOrder: a key's inputs of one input partition are counted in the
// partition's order (the inputs' numbers grow along each partition), as
// single mode counts them and Kafka Streams' repartition keeps them,
// whichever path they took (localshuffle.go). Not for joins as of event
// time, whose held records go on in event-time order.
func (s *gsim) checkOrder(key string, n, offset int64) error {
	if s.asOf {
		return nil
	}
	v := &s.view
	p := s.partOf[n]
	if v.lastN == nil {
		v.lastN = map[string]map[int]int64{}
	}
	if v.lastN[key] == nil {
		v.lastN[key] = map[int]int64{}
	}
	if last := v.lastN[key][p]; n < last {
		return s.violation("key %s: input %d of partition %d counted after input %d of the same partition (output offset %d): out of the partition's order", key, n, p, last, offset)
	}
	v.lastN[key][p] = n
	return nil
}

// bad reports whether input n cannot be decoded (or was not written).
func (s *gsim) bad(n int64) bool {
	for _, ins := range s.inputs {
		for _, in := range ins {
			if in.n == n {
				return in.bad
			}
		}
	}
	return true
}

// oracle is every key's {count, sum} of the inputs before offsets (by
// input partition; nil: all), and how many of them cannot be decoded.
func (s *gsim) oracle(offsets map[int32]int64) (map[string]simAgg, int) {
	want := map[string]simAgg{}
	bad := 0
	for p, ins := range s.inputs {
		if offsets != nil {
			ins = ins[:offsets[int32(p)]]
		}
		for off, in := range ins {
			if in.bad {
				bad++
				continue
			}
			if offsets != nil && s.cut != nil && s.cut.held[simTP{int32(p), int64(off)}] {
				continue // held at a savepoint's offsets: in no state yet
			}
			if offsets != nil && s.inFlight[in.n] {
				continue // in the join's repartition topic, unread
			}
			k := s.groupKey(in)
			a := want[k]
			want[k] = simAgg{a.count + 1, a.sum + in.n}
		}
	}
	return want, bad
}

// checkEnd: every input counted once, every bad one dead-lettered once.
func (s *gsim) checkEnd() error {
	for s.w.kafka.PendingMarkers() > 0 {
		s.w.kafka.DeliverMarker(0) // the brokers write them, in the end
	}
	if s.windowed {
		if err := s.checkWindows(true); err != nil {
			return err
		}
		return s.stalled
	}
	if s.joined {
		if err := s.checkPairs(true); err != nil {
			return err
		}
		return s.stalled
	}
	if s.asOf && !s.asOfKeyed {
		if err := s.checkAsOf(true); err != nil {
			return err
		}
		return s.stalled
	}
	if err := s.check(); err != nil {
		return err
	}
	want, bad := s.oracle(nil)
	if err := s.outputsEndAt(s.tierMoved(want), "the input"); err != nil {
		return err
	}
	if len(s.view.dead) != bad {
		return s.violation("%d dead letters committed for %d bad inputs", len(s.view.dead), bad)
	}
	if err := s.tableDeadAtEnd(); err != nil {
		return err
	}
	return s.stalled
}

// outputsEndAt: the last committed output of every key is want's.
func (s *gsim) outputsEndAt(want map[string]simAgg, what string) error {
	for k, a := range want {
		if s.view.last[k] != a {
			return s.violation("key %s: the outputs end at %+v, %s at %+v", k, s.view.last[k], what, a)
		}
	}
	return nil
}

// checkSavepoint: the savepoint at dir holds the state of exactly the
// inputs before its source offsets, which it returns.
func (s *gsim) checkSavepoint(dir string, j *Job) (map[string]simAgg, error) {
	r, err := savepoint.Open(dir)
	if err != nil {
		return nil, s.violation("opening savepoint %s: %v", dir, err)
	}
	offsets, joinAt := map[int32]int64{}, map[int32]int64{}
	for _, o := range r.Manifest().Offsets() {
		switch o.Topic {
		case "in":
			offsets[o.Partition] = o.Offset
		case s.joinTopic:
			joinAt[o.Partition] = o.Offset
		}
	}
	if s.joinTopic != "" {
		// The inputs in the join's repartition topic past the
		// savepoint's offsets of it were read from "in" but are in no
		// state yet: they are in flight, and the savepoint keeps them
		// there (the topic is the same for a job started from it).
		if err := s.inFlightAt(joinAt); err != nil {
			return nil, err
		}
		defer func() { s.inFlight = nil }()
	}
	var agg *operator.Aggregator
	for _, t := range j.plan.targets {
		if t.id == "sums" {
			agg = t.agg
		}
	}
	held := map[string]simAgg{}
	err = r.Scan("sums", state.Range{End: state.KeyGroup(s.cfg.Checkpoint.KeyGroups)}, func(e savepoint.Entry) error {
		st, err := agg.DecodeState(e.Value)
		if err != nil {
			return err
		}
		c, _ := st.Value("count")
		sum, _ := st.Value("sum")
		held[string(e.Key)] = simAgg{c.(int64), sum.(int64)}
		return nil
	})
	if err != nil {
		return nil, s.violation("reading savepoint %s: %v", dir, err)
	}
	want, _ := s.oracle(offsets)
	keys := map[string]bool{}
	for k := range max(s.keys, gsimKeys) {
		keys[s.key(int64(k))] = true
	}
	if s.asOfKeyed {
		// Keyed by the tier each input met: every key of either side.
		for k := range held {
			keys[k] = true
		}
		for k := range want {
			keys[k] = true
		}
		if err := s.heldAsCut(r); err != nil {
			return nil, err
		}
	}
	for key := range keys {
		if held[key] != want[key] {
			return nil, s.violation("savepoint %s: key %s holds %+v, but its offsets %v cover %+v", dir, key, held[key], offsets, want[key])
		}
	}
	s.log("savepoint %s holds exactly the inputs before %v", dir, offsets)
	return want, nil
}

// gsimStop is the stop with a savepoint asked of the last process.
type gsimStop struct {
	p    *gproc
	dir  string
	done bool
	err  error
}

// askStop hands the stop asked of p to its running attempt (every
// attempt's loop sees Job.stopping closed) once the attempt owns every
// partition. (With others running, the loop would take a savepoint of
// the group through a client of its own, which runStop does not ask.)
func (s *gsim) askStop(p *gproc) error {
	if st := s.stop; st == nil || st.p != p || p.att == nil || p.att.s == nil || !p.att.s.g.loop.group.soleOwner {
		return nil
	}
	p.j.stopSavepoint = s.stop.dir
	s.log("%s: its attempt stops with a savepoint", p.id)
	return p.att.s.g.loop.onStop()
}

// stopped: p's attempt ended after its final checkpoint (errStopped);
// the process leaves the group.
func (s *gsim) stopped(p *gproc, err error) error {
	at := p.att
	p.att = nil
	_ = at.m.finish(at.a, err)
	if s.stop == nil || s.stop.p != p {
		return s.violation("%s stopped, but no stop was asked of it: %v", p.id, err)
	}
	var se *stoppedError
	errors.As(err, &se)
	s.stop.done, s.stop.err = true, se.savepoint
	s.log("%s stopped after its final checkpoint (savepoint: %v)", p.id, se.savepoint)
	_ = s.w.kafka.LeaveGroup(gsimJob, p.member)
	p.in, p.gone = false, true
	return nil
}

// runStop: input arrives and processes fail; then every process but the
// first is shut down (a live one's attempt ends and it leaves the group; a
// dead or paused one is dropped later), and the first is asked to stop
// with a savepoint while input goes on arriving. Its savepoint must hold
// exactly the inputs its offsets cover, and the outputs end there.
func (s *gsim) runStop(inputs, faultSteps int) error {
	s.want = inputs
	if s.asOf {
		s.want = 1 << 30 // the table never closes: records are held at the stop
	}
	if err := s.faulty(faultSteps); err != nil {
		return err
	}
	s.want, s.burst = 1<<30, 5
	for _, o := range s.procs[1:] {
		if o.up && !o.paused {
			_ = s.as(o, func() error { s.revoke(o, "it stops"); return nil })
		}
		if o.up && !o.paused && o.in {
			s.yieldAll(o.id + " leaves")
			_ = s.w.kafka.LeaveGroup(gsimJob, o.member)
			o.in = false
			s.rebalance()
		}
		s.log("%s is gone", o.id)
		o.up, o.paused, o.att, o.gone, o.since = false, false, nil, true, s.clock
	}
	p := s.procs[0]
	askAt := s.steps + s.w.rng.IntN(300)
	for s.stop == nil || !s.stop.done {
		if s.steps > askAt+20_000 {
			return s.violation("the stop with a savepoint did not finish (%s)", s.describe())
		}
		if s.stop == nil && s.steps >= askAt && p.up && p.in {
			s.stop = &gsimStop{p: p, dir: filepath.Join(s.dir, "stop")}
			s.log("%s is asked to stop with a savepoint", p.id)
			if err := s.as(p, func() error { return s.askStop(p) }); err != nil {
				return s.violation("asking for the stop: %v", err)
			}
		}
		if s.stop != nil && s.asOf && !s.aview.closed && s.w.rng.IntN(20) == 0 {
			// The table moves on while the stop drains (its changes
			// never close it here): records held pass its event time.
			s.asOfTable.write(0)
		}
		if err := s.next([]*gproc{p}, 1); err != nil {
			return err
		}
	}
	if s.stop.err != nil {
		return s.violation("the stop's savepoint failed: %v", s.stop.err)
	}
	// What a killed process left open, with nobody there to fence it,
	// ends at its timeout; then the markers are written.
	s.w.kafka.Advance(s.cfg.Kafka.TransactionTimeout + time.Second)
	for s.w.kafka.PendingMarkers() > 0 {
		s.w.kafka.DeliverMarker(0)
	}
	var err error
	if s.asOf {
		err = s.cutAt(s.stop.dir)
	}
	var want map[string]simAgg
	if err == nil {
		want, err = s.checkSavepoint(s.stop.dir, p.j)
	}
	if err == nil {
		err = s.check()
	}
	if err == nil {
		err = s.outputsEndAt(want, "the savepoint")
	}
	if err == nil {
		err = s.stalled
	}
	return err
}

// gsimLive is runLive's savepoint of the running group.
type gsimLive struct {
	asker  *gproc
	dir    string
	saved  bool
	failed string
}

// askLive: a live process asks for a savepoint of the group
// (Job.Savepoint in group mode): it writes the pause record. Where its
// export waits, the world goes on meanwhile (its own epochs' offsets are
// waited for too: not a stall), and reading the state takes a while,
// short or longer than the pause.
func (s *gsim) askLive() error {
	var up []*gproc
	for _, p := range s.procs {
		if p.up && !p.paused {
			up = append(up, p)
		}
	}
	if len(up) == 0 {
		return nil
	}
	p := up[s.w.rng.IntN(len(up))]
	s.live = &gsimLive{asker: p, dir: filepath.Join(s.dir, "live")}
	life := p.life
	return s.as(p, func() error {
		c := s.cluster(p)
		c.unstable = nil
		c.wait = func(ready func() bool) bool {
			for range 2000 {
				if ready() {
					break
				}
				s.meanwhile(p, life, 1)
			}
			return ready()
		}
		gp, err := p.j.pauseGroup(context.Background(), c, s.live.dir)
		if err != nil {
			s.live.failed = err.Error()
			return nil
		}
		p.pause = gp
		s.log("%s asks for a savepoint of the group (pause %s)", p.id, gp.id)
		p.j.beforeExportState = func() {
			n := s.w.rng.IntN(50)
			if s.w.rng.IntN(2) == 0 {
				n = 2000 + s.w.rng.IntN(2000)
			}
			s.meanwhile(p, life, n)
		}
		return nil
	})
}

// meanwhile runs n steps of the world while p, in its life life, waits
// in a call; the call ends if p died meanwhile.
func (s *gsim) meanwhile(p *gproc, life, n int) {
	for range n {
		if err := s.next(s.procs, 1); err != nil {
			s.broken = err
			break
		}
	}
	if p.life != life {
		panic(simCrash{at: "while waiting"})
	}
}

// liveStep is the asker's step of its savepoint (groupSavepoint): look
// whether every member acked and the topic drained, then export.
func (s *gsim) liveStep(p *gproc) error {
	l, gp := s.live, p.pause
	ready, err := gp.ready(context.Background())
	if err == nil && !ready {
		return nil
	}
	if err == nil {
		p.exporting = true
		_, err = gp.export(context.Background())
		p.exporting = false
		if errors.Is(err, errSimWait) {
			return nil
		}
	}
	p.pause = nil
	gp.resume()
	if err != nil {
		l.failed = err.Error()
		s.log("%s: the savepoint fails: %v", p.id, err)
		return nil
	}
	if s.asOf {
		// Before anything else happens: what the group committed then
		// is the savepoint's cut.
		if err := s.cutAt(l.dir); err != nil {
			return err
		}
	}
	l.saved = true
	s.log("%s wrote the savepoint", p.id)
	if s.windowed {
		return s.checkWindowSavepoint(l.dir, p.j)
	}
	if s.joined {
		return s.checkIntervalJoinSavepoint(l.dir)
	}
	if s.asOf && !s.asOfKeyed {
		return nil // judged by the continuation from it (cutAt)
	}
	_, err = s.checkSavepoint(l.dir, p.j)
	return err
}

// runLive: a process asks for a savepoint of the running group, half the
// time among the faults, half the time after them, while input arrives.
// A savepoint written must hold exactly the inputs its offsets cover, and
// the outputs stay exact.
func (s *gsim) runLive(inputs, faultSteps int) error {
	s.want = inputs
	askAt := s.w.rng.IntN(2 * faultSteps)
	for s.steps < 2*faultSteps {
		if s.steps >= faultSteps {
			s.faults, s.w.crashP = false, 0
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
	return s.finish()
}

func playFaults(s *gsim) error {
	s.want = 200
	if err := s.faulty(6000); err != nil {
		return err
	}
	return s.finish()
}

func playStop(s *gsim) error { return s.runStop(100, 3000) }
func playLive(s *gsim) error { return s.runLive(300, 4000) }

// gsimSeeds is how many seeds a schedule runs: a fifth with -short, few
// under the race detector; -sim.seed runs one, -sim.seeds that many.
func gsimSeeds(full int) (first uint64, n int) {
	switch {
	case *simSeed != 0:
		return *simSeed, 1
	case *simSeeds != 0:
		return 1, *simSeeds
	case raceEnabled:
		return 1, max(full/20, 3)
	case testing.Short():
		return 1, full / 5
	}
	return 1, full
}

// gsimPlay runs one seed of a schedule (printing its trace when it is the
// one -sim.seed asks for).
func gsimPlay(t *testing.T, seed uint64, m plantedBug, play func(s *gsim) error, kind gsimKind) (*gsim, error) {
	s := newGsim(t, seed, m, filepath.Join(simTempDir(t), strconv.FormatUint(seed, 10)), kind)
	err := play(s)
	if *simSeed != 0 {
		for _, line := range s.w.trace {
			t.Log(line)
		}
	}
	return s, err
}

// TestSimulationGroupMode: seeded schedules of three processes with
// crashes anywhere, pauses past the session timeout, zombies, static
// restarts, rebalances, failing fences and marker lag; a stop with a
// savepoint of the last process; a savepoint of the running group. Every
// one ends with exactly one failure-free run's outputs.
func TestSimulationGroupMode(t *testing.T) {
	for _, c := range []struct {
		name string
		play func(*gsim) error
		full int
		kind gsimKind
	}{{"faults", playFaults, 150, gsimSums}, {"stop_with_savepoint", playStop, 150, gsimSums}, {"live_savepoint", playLive, 150, gsimSums},
		{"table", playTable, 150, gsimSums}, {"table_live_savepoint", playTableLive, 100, gsimSums},
		{"table_repartitioned", playTableRepartitioned, 60, gsimSums}, {"table_repartitioned_live_savepoint", playTableRepartitionedLive, 20, gsimSums},
		{"table_repartitioned_stop_with_savepoint", playTableRepartitionedStop, 20, gsimSums},
		{"windows", playFaults, 150, gsimWindows}, {"hopping_windows", playFaults, 100, gsimHopping},
		{"session_windows", playFaults, 100, gsimSessions}, {"windows_live_savepoint", playLive, 100, gsimWindows},
		{"session_windows_live_savepoint", playLive, 60, gsimSessions},
		{"copartitioned", playFaults, 150, gsimCopartitioned}, {"copartitioned_stop_with_savepoint", playStop, 100, gsimCopartitioned},
		{"copartitioned_live_savepoint", playLive, 100, gsimCopartitioned},
		{"copartitioned_windows", playFaults, 150, gsimCoWindows}, {"copartitioned_hopping_windows", playFaults, 60, gsimCoHopping},
		{"copartitioned_session_windows", playFaults, 100, gsimCoSessions},
		{"copartitioned_windows_live_savepoint", playLive, 60, gsimCoWindows},
		{"interval_join", playFaults, 100, gsimIntervalJoin}, {"interval_join_live_savepoint", playLive, 50, gsimIntervalJoin},
		{"asof_join", playFaults, 100, gsimAsOfJoin}, {"asof_windows", playFaults, 60, gsimAsOfWindows}, {"asof_sums", playFaults, 60, gsimAsOfSums},
		{"asof_join_savepoint_continued", playAsOfContinued, 60, gsimAsOfJoin},
		{"asof_partitioned", playFaults, 60, gsimAsOfPartitioned}, {"asof_partitioned_savepoint_continued", playAsOfContinued, 40, gsimAsOfPartitioned},
		{"asof_sums_live_savepoint", playLive, 40, gsimAsOfSums}, {"asof_sums_stop_with_savepoint", playStop, 40, gsimAsOfSums},
		{"asof_copartitioned", playFaults, 60, gsimAsOfCoWindows}, {"asof_copartitioned_live_savepoint", playLive, 40, gsimAsOfCoWindows},
		{"asof_repartitioned", playFaults, 40, gsimAsOfRepartitioned}, {"asof_repartitioned_restarts", playRestarts, 40, gsimAsOfRepartitioned},
		{"asof_repartitioned_live_savepoint", playLive, 30, gsimAsOfRepartitioned}} {
		t.Run(c.name, func(t *testing.T) {
			first, n := gsimSeeds(c.full)
			counts := map[string]int{}
			for seed := first; seed < first+uint64(n); seed++ {
				s, err := gsimPlay(t, seed, noPlantedBug, c.play, c.kind)
				if err != nil {
					t.Fatalf("seed %d (%d steps): %v\nreplay: go test ./engine -run 'TestSimulationGroupMode/%s' -sim.seed=%d -v\n%s",
						seed, s.steps, err, c.name, seed, strings.Join(lastLines(s.w.trace, 60), "\n"))
				}
				for k, v := range s.counts {
					counts[k] += v
				}
				if l := s.live; l != nil && l.saved {
					counts["group savepoints written"]++
				} else if l != nil {
					counts["group savepoints failed"]++
				}
			}
			t.Logf("%d schedules: %v", n, counts)
			if err := asOfExercised(c.kind, n, counts); err != nil {
				t.Fatal(err)
			}
			if err := localShuffleExercised(c.kind, n, counts); err != nil {
				t.Fatal(err)
			}
			if strings.Contains(c.name, "live_savepoint") && n >= 10 && counts["group savepoints written"] == 0 {
				// About half of them fail on a pause that runs out or an
				// asker that dies; none written is a savepoint that cannot
				// be taken (a co-partitioned job's once looked for its
				// repartition topic).
				t.Fatalf("no savepoint of the running group written in %d schedules (%d failed)", n, counts["group savepoints failed"])
			}
			if strings.HasPrefix(c.name, "table") && !strings.Contains(c.name, "repartitioned") && n >= 3 && counts["attempts that kept their tables"] == 0 {
				// (A partitioned table is read again at every attempt.)
				t.Fatalf("%d schedules: no attempt kept its tables from the last generation: the simulation does not exercise tablekept.go", n)
			}
			if strings.HasSuffix(c.name, "_savepoint_continued") && n >= 3 && counts["continuations from held records"] == 0 {
				t.Fatalf("%d schedules: no continuation started from a savepoint that held records: the simulation does not exercise them", n)
			}
		})
	}
}

// TestSimulationGroupModeIsDeterministic: a seed replays exactly.
func TestSimulationGroupModeIsDeterministic(t *testing.T) {
	type run struct {
		kind gsimKind
		play func(*gsim) error
	}
	runs := []run{{gsimAsOfJoin, playAsOfContinued}}
	for _, kind := range []gsimKind{gsimSums, gsimWindows, gsimSessions, gsimCopartitioned, gsimCoWindows, gsimIntervalJoin, gsimAsOfJoin, gsimAsOfSums, gsimAsOfPartitioned, gsimAsOfCoWindows} {
		runs = append(runs, run{kind, playFaults})
	}
	for _, r := range runs {
		kind := r.kind
		for seed := uint64(1); seed <= 3; seed++ {
			var hashes [2]uint64
			for i := range hashes {
				s, err := gsimPlay(t, seed, noPlantedBug, r.play, kind)
				if err != nil {
					t.Fatalf("seed %d (job %d): %v", seed, kind, err)
				}
				hashes[i] = s.w.hash
			}
			if hashes[0] != hashes[1] {
				t.Fatalf("seed %d (job %d) ran two different schedules (%x, %x)", seed, kind, hashes[0], hashes[1])
			}
		}
	}
}

// TestSimulationGroupModeFindsBugs puts known mistakes into group mode's
// production code (plantedbug.go) and requires the schedules to catch each
// within a bounded number of seeds.
func TestSimulationGroupModeFindsBugs(t *testing.T) {
	for _, c := range []struct {
		name       string
		plantedBug plantedBug
		play       func(*gsim) error
		seeds      uint64
		kind       gsimKind
	}{
		{"offsets committed without the member's generation", plantedMemberlessCommit, playFaults, 100, gsimSums},
		{"a restart on an assignment restores its first offsets", plantedOffsetsAtAssignment, playFaults, 100, gsimSums},
		// 16 to 19 schedules in 1000 find it (markers must reach a
		// state partition late, just as its new owner restores it): 400
		// leave a change of schedule little chance to miss it.
		{"state restored before its markers", plantedRestoreBeforeMarkers, playFaults, 400, gsimSums},
		{"a stop drains without pausing the sources", plantedStopWithoutPause, playStop, 100, gsimSums},
		{"a live savepoint's export not rechecked", plantedExportWithoutRecheck, playLive, 100, gsimSums},
		{"a live savepoint's export not rechecked, interval join", plantedExportWithoutRecheck, playLive, 100, gsimIntervalJoin},
		{"windows fire at the watermark of the process's own sources", plantedWatermarkOfOwnSources, playFaults, 100, gsimWindows},
		{"a moved partition's clock starts over", plantedOwnClocksOnly, playFaults, 100, gsimWindows},
		{"session windows fire at the watermark of the process's own sources", plantedWatermarkOfOwnSources, playFaults, 100, gsimSessions},
		{"a moved partition's clock starts over, hopping windows", plantedOwnClocksOnly, playFaults, 100, gsimHopping},
		{"state kept across a generation in between", plantedKeptAcrossGenerations, playFaults, 100, gsimSums},
		{"state kept across a generation in between, windows", plantedKeptAcrossGenerations, playFaults, 100, gsimWindows},
		{"kept state holds the partitions that moved away", plantedKeptMovedAway, playFaults, 100, gsimWindows},
		{"kept state holds the partitions that moved away, sessions", plantedKeptMovedAway, playFaults, 100, gsimSessions},
		{"held records stay with the member, not the partition", plantedHeldStayBehind, playFaults, 100, gsimAsOfJoin},
		{"the watermark passes a held record", plantedHeldPassedByWatermark, playFaults, 100, gsimAsOfWindows},
		{"repartition bundles sent after the barrier of their inputs", plantedBundleAfterBarrier, playFaults, 100, gsimSums},
		{"the local shuffle taken over records left in the repartition topic", plantedLocalShuffleOverBacklog, playFaults, 100, gsimSums},
		{"the watermark passes a held record, co-partitioned", plantedCoHeldPassedByWatermark, playFaults, 100, gsimAsOfCoWindows},
		{"co-partitioned windows resume at the member's last watermark", plantedResumeOwnWatermark, playFaults, 100, gsimCoWindows},
		{"a moved partition's clock starts over, co-partitioned windows", plantedOwnClocksOnly, playFaults, 100, gsimCoWindows},
		{"a kept table not read on to its end", plantedTableNotReadOn, playTable, 100, gsimSums},
		{"a table partitioned like the stream, not the join's repartition topic", plantedJoinTableFollowsStream, playTableRepartitioned, 100, gsimSums},
		{"a group savepoint without its held records", plantedGroupSavepointDropsHeld, playAsOfContinued, 100, gsimAsOfJoin},
		{"a start from a savepoint imports no held records", plantedImportDropsHeld, playAsOfContinued, 100, gsimAsOfJoin},
		{"held records released while a stop with a savepoint drains", plantedReleaseWhilePaused, playStop, 100, gsimAsOfSums},
		{"the import looked for before the checkpoint topic settled", plantedImportedUnsettled, playAsOfContinued, 300, gsimAsOfJoin},
		{"a join's repartition topic timed by its own records", plantedJoinTimeFromRecords, playFaults, 100, gsimAsOfRepartitioned},
		{"what a join's repartition partition knew not kept", plantedJoinTimeNotKept, playRestarts, 100, gsimAsOfRepartitioned},
	} {
		t.Run(c.name, func(t *testing.T) {
			for seed := uint64(1); seed <= c.seeds; seed++ {
				if _, err := gsimPlay(t, seed, c.plantedBug, c.play, c.kind); err != nil {
					t.Logf("seed %d found it: %v", seed, err)
					return
				}
			}
			t.Fatalf("no schedule of %d found it", c.seeds)
		})
	}
}

func lastLines(lines []string, n int) []string {
	if len(lines) <= n {
		return lines
	}
	return lines[len(lines)-n:]
}

// keyInput keys input in (rec, about to be appended) by its group key and
// puts it in that key's partition, as Kafka's default partitioner would;
// one in 40 gets another key, or lands in another partition, and must
// become a dead letter (in.bad), counted nowhere. Its event time moves
// its partition's clock all the same (in.misplaced: it is placed in
// event time before its key is checked), unless it does not decode.
func (s *gsim) keyInput(rec *memkafka.Record, in *simInput) {
	key := s.key(in.n)
	rec.Key = []byte(key)
	rec.Partition = kafkaPartition(rec.Key, gsimInParts)
	switch s.w.rng.IntN(80) {
	case 0:
		rec.Key = []byte("x" + key)
		rec.Partition = kafkaPartition(rec.Key, gsimInParts)
		in.misplaced, in.bad = !in.bad, true
	case 1:
		rec.Partition = (rec.Partition + 1) % gsimInParts
		in.misplaced, in.bad = !in.bad, true
	}
}
