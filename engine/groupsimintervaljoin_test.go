package engine

import (
	"fmt"
	"strconv"

	"github.com/eoflow/pipeline/internal/testkit/memkafka"
	"github.com/eoflow/pipeline/sink"
	"github.com/eoflow/pipeline/window"
)

// The group simulation of the interval join (TestSimulationGroupMode/
// interval_join): the three processes run the single-mode simulation's
// interval join job (simintervaljoin_test.go: the even inputs joined with
// the odd ones whose key matches, within 30 ms before to 60 ms after, a
// left join) through the same crashes, pauses, zombies and rebalances as
// the sum; both streams cross the repartition topic by the join key. The
// oracle is the single-mode one (pairsOf), from the input alone,
// partition by partition: an input is late when its event time is below
// its partition's watermark just before it. So:
//   - after every commit, every committed result is one of the oracle's
//     (a result that closed can gain no partner later: that partner
//     would be late), once, each key's in the order they close; every
//     committed late record is one the oracle calls late, once; no input
//     becomes two dead letters;
//   - at the end, the committed results are exactly the oracle's that
//     close below the least partition watermark, and the late records
//     exactly the oracle's.

// gsimPairView is what the interval join's oracle has read of the
// committed outputs.
type gsimPairView struct {
	next  map[memkafka.TP]int64
	pairs map[simPair]bool
	last  map[string]simPair
	late  map[simTP]bool
	dead  map[string]bool
}

// intervalJoinConfig is the single-mode simulation's interval join job,
// its settings in env.
func (s *gsim) intervalJoinConfig(env map[string]string) string {
	s.joined = true
	env["LATE_TOPIC"] = simLateTopic
	env["MAX_OOO"] = fmt.Sprintf("%dms", simOutOfOrder)
	return intervalJoinSimJob.config
}

// checkPairs reads what was committed since its last call and judges it
// by the oracle; at the end (drained), the whole of it.
func (s *gsim) checkPairs(end bool) error {
	v := &s.pview
	if v.next == nil {
		v.next, v.pairs, v.last, v.late, v.dead = map[memkafka.TP]int64{}, map[simPair]bool{}, map[string]simPair{}, map[simTP]bool{}, map[string]bool{}
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
	results, o := pairsOf(s.inputs, intervalJoinSimJob.keyOf)
	for _, r := range tail("out") {
		p, err := decodePair(r, intervalJoinSimJob.keyOf, v.last)
		switch {
		case err != nil:
			return s.violation("%v", err)
		case v.pairs[p]:
			return s.violation("result %+v committed twice", p)
		case !results[p]:
			return s.violation("result %+v committed; from the input alone there is no such result: it depends on the schedule", p)
		}
		v.pairs[p] = true
	}
	for _, r := range tail(simLateTopic) {
		kr := fromModel(r)
		p, err1 := strconv.ParseInt(sink.Header(kr, sink.HeaderPartition), 10, 32)
		off, err2 := strconv.ParseInt(sink.Header(kr, sink.HeaderOffset), 10, 64)
		if err1 != nil || err2 != nil {
			return s.violation("late record %s without its source partition and offset", r.Value)
		}
		tp := simTP{int32(p), off}
		switch {
		case v.late[tp]:
			return s.violation("input %+v committed twice to the late topic", tp)
		case !o.late[tp]:
			return s.violation("input %+v committed to the late topic; from the input alone it is not late", tp)
		}
		v.late[tp] = true
	}
	for _, r := range tail(s.cfg.Sinks[0].DeadLetterTopic) {
		kr := fromModel(r)
		at := sink.Header(kr, sink.HeaderPartition) + "/" + sink.Header(kr, sink.HeaderOffset)
		if v.dead[at] {
			return s.violation("input %s dead-lettered twice", at)
		}
		v.dead[at] = true
	}
	if !end {
		return nil
	}
	least := int64(window.NoWatermark)
	for p, largest := range o.maxTime {
		wm := window.PartitionClock{Max: largest}.Watermark(simOutOfOrder)
		if p == 0 || wm < least {
			least = wm
		}
	}
	for p := range results {
		if !v.pairs[p] && least != window.NoWatermark && p.closes < least {
			return s.violation("result %+v never committed, though every partition's watermark passed its close (least %d)", p, least)
		}
	}
	for p := range v.pairs {
		if p.closes >= least {
			return s.violation("result %+v committed, though a partition's watermark (least %d) never passed its close", p, least)
		}
	}
	for tp := range o.late {
		if !v.late[tp] {
			return s.violation("late input %+v never committed to the late topic", tp)
		}
	}
	if len(v.dead) != o.bad {
		return s.violation("%d dead letters committed for %d bad inputs", len(v.dead), o.bad)
	}
	s.counts["results committed"] += len(v.pairs)
	s.counts["late inputs"] += len(v.late)
	return nil
}
