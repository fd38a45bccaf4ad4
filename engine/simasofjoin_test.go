package engine

import (
	"cmp"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eoflow/pipeline/checkpoint"
	"github.com/eoflow/pipeline/config"
	"github.com/eoflow/pipeline/internal/testkit/memkafka"
	"github.com/eoflow/pipeline/operator"
)

// The simulation's join as of event time: each number (with an event
// time, as parity-windows' inputs have) is looked up in the table "tiers"
// by the key "k" + n mod 4, as of its event time, and written with the
// tier it met. While the job runs, the table gets new versions of k0..k2
// (tombstones among them, and a transaction that aborts), stamped with
// event times that grow (now and then two at one time: the later
// replaces the earlier); k3 is never written. The last write stamps each
// table partition far ahead, so that every number is released.
//
// The oracle computes, from the two topics alone, the tier each number
// must meet: the value of its key with the largest timestamp at or before
// the number's event time (the later record on a tie), none for a
// tombstone or no value. After every commit, with the newest checkpoint's
// input prefix and the records it holds (checkpoint.Record.Held): every
// good number of the prefix is either committed exactly once with that
// tier, or held and not committed; nothing else is committed; every bad
// number of the prefix is one dead letter. The runs take savepoints, and a
// continuation starts from one (with another worker count) on a cluster
// holding the same inputs and table versions: the records held at the
// savepoint's checkpoint (as that checkpoint's record says, not the
// savepoint) are what the first run did not commit below the savepoint's
// offsets, so the continuation must commit each of them once, and nothing
// else below those offsets.
const asOfJoinYAML = `name: ${JOB_NAME}
guarantee: ${GUARANTEE}
kafka:
  brokers: ${KAFKA_BROKERS}
checkpoint:
  interval: ${CHECKPOINT_INTERVAL}
sources:
  - id: numbers
    topics: ${INPUT_TOPIC}
    event_time: {timestamp: ts, max_out_of_orderness: ${MAX_OOO}}
tables:
  - id: tiers
    topic: tiers
steps:
  - id: enrich
    join: {table: tiers, key: '"k" + string(n % 4)', as: t, how: left, time: event_time, history: 1h}
  - id: tiered
    map: {n: n, ts: ts, tier: 't == nil ? "none" : t.tier'}
sinks:
  - topic: ${OUTPUT_TOPIC}
admin:
  listen: ${ADMIN_LISTEN}
`

var asOfJoinSimJob = simJob{
	name: "asof-join", config: asOfJoinYAML, asOf: true,
	keyOf:      func(n int64) string { return fmt.Sprintf("k%d", n%4) },
	guarantees: []config.Guarantee{config.ExactlyOnce},
	// Two thirds of the seeds: most runs now continue from one of their
	// savepoints (a second run), which made the job half again as long;
	// this keeps its share of the CI's time as it was (asof-windows the
	// same, from a third to a quarter).
	seedShare: 67,
}

// asOfWindowsJob is parity-windows behind a left join as of event time
// that changes no key: its windows' oracle holds as it is, and the
// checkpoints' watermarks never pass a held record (checkEventTime), so
// no window fires before a record that belongs in it is released.
var asOfWindowsJob = simJob{name: "asof-windows", windowed: true, asOf: true, keyOf: parityWindowsJob.keyOf,
	config: strings.Replace(parityWindowsYAML, "steps:\n", `tables:
  - id: tiers
    topic: tiers
steps:
  - id: enrich
    join: {table: tiers, key: '"k" + string(n % 4)', as: t, how: left, time: event_time, history: 1h}
`, 1),
	// A quarter of the seeds, for the CI's time: the hold's paths are
	// asof-join's, the windows' parity-windows'.
	guarantees: []config.Guarantee{config.ExactlyOnce}, seedShare: 25}

func init() { simJobs = append(simJobs, asOfJoinSimJob, asOfWindowsJob) }

// heldInputs are the inputs checkpoint rec holds (nil: none).
func heldInputs(rec *checkpoint.Record) (map[simTP]bool, error) {
	if rec == nil || len(rec.Held) == 0 {
		return nil, nil
	}
	h, err := operator.DecodeHold(rec.Held)
	if err != nil {
		return nil, fmt.Errorf("checkpoint %d: %w", rec.ID, err)
	}
	out := map[simTP]bool{}
	for _, hr := range h.Records() {
		out[simTP{hr.Partition, hr.Offset}] = true
	}
	return out, nil
}

// heldMin is the least event time checkpoint rec holds (ok false: none).
func heldMin(rec *checkpoint.Record) (int64, bool, error) {
	if rec == nil || len(rec.Held) == 0 {
		return 0, false, nil
	}
	h, err := operator.DecodeHold(rec.Held)
	if err != nil {
		return 0, false, err
	}
	least, ok := h.Min()
	return least, ok, nil
}

// simVersion is one committed record of the table's topic, in the order
// the harness wrote it.
type simVersion struct {
	key, tier string // tier "": a tombstone
	ts        int64
}

// asOfTableWrites is how many times the table changes while the job
// runs; the last change closes it (stamps every partition far ahead).
const asOfTableWrites = 25

// asOfTableModel is the table of the join as of event time as a
// simulation writes it (the single-mode one and the group one share it):
// the committed records of its topic "tiers" (two partitions), in the
// order written, and the event time of the last. tier is the oracle.
type asOfTableModel struct {
	w        *world
	versions []simVersion
	ts       int64
	// partitions is the topic's partition count (0: 2).
	partitions int32
}

// parts is the table topic's partition count.
func (m *asOfTableModel) parts() int32 { return cmp.Or(m.partitions, 2) }

// create creates the table's topic and its first versions, before any
// number's event time (base): k0 gold, k1 silver, k2 gold, and a pad key
// in each partition, so that both partitions have given a record.
func (m *asOfTableModel) create(base int64) error {
	if err := m.w.kafka.CreateTopic("tiers", int(m.parts())); err != nil {
		return err
	}
	m.ts = base
	for _, v := range []simVersion{{"k0", "gold", base - 1000}, {"k1", "silver", base - 1000}, {"k2", "gold", base - 1000}} {
		m.appendVersion(v)
	}
	for p := range m.parts() {
		m.appendVersion(simVersion{key: asOfKeyIn(p, m.parts(), "pad"), tier: "pad", ts: base - 1000})
	}
	return nil
}

// asOfKeyIn is a key of the given prefix that the model places in table
// partition p (of n).
func asOfKeyIn(p, n int32, prefix string) string {
	for i := 0; ; i++ {
		k := fmt.Sprintf("%s-%d", prefix, i)
		h := fnv.New32a()
		h.Write([]byte(k))
		if int32(h.Sum32()%uint32(n)) == p {
			return k
		}
	}
}

// appendVersion appends v to the table's topic, committed.
func (m *asOfTableModel) appendVersion(v simVersion) {
	rec := memkafka.Record{Topic: "tiers", Key: []byte(v.key), Timestamp: time.UnixMilli(v.ts)}
	if v.tier != "" {
		rec.Value = fmt.Appendf(nil, `{"tier":%q}`, v.tier)
	}
	rec.Partition = m.w.toModel(fromModel(rec)).Partition
	if _, err := m.w.kafka.Append(rec); err != nil {
		panic(err) // the topic exists: a bug of the harness
	}
	m.versions = append(m.versions, v)
}

// write is the table's n-th change: a new version of k0, k1 or k2 (or a
// tombstone) at an event time at or after every earlier one, or an
// aborted transaction; or, from the asOfTableWrites-th on (closed), a
// far-ahead record in each partition, after which it must not change.
func (m *asOfTableModel) write(n int) (closed bool) {
	rng := m.w.rng
	if n >= asOfTableWrites {
		for p := range m.parts() {
			m.appendVersion(simVersion{key: asOfKeyIn(p, m.parts(), "close"), tier: "closed", ts: m.ts + 10*3600*1000})
		}
		m.w.log("table closed")
		return true
	}
	m.ts += int64(rng.IntN(150)) // 0: two versions at one time
	key := fmt.Sprintf("k%d", rng.IntN(3))
	switch rng.IntN(6) {
	case 0:
		m.appendVersion(simVersion{key: key, ts: m.ts})
	case 1:
		// An aborted transaction: a read_committed table never shows it.
		m.w.writeAbortedTier(key, time.UnixMilli(m.ts))
	default:
		m.appendVersion(simVersion{key: key, tier: []string{"gold", "silver", "bronze"}[rng.IntN(3)], ts: m.ts})
	}
	m.w.log("table write %d at %d", n, m.ts)
	return false
}

// tier is the oracle: the tier of key as of event time t, from the
// table's topic alone.
func (m *asOfTableModel) tier(key string, t int64) string {
	best, found := simVersion{}, false
	for _, v := range m.versions {
		if v.key == key && v.ts <= t && (!found || v.ts >= best.ts) {
			best, found = v, true
		}
	}
	if !found || best.tier == "" {
		return "none"
	}
	return best.tier
}

// replay creates the table's topic as a run before left it: versions,
// the last written at ts (a continuation from a savepoint).
func (m *asOfTableModel) replay(versions []simVersion, ts int64) error {
	if err := m.w.kafka.CreateTopic("tiers", int(m.parts())); err != nil {
		return err
	}
	m.ts = ts
	for _, v := range versions {
		m.appendVersion(v)
	}
	return nil
}

// createAsOfTable creates the table's topic and its first versions, or,
// in a continuation, every version the run before wrote (asOfReplay).
func (r *simRun) createAsOfTable() error {
	ts := r.asOfTable.ts
	r.asOfTable = asOfTableModel{w: r.w}
	if replay := r.asOfReplay; replay != nil {
		r.asOfReplay = nil
		return r.asOfTable.replay(replay, ts)
	}
	return r.asOfTable.create(r.clock.UnixMilli())
}

// writeAsOfTable changes the table once (asOfTableModel.write).
func (r *simRun) writeAsOfTable() {
	r.tableWrites++
	if r.asOfTable.write(r.tableWrites) {
		r.tableWrites = 30 // no more: a later write would be behind these
	}
}

// catchUpAsOf reads the committed outputs and dead letters since the
// last call.
func (r *simRun) catchUpAsOf() error {
	v := &r.committed
	if v.asOf == nil {
		v.asOf = map[int64]int{}
	}
	for _, out := range v.tail(r.w, "out") {
		var o struct {
			N    int64  `json:"n"`
			TS   int64  `json:"ts"`
			Tier string `json:"tier"`
		}
		if err := json.Unmarshal(out.Value, &o); err != nil {
			return fmt.Errorf("output %s: %v", out.Value, err)
		}
		if want := r.asOfTable.tier(r.job.keyOf(o.N), o.TS); o.Tier != want {
			return fmt.Errorf("output %s: tier %q, but the table's topic says %q as of %d", out.Value, o.Tier, want, o.TS)
		}
		v.asOf[o.N]++
	}
	v.dead += len(v.tail(r.w, r.cfg.Sinks[0].DeadLetterTopic))
	return nil
}

// checkAsOf is check for the join as of event time.
func (r *simRun) checkAsOf(when string) error {
	v := &r.committed
	offsets, _, err := r.committedCut(when, false)
	if err != nil {
		return err
	}
	held := map[simTP]bool{}
	if v.newest.Record == nil && r.base != nil {
		held = r.baseHeld // nothing committed yet: still where the savepoint was
	}
	if rec := v.newest.Record; rec != nil && len(rec.Held) > 0 {
		h, err := operator.DecodeHold(rec.Held)
		if err != nil {
			return fmt.Errorf("%w at %s: checkpoint %d: %v", errViolation, when, rec.ID, err)
		}
		for _, hr := range h.Records() {
			if hr.Topic != "in" || int(hr.Partition) >= simPartitions || hr.Offset >= offsets[hr.Partition] {
				return fmt.Errorf("%w at %s: checkpoint %d holds %s/%d@%d, outside its input prefix %v", errViolation, when, rec.ID, hr.Topic, hr.Partition, hr.Offset, offsets)
			}
			held[simTP{hr.Partition, hr.Offset}] = true
		}
	}
	r.asOfHeld = max(r.asOfHeld, len(held))
	bad, due := 0, map[int64]bool{}
	for p, off := range offsets {
		for i, in := range r.inputs[p][:off] {
			tp := simTP{int32(p), int64(i)}
			// below: a continuation's input under its savepoint's offsets;
			// before: one the run before committed (not held there).
			below := r.base != nil && int64(i) < r.base[p]
			before := below && !r.baseHeld[tp]
			switch {
			case in.bad:
				if !below {
					bad++
				}
				if held[tp] {
					return fmt.Errorf("%w at %s: bad input %v is held", errViolation, when, tp)
				}
			case before:
				if held[tp] {
					return fmt.Errorf("%w at %s: input %d (%v) is held by checkpoint %d, but the run before the savepoint committed it", errViolation, when, in.n, tp, v.newest.Record.ID)
				}
				if n := v.asOf[in.n]; n != 0 {
					return fmt.Errorf("%w at %s: input %d (%v) committed %d times after the savepoint, which did not hold it", errViolation, when, in.n, tp, n)
				}
			case held[tp]:
				if n := v.asOf[in.n]; n != 0 {
					return fmt.Errorf("%w at %s: input %d is held by the checkpoint, and committed %d times", errViolation, when, in.n, n)
				}
			default:
				due[in.n] = true
				if n := v.asOf[in.n]; n != 1 {
					return fmt.Errorf("%w at %s: input %d (%v, event time %d) committed %d times; the checkpoint covers it and does not hold it", errViolation, when, in.n, tp, in.ts, n)
				}
			}
		}
	}
	for n, c := range v.asOf {
		if !due[n] {
			return fmt.Errorf("%w at %s: input %d committed %d times, but the checkpoint does not cover it, or holds it", errViolation, when, n, c)
		}
	}
	if v.dead != bad {
		return fmt.Errorf("%w at %s: %d dead letters committed; the checkpoint covers %d bad inputs", errViolation, when, v.dead, bad)
	}
	return nil
}

// asOfDue is how many good inputs the run must commit by its end: every
// one, or, for a continuation, those at or after its savepoint's offsets
// and those the savepoint held.
func (r *simRun) asOfDue() int {
	good := 0
	for p, ins := range r.inputs {
		for i, in := range ins {
			tp := simTP{int32(p), int64(i)}
			if !in.bad && (r.base == nil || int64(i) >= r.base[p] || r.baseHeld[tp]) {
				good++
			}
		}
	}
	return good
}

// The join's runs are not vacuous: some checkpoints hold records (the
// oracle then judges them held, not committed), runs whose table closed
// in time end with every good input committed, each with its tier
// (checkAsOf at the end), and some continue from a savepoint that held
// records.
func TestSimulationAsOfJoinHoldsAndReleases(t *testing.T) {
	dir := simTempDir(t)
	holding, whole, continued := 0, 0, 0
	for seed := uint64(1); seed <= 40; seed++ {
		r, err := simulate(t, seed, asOfJoinSimJob, config.ExactlyOnce, noPlantedBug, filepath.Join(dir, fmt.Sprint(seed)))
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		if r.asOfHeld > 0 {
			holding++
		}
		if len(r.committed.asOf) == r.asOfDue() {
			whole++
		}
		if len(r.baseHeld) > 0 {
			continued++
		}
	}
	t.Logf("of 40 runs, %d committed a checkpoint holding records, %d ended with every input joined, %d continued from a savepoint holding records", holding, whole, continued)
	if holding == 0 || whole == 0 || continued == 0 {
		t.Fatalf("%d runs held records at a checkpoint, %d joined every input, %d continued from a savepoint holding records: the simulation does not exercise the hold", holding, whole, continued)
	}
}

// A job that no longer joins as of event time releases what its last
// checkpoint held: the first run's table never passes the inputs (no
// table writes: every good input is held at its final checkpoint); the
// second, with the join in processing time, commits each once, with the
// tier the table held all along.
func TestSimulationAsOfJoinRemoved(t *testing.T) {
	dir := simTempDir(t)
	for seed := uint64(1); seed <= 10; seed++ {
		r := newSimRun(t, seed, asOfJoinSimJob, config.ExactlyOnce, filepath.Join(dir, fmt.Sprint(seed)))
		r.tableWrites = 30 // none: the table stays at its first versions
		if err := r.run(); err != nil {
			t.Fatalf("seed %d, held: %v", seed, err)
		}
		if r.asOfHeld == 0 || len(r.committed.asOf) != 0 {
			t.Fatalf("seed %d: %d records held at most, %d committed: want every good input held", seed, r.asOfHeld, len(r.committed.asOf))
		}
		cfg := *r.cfg
		cfg.Steps = slices.Clone(cfg.Steps)
		join := *cfg.Steps[0].Join
		join.Time, join.History = "", 0
		cfg.Steps[0].Join = &join
		j, err := New(&cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
		if err != nil {
			t.Fatal(err)
		}
		r2 := *r
		r2.cfg, r2.j = &cfg, j
		j.now = func() time.Time { return r2.clock }
		r2.w.log("restarted with the join in processing time")
		if err := r2.run(); err != nil {
			t.Fatalf("seed %d, released: %v", seed, err)
		}
		good := 0
		for _, p := range r2.inputs {
			for _, in := range p {
				if !in.bad {
					good++
				}
			}
		}
		if len(r2.committed.asOf) != good {
			t.Fatalf("seed %d: %d of %d good inputs committed after the restart", seed, len(r2.committed.asOf), good)
		}
	}
}

// A start from a savepoint whose configuration no longer joins as of
// event time releases what the savepoint held, as a restart from a
// checkpoint does (TestSimulationAsOfJoinRemoved): the first run's table
// never passes the inputs, so its savepoints hold every good input they
// cover; the continuation commits each once: with the join in processing
// time, with the tier the table held all along; without the join and
// the table, with none (its record imports the held records without any
// table: checkpoint format v6 with no tables).
func TestSimulationAsOfJoinRemovedAtSavepoint(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*config.Config)
	}{
		{"processing time", func(cfg *config.Config) {
			cfg.Steps = slices.Clone(cfg.Steps)
			join := *cfg.Steps[0].Join
			join.Time, join.History = "", 0
			cfg.Steps[0].Join = &join
		}},
		{"no join, no table", func(cfg *config.Config) {
			cfg.Tables = nil
			m := cfg.Steps[1]
			m.Map = []config.Field{{Name: "n", Expr: "n"}, {Name: "ts", Expr: "ts"}, {Name: "tier", Expr: `"none"`}}
			cfg.Steps = []config.Step{m}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := simTempDir(t)
			continued := 0
			for seed := uint64(1); seed <= 20; seed++ {
				r := newSimRun(t, seed, asOfJoinSimJob, config.ExactlyOnce, filepath.Join(dir, fmt.Sprint(seed)))
				r.tableWrites = 30 // none: the table stays at its first versions
				if err := r.run(); err != nil {
					t.Fatalf("seed %d, held: %v", seed, err)
				}
				if len(r.savepoints) == 0 {
					continue
				}
				c, err := r.continuationWith(t, r.savepoints[len(r.savepoints)-1], tc.change)
				if err != nil {
					t.Fatalf("seed %d: %v", seed, err)
				}
				if len(c.cfg.Tables) == 0 {
					c.asOfTable.versions = nil // the oracle: no table, no tier
				}
				c.w.log("continued: %s", tc.name)
				if err := c.run(); err != nil {
					t.Fatalf("seed %d, released: %v", seed, err)
				}
				if len(c.baseHeld) > 0 {
					continued++
				}
				if got, want := len(c.committed.asOf), c.asOfDue(); got != want {
					t.Fatalf("seed %d: %d of %d good inputs committed after the start from the savepoint", seed, got, want)
				}
			}
			if continued == 0 {
				t.Fatal("no run continued from a savepoint holding records: the test proves nothing")
			}
			t.Logf("%d of 20 runs continued from a savepoint holding records", continued)
		})
	}
}
