package engine

import (
	"fmt"

	"github.com/eoflow/pipeline/checkpoint/savepoint"
	"github.com/eoflow/pipeline/operator/keyed"
	"github.com/eoflow/pipeline/state"
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
	gsimTail
	pairs map[simPair]bool
	last  map[string]simPair
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
	if v.pairs == nil {
		v.pairs, v.last = map[simPair]bool{}, map[string]simPair{}
	}
	results, o := pairsOf(s.inputs, intervalJoinSimJob.keyOf)
	for _, r := range v.read(s, "out") {
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
	if err := v.lateAndDead(s, o.late); err != nil {
		return err
	}
	if !end {
		return nil
	}
	least := leastWatermark(o.maxTime)
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
	if err := v.allLateAndDead(s, o.late, o.bad); err != nil {
		return err
	}
	s.counts["results committed"] += len(v.pairs)
	s.counts["late inputs"] += len(v.late)
	return nil
}

// checkIntervalJoinSavepoint: a savepoint of the running group, of the
// interval join, holds exactly the buffers its source offsets call for:
// every buffered record is an input before the offsets, not late, on its
// side under its key, once; and every such input that the savepoint's
// watermark has not expired (a left one while t + after is at or above
// it, a right one while t + before is) is buffered. A restore then pairs
// each of them as the group would have.
func (s *gsim) checkIntervalJoinSavepoint(dir string) error {
	r, offsets, ins, err := s.savepointInputs(dir)
	if err != nil {
		return err
	}
	_, o := pairsOf(ins, intervalJoinSimJob.keyOf)
	wm := int64(window.NoWatermark)
	if et := r.Manifest().EventTime.Checkpoint(); et != nil {
		wm = et.Watermark
	}
	buffered := map[simTP]bool{}
	err = r.Scan("pairs", state.Range{End: state.KeyGroup(s.cfg.Checkpoint.KeyGroups)}, func(e savepoint.Entry) error {
		b, err := keyed.DecodeJoinBuffers(e.Value)
		if err != nil {
			return err
		}
		for side, entries := range [][]keyed.JoinEntry{b.Left, b.Right} {
			for _, je := range entries {
				tp := simTP{je.Partition, je.Offset}
				switch {
				case je.Topic != "in" || je.Partition < 0 || int(je.Partition) >= gsimInParts || je.Offset < 0 || je.Offset >= offsets[je.Partition]:
					return fmt.Errorf("key %q buffers %s/%d@%d, beyond the savepoint's offsets %v", e.Key, je.Topic, je.Partition, je.Offset, offsets)
				case buffered[tp]:
					return fmt.Errorf("input %v buffered twice", tp)
				}
				in := ins[je.Partition][je.Offset]
				switch {
				case in.bad || o.late[tp]:
					return fmt.Errorf("key %q buffers input %v, which is bad or late", e.Key, tp)
				case (in.n%2 == 0) != (side == 0) || intervalJoinSimJob.keyOf(in.n) != string(e.Key) || je.At != in.ts:
					return fmt.Errorf("key %q buffers input %v (n %d at %d) on side %d at %d", e.Key, tp, in.n, in.ts, side, je.At)
				}
				buffered[tp] = true
			}
		}
		return nil
	})
	if err != nil {
		return s.violation("savepoint %s: %v", dir, err)
	}
	for p, part := range ins {
		for i, in := range part {
			tp := simTP{int32(p), int64(i)}
			if in.bad || o.late[tp] || buffered[tp] {
				continue
			}
			expiry := in.ts + simBefore
			if in.n%2 == 0 {
				expiry = in.ts + simAfter
			}
			if wm == window.NoWatermark || expiry >= wm {
				return s.violation("savepoint %s (watermark %d): input %v (n %d at %d) is not buffered, though the watermark has not expired it", dir, wm, tp, in.n, in.ts)
			}
		}
	}
	s.counts["join records in savepoints"] += len(buffered)
	s.log("savepoint %s buffers exactly the join's inputs before %v", dir, offsets)
	return nil
}
