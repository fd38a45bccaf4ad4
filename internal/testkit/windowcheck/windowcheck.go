package windowcheck

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/internal/kread"
)

// Input is one input record: {"n": N, "ts": TS} at Partition/Offset.
type Input struct {
	Partition int32
	Offset    int64
	N, TS     int64
	Value     []byte
}

// Params are the job's settings, in milliseconds, and the input topic's
// partition count (silent partitions included: they hold the watermark).
type Params struct {
	Size, MaxOutOfOrderness, AllowedLateness int64
	Partitions                               int32
}

// Output is one window's result.
type Output struct {
	Key                    string
	WindowStart, WindowEnd time.Time
	Count, Sum             int64
}

func (o Output) String() string {
	return fmt.Sprintf("%s[%s,%s):{count %d sum %d}", o.Key, o.WindowStart.UTC().Format(time.RFC3339Nano), o.WindowEnd.UTC().Format(time.RFC3339Nano), o.Count, o.Sum)
}

// Late is one record of the late topic.
type Late struct {
	Partition                         int32
	Offset                            int64
	Value                             []byte
	WindowStart, WindowEnd, Watermark time.Time
	Windows                           int // how many windows it missed
}

func key(n int64) string {
	if n%2 == 0 {
		return "even"
	}
	return "odd"
}

// Oracle computes the expected outputs (sorted by window start, then key)
// and late inputs (by partition, offset) of the input in.
func Oracle(p Params, in []Input) (outputs []Output, late []Input) {
	byPart := map[int32][]Input{}
	for _, r := range in {
		byPart[r.Partition] = append(byPart[r.Partition], r)
	}
	type win struct {
		key   string
		start int64
	}
	wins := map[win]*Output{}
	watermark := int64(math.MaxInt64)
	for part := range p.Partitions {
		recs := byPart[part]
		slices.SortFunc(recs, func(a, b Input) int { return int(a.Offset - b.Offset) })
		largest, seen := int64(0), false
		for _, r := range recs {
			start := r.TS - ((r.TS%p.Size)+p.Size)%p.Size
			if seen && start+p.Size+p.AllowedLateness <= largest-p.MaxOutOfOrderness {
				late = append(late, r)
				continue
			}
			if !seen || r.TS > largest {
				largest, seen = r.TS, true
			}
			w := win{key(r.N), start}
			o := wins[w]
			if o == nil {
				o = &Output{Key: w.key, WindowStart: time.UnixMilli(start).UTC(), WindowEnd: time.UnixMilli(start + p.Size).UTC()}
				wins[w] = o
			}
			o.Count++
			o.Sum += r.N
		}
		if !seen {
			watermark = math.MinInt64 // a silent partition: nothing fires
		} else {
			watermark = min(watermark, largest-p.MaxOutOfOrderness)
		}
	}
	for _, o := range wins {
		if watermark != math.MinInt64 && o.WindowEnd.UnixMilli()+p.AllowedLateness <= watermark {
			outputs = append(outputs, *o)
		}
	}
	slices.SortFunc(outputs, compareOutputs)
	return outputs, late
}

// Behind counts the inputs that per-record lateness would have dropped
// and per-window lateness counts: further behind their partition's
// watermark than allowed_lateness, in a window still open. A test whose
// input has some shows that they are counted.
func Behind(p Params, in []Input) int {
	largest := map[int32]int64{}
	_, late := Oracle(p, in)
	isLate := map[[2]int64]bool{}
	for _, l := range late {
		isLate[[2]int64{int64(l.Partition), l.Offset}] = true
	}
	byPart := map[int32][]Input{}
	for _, r := range in {
		byPart[r.Partition] = append(byPart[r.Partition], r)
	}
	n := 0
	for part, recs := range byPart {
		slices.SortFunc(recs, func(a, b Input) int { return int(a.Offset - b.Offset) })
		for i, r := range recs {
			if i > 0 && r.TS < largest[part]-p.MaxOutOfOrderness-p.AllowedLateness && !isLate[[2]int64{int64(part), r.Offset}] {
				n++
			}
			if i == 0 || r.TS > largest[part] {
				largest[part] = r.TS
			}
		}
	}
	return n
}

func compareOutputs(a, b Output) int {
	if c := a.WindowStart.Compare(b.WindowStart); c != 0 {
		return c
	}
	return strings.Compare(a.Key, b.Key)
}

// ReadInput reads the input topic.
func ReadInput(ctx context.Context, conn []kgo.Opt, topic string) ([]Input, error) {
	var in []Input
	err := kread.All(ctx, conn, topic, func(r *kgo.Record) error {
		var v struct{ N, TS *int64 }
		if err := json.Unmarshal(r.Value, &v); err != nil || v.N == nil || v.TS == nil {
			return fmt.Errorf("input %s/%d@%d %q: want {\"n\": <int>, \"ts\": <epoch ms>}", r.Topic, r.Partition, r.Offset, r.Value)
		}
		in = append(in, Input{Partition: r.Partition, Offset: r.Offset, N: *v.N, TS: *v.TS, Value: r.Value})
		return nil
	})
	return in, err
}

// ReadOutputs reads the output topic, strictly: exactly the fields
// key, window_start, window_end, count and sum, and the record key equal
// to the value's key.
func ReadOutputs(ctx context.Context, conn []kgo.Opt, topic string) ([]Output, error) {
	var outs []Output
	err := kread.All(ctx, conn, topic, func(r *kgo.Record) error {
		var v map[string]json.RawMessage
		if err := json.Unmarshal(r.Value, &v); err != nil {
			return fmt.Errorf("output %s/%d@%d %q: %w", r.Topic, r.Partition, r.Offset, r.Value, err)
		}
		var o Output
		var start, end string
		for field, dst := range map[string]any{"key": &o.Key, "window_start": &start, "window_end": &end, "count": &o.Count, "sum": &o.Sum} {
			raw, ok := v[field]
			if !ok {
				return fmt.Errorf("output %s/%d@%d %s: no field %q", r.Topic, r.Partition, r.Offset, r.Value, field)
			}
			if err := json.Unmarshal(raw, dst); err != nil {
				return fmt.Errorf("output %s/%d@%d %s: field %q: %w", r.Topic, r.Partition, r.Offset, r.Value, field, err)
			}
		}
		if len(v) != 5 {
			return fmt.Errorf("output %s/%d@%d %s: fields other than key, window_start, window_end, count, sum", r.Topic, r.Partition, r.Offset, r.Value)
		}
		var err1, err2 error
		o.WindowStart, err1 = time.Parse(time.RFC3339Nano, start)
		o.WindowEnd, err2 = time.Parse(time.RFC3339Nano, end)
		if err1 != nil || err2 != nil {
			return fmt.Errorf("output %s/%d@%d %s: window times are not RFC 3339", r.Topic, r.Partition, r.Offset, r.Value)
		}
		if string(r.Key) != o.Key {
			return fmt.Errorf("output %s/%d@%d: record key %q, value key %q", r.Topic, r.Partition, r.Offset, r.Key, o.Key)
		}
		outs = append(outs, o)
		return nil
	})
	return outs, err
}

// ReadLate reads the late topic.
func ReadLate(ctx context.Context, conn []kgo.Opt, topic string) ([]Late, error) {
	var lates []Late
	err := kread.All(ctx, conn, topic, func(r *kgo.Record) error {
		h := map[string]string{}
		for _, x := range r.Headers {
			h[x.Key] = string(x.Value)
		}
		l := Late{Value: r.Value}
		part, err1 := strconv.ParseInt(h["pipeline.source.partition"], 10, 32)
		off, err2 := strconv.ParseInt(h["pipeline.source.offset"], 10, 64)
		var err3, err4, err5, err6 error
		l.WindowStart, err3 = time.Parse(time.RFC3339Nano, h["pipeline.late.window_start"])
		l.WindowEnd, err4 = time.Parse(time.RFC3339Nano, h["pipeline.late.window_end"])
		l.Watermark, err5 = time.Parse(time.RFC3339Nano, h["pipeline.late.watermark"])
		l.Windows, err6 = strconv.Atoi(h["pipeline.late.windows"])
		if err := errorsJoin(err1, err2, err3, err4, err5, err6); err != nil {
			return fmt.Errorf("late record %s/%d@%d %q: headers %v: %w", r.Topic, r.Partition, r.Offset, r.Value, h, err)
		}
		l.Partition, l.Offset = int32(part), off
		lates = append(lates, l)
		return nil
	})
	return lates, err
}

func errorsJoin(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// Report is what Compare found. OK when every list is empty.
type Report struct {
	Expected, Written, LateExpected, LateWritten int
	Missing, Unexpected, Duplicated              []Output
	LateMissing, LateUnexpected, LateDuplicated  []string // partition@offset
	LateWrong                                    []string // header or value not as the input says
}

// OK reports whether the outputs and the late topic are exactly the
// oracle's.
func (r Report) OK() bool {
	return len(r.Missing)+len(r.Unexpected)+len(r.Duplicated)+len(r.LateMissing)+len(r.LateUnexpected)+len(r.LateDuplicated)+len(r.LateWrong) == 0
}

func (r Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "windows: %d expected, %d written; late: %d expected, %d written", r.Expected, r.Written, r.LateExpected, r.LateWritten)
	list := func(name string, n int, items func(i int) string) {
		if n == 0 {
			return
		}
		fmt.Fprintf(&b, "; %d %s:", n, name)
		for i := range min(n, 3) {
			b.WriteString(" " + items(i))
		}
		if n > 3 {
			b.WriteString(" ...")
		}
	}
	outs := func(l []Output) func(int) string { return func(i int) string { return l[i].String() } }
	strs := func(l []string) func(int) string { return func(i int) string { return l[i] } }
	list("missing", len(r.Missing), outs(r.Missing))
	list("unexpected", len(r.Unexpected), outs(r.Unexpected))
	list("duplicated", len(r.Duplicated), outs(r.Duplicated))
	list("late missing", len(r.LateMissing), strs(r.LateMissing))
	list("late unexpected", len(r.LateUnexpected), strs(r.LateUnexpected))
	list("late duplicated", len(r.LateDuplicated), strs(r.LateDuplicated))
	list("late wrong", len(r.LateWrong), strs(r.LateWrong))
	return b.String()
}

// Compare judges what was written (outs, late) against the oracle of in:
// every expected window exactly once, nothing else; every late input
// exactly once in the late topic, with its value unchanged and the window
// its ts falls in, and never counted (the sums would differ).
func Compare(p Params, in []Input, outs []Output, late []Late) Report {
	wantOuts, wantLate := Oracle(p, in)
	r := Report{Expected: len(wantOuts), Written: len(outs), LateExpected: len(wantLate), LateWritten: len(late)}
	norm := func(o Output) Output {
		o.WindowStart, o.WindowEnd = o.WindowStart.UTC(), o.WindowEnd.UTC()
		return o
	}
	got := map[Output]int{}
	for _, o := range outs {
		got[norm(o)]++
	}
	for _, w := range wantOuts {
		switch n := got[norm(w)]; {
		case n == 0:
			r.Missing = append(r.Missing, w)
		case n > 1:
			r.Duplicated = append(r.Duplicated, w)
		}
		delete(got, norm(w))
	}
	for o := range got {
		r.Unexpected = append(r.Unexpected, o)
	}
	slices.SortFunc(r.Unexpected, compareOutputs)

	at := func(part int32, off int64) string { return fmt.Sprintf("%d@%d", part, off) }
	byPos := map[string]Input{}
	for _, l := range wantLate {
		byPos[at(l.Partition, l.Offset)] = l
	}
	seen := map[string]int{}
	for _, l := range late {
		pos := at(l.Partition, l.Offset)
		seen[pos]++
		want, ok := byPos[pos]
		switch {
		case !ok:
			r.LateUnexpected = append(r.LateUnexpected, pos)
		case string(want.Value) != string(l.Value):
			r.LateWrong = append(r.LateWrong, pos+": value changed")
		case !(l.WindowStart.UnixMilli() <= want.TS && want.TS < l.WindowEnd.UnixMilli()) || l.WindowEnd.Sub(l.WindowStart) != time.Duration(p.Size)*time.Millisecond || l.Windows != 1:
			r.LateWrong = append(r.LateWrong, fmt.Sprintf("%s: ts %d not in the window of its headers [%s, %s) (%d windows)", pos, want.TS, l.WindowStart, l.WindowEnd, l.Windows))
		case l.WindowEnd.UnixMilli()+p.AllowedLateness > l.Watermark.UnixMilli():
			r.LateWrong = append(r.LateWrong, fmt.Sprintf("%s: its window [%s, %s) is still open at the watermark of its headers (%s)", pos, l.WindowStart, l.WindowEnd, l.Watermark))
		}
	}
	for pos, n := range seen {
		if n > 1 {
			r.LateDuplicated = append(r.LateDuplicated, pos)
		}
	}
	for pos := range byPos {
		if seen[pos] == 0 {
			r.LateMissing = append(r.LateMissing, pos)
		}
	}
	for _, l := range [][]string{r.LateUnexpected, r.LateDuplicated, r.LateMissing, r.LateWrong} {
		slices.Sort(l)
	}
	return r
}

// Check reads the input, output and late topics and compares them.
func Check(ctx context.Context, conn []kgo.Opt, p Params, inputTopic, outputTopic, lateTopic string) (Report, error) {
	in, err := ReadInput(ctx, conn, inputTopic)
	if err != nil {
		return Report{}, err
	}
	outs, err := ReadOutputs(ctx, conn, outputTopic)
	if err != nil {
		return Report{}, err
	}
	late, err := ReadLate(ctx, conn, lateTopic)
	if err != nil {
		return Report{}, err
	}
	return Compare(p, in, outs, late), nil
}

// Generate makes perPartition records for each partition: n unique over
// all of them (1, 2, ...), ts advancing 10 ms per record from base in
// each partition, moved back by a random amount within
// MaxOutOfOrderness (so never late), except that, after a partition's
// first record, a lateFraction of them are put in a window already
// closed at the partition's watermark (so always late), and another
// lateFraction further behind the watermark than AllowedLateness but in
// a window still open (so counted: lateness is per window). Offsets are
// 0, 1, ... per partition, as written to an empty topic in order; Value
// is the JSON to write.
func Generate(seed int64, partitions int32, perPartition int, p Params, lateFraction float64, base int64) [][]Input {
	rng := rand.New(rand.NewPCG(uint64(seed), 0x77))
	out := make([][]Input, partitions)
	largest := make([]int64, partitions)
	floor := func(ts int64) int64 { return ts - ((ts%p.Size)+p.Size)%p.Size }
	n := int64(0)
	for i := range perPartition {
		for part := range partitions {
			n++
			ts := base + int64(i)*10 - rng.Int64N(p.MaxOutOfOrderness+1)
			// Windows starting at or after open are open at the
			// watermark: end + lateness > largest - max_out_of_orderness.
			bound := largest[part] - p.MaxOutOfOrderness - p.AllowedLateness
			open := floor(bound)
			switch x := rng.Float64(); {
			case i == 0:
			case x < lateFraction:
				ts = open - 1 - rng.Int64N(1000)
			case x < 2*lateFraction && bound > open:
				ts = open + rng.Int64N(bound-open)
			}
			if i == 0 || ts > largest[part] {
				largest[part] = ts
			}
			out[part] = append(out[part], Input{Partition: part, Offset: int64(i), N: n, TS: ts, Value: fmt.Appendf(nil, `{"n":%d,"ts":%d}`, n, ts)})
		}
	}
	return out
}
