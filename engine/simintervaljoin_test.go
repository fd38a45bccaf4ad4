package engine

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/eoflow/pipeline/config"
	"github.com/eoflow/pipeline/internal/testkit/memkafka"
	"github.com/eoflow/pipeline/sink"
	"github.com/eoflow/pipeline/window"
)

// The simulation's interval join job: the even inputs (left) paired with
// the odd ones (right) whose key matches (n mod 5 against (m+1) mod 5) and
// whose event time is within 30 ms before to 60 ms after, a left join.
// The inputs carry the event times of parity-windows (10 ms apart, with
// disorder within max_out_of_orderness, and now and then far behind).
//
// The oracle computes the results from the input alone, by the documented
// rules (docs/joins.md): an input is late when its event time is below
// its partition's watermark just before it (the partition's largest
// earlier event time minus max_out_of_orderness); every pair of non-late
// inputs within the bounds is one result, closing at the later of their
// times; a non-late even input without any such pair is one result
// alone, closing at its time plus 60 ms. After every commit the committed
// results must be exactly those that close below the checkpoint's
// watermark (and, in a continuation, at or above its savepoint's), each
// once; each key's results committed in order of their close; the late
// topic exactly the late inputs of the checkpoint's prefix.

const intervalJoinYAML = `name: ${JOB_NAME}
guarantee: ${GUARANTEE}
kafka:
  brokers: ${KAFKA_BROKERS}
checkpoint:
  interval: ${CHECKPOINT_INTERVAL}
sources:
  - id: numbers
    topics: ${INPUT_TOPIC}
    event_time: {timestamp: ts, max_out_of_orderness: ${MAX_OOO}}
steps:
  - {id: evens, from: numbers, filter: 'n % 2 == 0'}
  - {id: odds, from: numbers, filter: 'n % 2 == 1'}
  - id: pairs
    from: evens
    join:
      stream: odds
      key: n % 5
      other_key: (n + 1) % 5
      within: {before: 30ms, after: 60ms}
      as: odd
      how: left
      late_topic: ${LATE_TOPIC}
sinks:
  - {from: pairs, topic: "${OUTPUT_TOPIC}"}
admin:
  listen: ${ADMIN_LISTEN}
scale:
  mode: ${SCALE_MODE:-single}
  partitions: ${SCALE_PARTITIONS:-32}
  session_timeout: ${SESSION_TIMEOUT:-10s}
`

const simBefore, simAfter = 30, 60 // ms

var intervalJoinSimJob = simJob{
	name: "interval-join", config: intervalJoinYAML, interval: true,
	keyOf: func(n int64) string {
		if n%2 == 0 {
			return strconv.FormatInt(n%5, 10)
		}
		return strconv.FormatInt((n+1)%5, 10)
	},
	// exactly_once only: the oracle is of each result exactly once, and
	// the commit paths are the other jobs'.
	guarantees: []config.Guarantee{config.ExactlyOnce},
}

func init() { simJobs = append(simJobs, intervalJoinSimJob) }

// simPair is one result: the even input, the odd one (0: none, a left
// record alone), and when it closes.
type simPair struct {
	left, right int64
	closes      int64
}

// pairOracle is what the inputs before offsets give: every result, the
// late inputs, the bad ones, and each partition's largest event time.
func (r *simRun) pairOracle(offsets []int64) (map[simPair]bool, windowOracle) {
	ins := make([][]simInput, len(offsets))
	for p, off := range offsets {
		ins[p] = r.inputs[p][:off]
	}
	return pairsOf(ins, r.job.keyOf)
}

// pairsOf is the interval join's results of inputs (by partition, each
// in offset order) by the documented rules, keyed by keyOf, with the late
// inputs, the bad ones and each partition's largest event time: the
// oracle of the single-mode and the group simulation.
func pairsOf(inputs [][]simInput, keyOf func(int64) string) (map[simPair]bool, windowOracle) {
	o := windowOracle{late: map[simTP]bool{}, maxTime: make([]int64, len(inputs))}
	var lefts, rights []simInput
	for p, ins := range inputs {
		max := int64(window.NoWatermark)
		for i, in := range ins {
			if in.bad {
				o.bad++
				continue
			}
			if max != window.NoWatermark && in.ts < max-simOutOfOrder {
				o.late[simTP{int32(p), int64(i)}] = true
				continue
			}
			max = maxInt(max, in.ts)
			if in.n%2 == 0 {
				lefts = append(lefts, in)
			} else {
				rights = append(rights, in)
			}
		}
		o.maxTime[p] = max
	}
	results := map[simPair]bool{}
	for _, l := range lefts {
		matched := false
		for _, rt := range rights {
			if keyOf(l.n) == keyOf(rt.n) && l.ts-simBefore <= rt.ts && rt.ts <= l.ts+simAfter {
				results[simPair{l.n, rt.n, maxInt(l.ts, rt.ts)}] = true
				matched = true
			}
		}
		if !matched {
			results[simPair{l.n, 0, l.ts + simAfter}] = true
		}
	}
	return results, o
}

func maxInt(a, b int64) int64 { return max(a, b) }

// catchUpPairs reads the committed results, late records and dead
// letters since the last call.
func (r *simRun) catchUpPairs() error {
	v := &r.committed
	if v.pairs == nil {
		v.pairs, v.lastPair, v.late, v.watermark = map[simPair]int{}, map[string]simPair{}, map[simTP]int{}, window.NoWatermark
		if r.base != nil {
			v.watermark = r.baseWatermark
		}
	}
	for _, out := range v.tail(r.w, "out") {
		p, err := decodePair(out, r.job.keyOf, v.lastPair)
		if err != nil {
			return err
		}
		v.pairs[p]++
	}
	for _, rec := range v.tail(r.w, simLateTopic) {
		kr := fromModel(rec)
		p, err1 := strconv.ParseInt(sink.Header(kr, sink.HeaderPartition), 10, 32)
		off, err2 := strconv.ParseInt(sink.Header(kr, sink.HeaderOffset), 10, 64)
		if err1 != nil || err2 != nil {
			return fmt.Errorf("late record %s without its source partition and offset", rec.Value)
		}
		v.late[simTP{int32(p), off}]++
	}
	v.dead += len(v.tail(r.w, r.cfg.Sinks[0].DeadLetterTopic))
	return nil
}

// decodePair is the result an output of the interval join holds, checked
// against what a result must be: its timestamp its close, its key the
// join key, and each key's results in the order they close. last is
// each key's result before (updated).
func decodePair(out memkafka.Record, keyOf func(int64) string, last map[string]simPair) (simPair, error) {
	var o struct {
		N   int64 `json:"n"`
		TS  int64 `json:"ts"`
		Odd *struct {
			N  int64 `json:"n"`
			TS int64 `json:"ts"`
		} `json:"odd"`
	}
	if err := json.Unmarshal(out.Value, &o); err != nil {
		return simPair{}, fmt.Errorf("output %s: %v", out.Value, err)
	}
	p := simPair{left: o.N, closes: o.TS + simAfter}
	if o.Odd != nil {
		p = simPair{o.N, o.Odd.N, max(o.TS, o.Odd.TS)}
	}
	ts := out.Timestamp.UnixMilli()
	if want := max(o.TS, p.closes-simAfter); o.Odd == nil && ts != o.TS || o.Odd != nil && ts != p.closes {
		return simPair{}, fmt.Errorf("output %s: timestamp %d, want %d", out.Value, ts, want)
	}
	key := string(out.Key)
	if key != keyOf(o.N) {
		return simPair{}, fmt.Errorf("output %s: key %q, want the join key %q", out.Value, key, keyOf(o.N))
	}
	// One key's results go to one output partition, in the order they
	// close (then by the left input's time and place): a replay writes
	// them in the same order.
	if l, ok := last[key]; ok && l.closes > p.closes {
		return simPair{}, fmt.Errorf("key %s: result %+v committed after %+v, which closes later", key, p, l)
	}
	last[key] = p
	return p, nil
}

// checkPairs is check for the interval join.
func (r *simRun) checkPairs(when string) error {
	v := &r.committed
	offsets, watermark, err := r.committedCut(when, true)
	if err != nil {
		return err
	}
	results, want := r.pairOracle(offsets)
	if err := r.checkEventTime(when, v.newest.Record, want); err != nil {
		return err
	}
	from := int64(window.NoWatermark)
	if r.base != nil {
		from = r.baseWatermark
		_, base := r.pairOracle(r.base)
		for tp := range base.late {
			delete(want.late, tp)
		}
		want.bad -= base.bad
	}
	due := 0
	for p := range results {
		if watermark == window.NoWatermark || p.closes >= watermark || from != window.NoWatermark && p.closes < from {
			continue
		}
		due++
		if n := v.pairs[p]; n != 1 {
			return fmt.Errorf("%w at %s: result %+v committed %d times; the checkpoint's watermark %d closes it", errViolation, when, p, n, watermark)
		}
	}
	if len(v.pairs) != due {
		for p, n := range v.pairs {
			if _, ok := results[p]; !ok || p.closes >= watermark {
				return fmt.Errorf("%w at %s: result %+v committed %d times, but the oracle (watermark %d) has no such result due (%v)", errViolation, when, p, n, watermark, ok)
			}
		}
		return fmt.Errorf("%w at %s: %d results committed, %d due", errViolation, when, len(v.pairs), due)
	}
	for tp := range want.late {
		if n := v.late[tp]; n != 1 {
			return fmt.Errorf("%w at %s: late input %+v committed %d times to the late topic", errViolation, when, tp, n)
		}
	}
	for tp, n := range v.late {
		if !want.late[tp] {
			return fmt.Errorf("%w at %s: input %+v committed %d times to the late topic, but it is not late or not in the checkpoint", errViolation, when, tp, n)
		}
	}
	if v.dead != want.bad {
		return fmt.Errorf("%w at %s: %d dead letters committed; the checkpoint covers %d bad inputs", errViolation, when, v.dead, want.bad)
	}
	return nil
}
