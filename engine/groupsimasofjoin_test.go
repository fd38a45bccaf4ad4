package engine

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/eoflow/pipeline/checkpoint"
	"github.com/eoflow/pipeline/config"
	"github.com/eoflow/pipeline/internal/testkit/memkafka"
	"github.com/eoflow/pipeline/operator"
	"github.com/eoflow/pipeline/sink"
)

// The group simulation's join as of event time: the single-mode
// simulation's asof-join job (simasofjoin_test.go) run by three
// processes in group mode. Each number is looked up in the broadcast
// table "tiers" as of its event time, on the source side of its
// partition, held there until the table's event time has passed it;
// the held records of a source partition move with it when the group
// moves it (groupheld.go). The table changes while the numbers arrive
// (asOfTableModel.write, about one change per eight inputs) and closes
// once the faults are over, so that every number is released in the end.
// Each process's table task is stepped, so the table's event time moves
// within an attempt too.
//
// The oracle is the single-mode one, from the two topics alone
// (asOfTableModel.tier): every committed output carries the tier its
// number's key had as of its event time, no number is committed twice,
// and none that cannot be decoded; at the end, with nothing held at the
// group's committed offsets, every good number is committed once and
// every bad one is one dead letter.

// gsimAsOfScale is the scale section the single-mode job lacks.
const gsimAsOfScale = `scale:
  mode: ${SCALE_MODE}
  partitions: ${SCALE_PARTITIONS}
  session_timeout: ${SESSION_TIMEOUT}
`

// asOfJoinConfig is the asof-join job in group mode; its table is
// created, with its first versions, before any process starts.
func (s *gsim) asOfJoinConfig(env map[string]string) string {
	env["MAX_OOO"] = fmt.Sprintf("%dms", simOutOfOrder)
	return s.withAsOfTable(asOfJoinYAML + gsimAsOfScale)
}

// withAsOfTable is config, a job with a join as of event time of the
// table "tiers", whose topic it creates with its first versions.
func (s *gsim) withAsOfTable(config string) string {
	s.asOf = true
	s.asOfTable = asOfTableModel{w: s.w}
	if s.asOfPartitioned {
		s.asOfTable.partitions = gsimInParts
	}
	if err := s.asOfTable.create(s.began.UnixMilli()); err != nil {
		s.t.Fatal(err)
	}
	return config
}

// gsimAsOfView is what the as-of oracle has read of the committed
// outputs.
type gsimAsOfView struct {
	next   map[memkafka.TP]int64
	joined map[int64]int   // number -> times committed
	dead   map[string]bool // partition/offset of each dead letter
	writes int             // the table's changes so far
	closed bool            // the table is closed
	held   map[string]int  // records held, by source partition
	owner  map[int32]string
}

func (v *gsimAsOfView) tail(s *gsim, topic string) []memkafka.Record {
	if v.next == nil {
		v.next = map[memkafka.TP]int64{}
	}
	tp := memkafka.TP{Topic: topic}
	recs, next, err := s.w.kafka.ReadCommitted(tp, v.next[tp], 1<<20)
	if err != nil {
		panic(err)
	}
	v.next[tp] = next
	return recs
}

// maybeWriteAsOf changes the table about once per eight inputs fed, and
// closes it once every input is fed.
func (s *gsim) maybeWriteAsOf() {
	v := &s.aview
	switch {
	case !s.asOf || v.closed:
	case s.fed >= s.want:
		v.closed = s.asOfTable.write(asOfTableWrites)
	case v.writes < asOfTableWrites-1 && s.w.rng.IntN(8) == 0:
		v.writes++
		s.asOfTable.write(v.writes)
	}
}

// checkAsOf reads what was committed since its last call and judges it
// by the oracle; at the end, the whole of it.
func (s *gsim) checkAsOf(end bool) error {
	v := &s.aview
	if v.joined == nil {
		v.joined, v.dead = map[int64]int{}, map[string]bool{}
	}
	for _, r := range v.tail(s, "out") {
		var o struct {
			N    int64  `json:"n"`
			TS   int64  `json:"ts"`
			Tier string `json:"tier"`
		}
		if err := json.Unmarshal(r.Value, &o); err != nil {
			return s.violation("output %s: %v", r.Value, err)
		}
		if s.bad(o.N) {
			return s.violation("output %s: not a good input", r.Value)
		}
		if want := s.asOfTable.tier(asOfJoinSimJob.keyOf(o.N), o.TS); o.Tier != want {
			return s.violation("output %s: tier %q, but the table's topic says %q as of %d", r.Value, o.Tier, want, o.TS)
		}
		if v.joined[o.N]++; v.joined[o.N] > 1 {
			return s.violation("input %d committed %d times", o.N, v.joined[o.N])
		}
		if p, off, ok := s.inputAt(o.N); !ok || !s.continued(p, off) {
			return s.violation("output %s: input in/%d@%d is below the savepoint's offsets and was not held there", r.Value, p, off)
		}
	}
	for _, r := range v.tail(s, s.cfg.Sinks[0].DeadLetterTopic) {
		at := ""
		for _, h := range r.Headers {
			if h.Key == sink.HeaderPartition || h.Key == sink.HeaderOffset {
				at += "/" + string(h.Value)
			}
		}
		if v.dead[at] {
			return s.violation("input %s dead-lettered twice", at)
		}
		if p, off, ok := deadAt(at); !ok || !s.continued(p, off) {
			return s.violation("input %s dead-lettered below the savepoint's offsets", at)
		}
		v.dead[at] = true
	}
	held, err := s.asOfHeld()
	if err != nil {
		return err
	}
	if !end {
		return nil
	}
	if held > 0 {
		return s.violation("the table is closed and the group drained, but the checkpoint topic holds %d records", held)
	}
	bad := 0
	for p, ins := range s.inputs {
		for off, in := range ins {
			want := 1
			if !s.continued(int32(p), int64(off)) {
				want = 0 // the run before the savepoint committed it
			}
			switch {
			case in.bad:
				bad += want
			case v.joined[in.n] != want:
				return s.violation("input %d (in/%d@%d, event time %d) committed %d times, want %d", in.n, p, off, in.ts, v.joined[in.n], want)
			}
		}
	}
	if len(v.dead) != bad {
		return s.violation("%d dead letters committed for %d bad inputs", len(v.dead), bad)
	}
	return nil
}

// asOfHeld reads the held records committed to the checkpoint topic
// since its last call (groupheld.go) and reports how many the newest
// record of each source partition holds, over every partition. (The
// partition is the key's last two parts: a planted bug may put more
// before them.)
func (s *gsim) asOfHeld() (int, error) {
	v := &s.aview
	if v.held == nil {
		v.held = map[string]int{}
	}
	for _, r := range v.tail(s, checkpoint.TopicName(gsimJob)) {
		rest, ok := strings.CutPrefix(string(r.Key), heldPrefix(gsimJob))
		if !ok {
			continue
		}
		parts := strings.Split(rest, "/")
		if len(parts) < 2 {
			return 0, s.violation("held records under key %s: no partition", r.Key)
		}
		tp := strings.Join(parts[len(parts)-2:], "/")
		if r.Value == nil {
			delete(v.held, tp)
			continue
		}
		_, h, err := decodeHeldValue(r.Value)
		if err != nil {
			return 0, s.violation("%s: %v", r.Key, err)
		}
		v.held[tp] = h.Len()
	}
	n := 0
	for _, l := range v.held {
		n += l
	}
	s.counts["most records held at a commit"] = max(s.counts["most records held at a commit"], n)
	return n, nil
}

// restoredAsOf notes, for the log and TestSimulationGroupModeAsOfJoin,
// the held records attempt a of p restored that another process held
// before (the partition moved with them).
func (s *gsim) restoredAsOf(p *gproc, a *attempt) error {
	v := &s.aview
	if v.owner == nil {
		v.owner = map[int32]string{}
	}
	if a.groupHeld != nil && len(a.groupHeld.Held) > 0 {
		h, err := operator.DecodeHold(a.groupHeld.Held)
		if err != nil {
			return s.violation("%s: restored held records: %v", p.id, err)
		}
		for _, r := range h.Records() {
			if o := v.owner[r.Partition]; o != "" && o != p.id {
				s.counts["held records restored by a new owner"]++
			}
		}
	}
	for _, tp := range p.asg.tps {
		if tp.Topic == "in" {
			v.owner[tp.Partition] = p.id
		}
	}
	return nil
}

// asOfExercised: the as-of runs of a TestSimulationGroupMode subtest are
// not vacuous (n seeds of job kind, their counts added up): commits held
// records at their offsets, and attempts restored records another
// process held (the partition moved with them). The oracles judged them:
// released once, each with the tier as of its event time, no window
// fired before it.
func asOfExercised(kind gsimKind, n int, counts map[string]int) error {
	if kind != gsimAsOfJoin && kind != gsimAsOfWindows && kind != gsimAsOfSums && kind != gsimAsOfPartitioned && kind != gsimAsOfCoWindows && kind != gsimAsOfRepartitioned || n < 3 {
		return nil
	}
	if counts["most records held at a commit"] == 0 || counts["held records restored by a new owner"] == 0 {
		return fmt.Errorf("%d schedules: no commit held records (%d), or no attempt restored records another process held (%d): the simulation does not exercise them",
			n, counts["most records held at a commit"], counts["held records restored by a new owner"])
	}
	return nil
}

// asOfSumsConfig is parity-sum behind the join as of event time: each
// number is keyed by the tier it met (key "k" + n mod 4, as of its event
// time), so the keyed sums' oracle holds with groupKey. The join runs on
// the source side, before the repartition topic: what crosses it is the
// tier the held record met at its release.
func (s *gsim) asOfSumsConfig(env map[string]string) string {
	s.asOfKeyed = true
	env["MAX_OOO"] = fmt.Sprintf("%dms", simOutOfOrder)
	yaml := strings.Replace(paritySumYAML, "    start: earliest\n", "    start: earliest\n    event_time: {timestamp: ts, max_out_of_orderness: ${MAX_OOO}}\n", 1)
	yaml = strings.Replace(yaml, "steps:\n", `tables:
  - id: tiers
    topic: tiers
steps:
  - id: enrich
    join: {table: tiers, key: '"k" + string(n % 4)', as: t, how: left, time: event_time, history: 1h}
`, 1)
	yaml = strings.Replace(yaml, `'n % 2 == 0 ? "even" : "odd"'`, `'t == nil ? "none" : t.tier'`, 1)
	return s.withAsOfTable(yaml)
}

// groupKey is input in's group key: its tier as of its event time for
// the as-of sums, else gsimKey.
func (s *gsim) groupKey(in simInput) string {
	if s.asOfKeyed {
		return s.asOfTable.tier(asOfJoinSimJob.keyOf(in.n), in.ts)
	}
	return s.key(in.n)
}

// A group whose join is no longer as of event time releases what its
// partitions hold: the table never changes, so every good input is held
// while the faults last; then every process restarts with the join in
// processing time, and each input is committed once, with the tier the
// table held all along (the oracle's, unchanged), and nothing is left
// held at the committed offsets.
func TestSimulationGroupModeAsOfJoinRemoved(t *testing.T) {
	for seed := uint64(1); seed <= 5; seed++ {
		s := newGsim(t, seed, noPlantedBug, filepath.Join(simTempDir(t), strconv.FormatUint(seed, 10)), gsimAsOfJoin)
		s.aview.closed = true // no table writes: nothing is released
		s.want = 100
		for s.fed < s.want || s.steps < 3000 {
			if err := s.next(s.procs, 1); err != nil {
				t.Fatalf("seed %d, held: %v", seed, err)
			}
		}
		held, err := s.asOfHeld()
		if err != nil || held == 0 || len(s.aview.joined) != 0 {
			t.Fatalf("seed %d: %d records held, %d committed (%v): want every input held", seed, held, len(s.aview.joined), err)
		}
		cfg := *s.cfg
		cfg.Steps = slices.Clone(cfg.Steps)
		join := *cfg.Steps[0].Join
		join.Time, join.History = "", 0
		cfg.Steps[0].Join = &join
		s.cfg = &cfg
		for _, p := range s.procs {
			if p.up {
				s.kill(p) // restarted with the new configuration
			}
		}
		s.log("every process restarts with the join in processing time")
		if err := s.finish(); err != nil {
			t.Fatalf("seed %d, released: %v\n%s", seed, err, strings.Join(lastLines(s.w.trace, 40), "\n"))
		}
	}
}

// asOfPartitionedConfig is the asof-join job with its table partitioned
// (tables[].mode: partitioned): each process reads the table partitions
// of its input partitions, and looks each input up by its record key,
// its join key, which the input's partition is placed by
// (inputRecord), as the table's records are.
func (s *gsim) asOfPartitionedConfig(env map[string]string) string {
	s.asOfPartitioned = true
	env["MAX_OOO"] = fmt.Sprintf("%dms", simOutOfOrder)
	yaml := strings.Replace(asOfJoinYAML+gsimAsOfScale, "    topic: tiers\n", "    topic: tiers\n    mode: partitioned\n", 1)
	yaml = strings.Replace(yaml, `key: '"k" + string(n % 4)'`, "key: _key", 1)
	return s.withAsOfTable(yaml)
}

// asOfRepartitionedConfig is asof-windows with the table partitioned:
// the join looks up '"k" + string(n % 4)', which the input is not
// partitioned by, so the job repartitions the stream through s.joinTopic
// (created here, with the table's partition count, as the job does).
func (s *gsim) asOfRepartitionedConfig() string {
	yaml := strings.Replace(asOfWindowsJob.config, "    topic: tiers\n", "    topic: tiers\n    mode: partitioned\n", 1)
	yaml = s.withAsOfTable(yaml)
	s.joinTopic, s.tableParts = config.JoinRepartitionTopic(gsimJob, "enrich"), int(s.asOfTable.parts())
	if err := s.w.kafka.CreateTopic(s.joinTopic, s.tableParts); err != nil {
		s.t.Fatal(err)
	}
	return yaml
}

// playRestarts runs the faults, then, while the rest of the input
// arrives and after, restarts one process now and then alone: a static
// member back before the group drops it, so no other member's attempt
// starts over (nobody else tells the times of its partitions again).
func playRestarts(s *gsim) error {
	s.want = 200
	if err := s.faulty(6000); err != nil {
		return err
	}
	for range 6 {
		for range 250 {
			if err := s.next(s.procs, 2); err != nil {
				return err
			}
		}
		if p := s.procs[s.w.rng.IntN(len(s.procs))]; p.up && !p.gone {
			s.kill(p)
			if err := s.start(p); err != nil {
				return err
			}
		}
	}
	return s.finish()
}

// inputRecord is input in, to be appended to input partition p; keyed by
// its join key, and in the partition of that key, when the table is
// partitioned.
func (s *gsim) inputRecord(p int32, in simInput) memkafka.Record {
	rec := memkafka.Record{Topic: "in", Partition: p, Value: simJob{}.inputValue(in), Timestamp: s.clock}
	if s.asOfPartitioned {
		rec.Key = []byte(asOfJoinSimJob.keyOf(in.n))
		rec.Partition = s.w.toModel(fromModel(rec)).Partition
	}
	return rec
}
