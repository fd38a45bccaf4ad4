package engine

import (
	"bytes"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/operator"
	"github.com/eoflow/pipeline/state"
)

// groupPlan compiles the job file at path in the given scale mode, with
// the group-mode shuffle Job.New would give it.
func groupPlan(t *testing.T, path, mode string) *plan {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cfg := parseConfig(t, data, map[string]string{"SCALE_MODE": mode, "SCALE_PARTITIONS": "4", "ADMIN_LISTEN": "off"})
	p, err := compile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	p.shuffle = newShuffle(cfg)
	return p
}

// routeOne routes rec and returns what came out, for every worker, its
// repartition bundles sent.
func routeOne(r *router, rec *kgo.Record) []message {
	out := make([][]message, r.workers)
	r.route(rec, out)
	r.flushShuffle(out)
	return slices.Concat(out...)
}

// stepsIn is how many records reached each stateless step on r since the
// last call.
func stepsIn(r *router, steps int) []int64 {
	counts := make([]operator.StepCount, steps)
	r.branches.TakeStepCounts(counts)
	in := make([]int64, steps)
	for i, c := range counts {
		in[i] = c.In
	}
	return in
}

// TestGroupShuffleRunsStepsOnce: in group mode the stateless steps run
// where a record is read, once; the repartition record is one compact
// value (no headers, not the input again through the steps), and the
// keyed side's operator gets the group key and the values the source side
// evaluated, adding up to what single mode adds, with the input as read
// for its dead letters.
func TestGroupShuffleRunsStepsOnce(t *testing.T) {
	for _, job := range []string{"../bench/jobs/keyed-sum.yaml", "../examples/parity-sum/config.yaml"} {
		t.Run(job, func(t *testing.T) {
			g := groupPlan(t, job, "group")
			single := groupPlan(t, job, "single")
			src, dst := g.newRouter(2), g.newRouter(2)
			ref := single.newRouter(2)
			agg := g.targets[0].agg.Clone()
			st, want := agg.NewState(), agg.NewState()
			for i, v := range []string{
				`{"key":"k1","amount":5,"ts":100,"n":4,"pad":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}`,
				`{"key":"k1","amount":-7,"ts":101,"n":6}`,
				`{"key":"k1","amount":2.5,"ts":"late","n":9}`,
			} {
				in := &kgo.Record{Topic: g.cfg.Sources[0].Topics[0], Partition: 2, Offset: int64(10 + i), Timestamp: time.UnixMilli(1000),
					Key: []byte("input-key"), Value: []byte(v), Headers: []kgo.RecordHeader{{Key: "trace", Value: []byte("t1")}}}
				var rep *kgo.Record
				for _, m := range routeOne(src, in) {
					if m.kind == msgShuffle {
						rep = m.rec
					}
				}
				if rep == nil {
					t.Fatalf("input %d: no repartition record", i)
				}
				if len(rep.Headers) != 0 || len(rep.Key) != 0 || len(rep.Value) == 0 || rep.Value[0] != shuffleMagic {
					t.Fatalf("input %d: repartition record %+v: want one binary value, no key, no headers", i, rep)
				}
				msgs := routeOne(dst, rep)
				if len(msgs) != 1 || msgs[0].kind != msgRecord || msgs[0].op == nil {
					t.Fatalf("input %d: keyed side got %+v, want one record for the aggregate", i, msgs)
				}
				m := msgs[0]
				if m.op.Value != nil {
					t.Fatalf("input %d: the keyed side's record holds a value to run steps on again: %s", i, m.op.Value)
				}
				if m.rec.Topic != in.Topic || m.rec.Partition != in.Partition || m.rec.Offset != in.Offset ||
					!bytes.Equal(m.rec.Key, in.Key) || !bytes.Equal(m.rec.Value, in.Value) || !m.rec.Timestamp.Equal(in.Timestamp) ||
					len(m.rec.Headers) != 1 || m.rec.Headers[0].Key != "trace" {
					t.Fatalf("input %d: the keyed side's input %+v is not the one read %+v", i, m.rec, in)
				}
				if _, err := agg.Add(st, m.op); err != nil {
					t.Fatalf("input %d: %v", i, err)
				}
				for _, sm := range routeOne(ref, in) {
					if sm.kind == msgRecord {
						if _, err := agg.Add(want, sm.op); err != nil {
							t.Fatalf("input %d (single mode): %v", i, err)
						}
					}
				}
				if m.op.GroupKey != "k1" && !strings.Contains(job, "parity") {
					t.Fatalf("input %d: group key %q", i, m.op.GroupKey)
				}
				if got, w := string(st.Output(m.op.GroupKey)), string(want.Output(m.op.GroupKey)); got != w {
					t.Fatalf("input %d: group mode's aggregate %s, single mode's %s", i, got, w)
				}
			}
			steps := len(g.cfg.Steps)
			srcIn, dstIn := stepsIn(src, steps), stepsIn(dst, steps)
			if srcIn[0] != 3 || slices.ContainsFunc(dstIn, func(n int64) bool { return n != 0 }) {
				t.Fatalf("records into each step: %v on the source side, %v on the keyed side; want 3 and none", srcIn, dstIn)
			}
		})
	}
}

// TestGroupShuffleMalformedIsADeadLetter: a repartition record this job's
// source side did not write (an older version's, garbage, or one for an
// operator the job does not have) becomes a dead letter saying why.
func TestGroupShuffleMalformedIsADeadLetter(t *testing.T) {
	g := groupPlan(t, "../bench/jobs/keyed-sum.yaml", "group")
	r := g.newRouter(2)
	other := shuffledCases()[0]
	other.target = 5
	for _, c := range []struct {
		name  string
		value []byte
		want  string
	}{
		{"the whole input, as before", []byte(`{"key":"k1","amount":5}`), "no magic byte"},
		{"another job's operator", appendShuffled(nil, &other), "operator 5 is not a keyed operator of this job"},
		{"cut short", appendShuffled(nil, &shuffledCases()[0])[:9], "malformed repartition record"},
	} {
		t.Run(c.name, func(t *testing.T) {
			msgs := routeOne(r, &kgo.Record{Topic: g.shuffle.repartition, Partition: 1, Offset: 3, Value: c.value})
			if len(msgs) != 1 || msgs[0].kind != msgDeadLetter {
				t.Fatalf("got %+v, want one dead letter", msgs)
			}
			var reason string
			for _, h := range msgs[0].rec.Headers {
				if strings.HasSuffix(h.Key, "reason") {
					reason = string(h.Value)
				}
			}
			if !strings.Contains(reason, c.want) {
				t.Fatalf("reason %q, want %q", reason, c.want)
			}
		})
	}
}

// shuffleAll routes recs on r as one poll and returns what came out, its
// repartition bundles sent once, after the last.
func shuffleAll(r *router, recs []*kgo.Record) []message {
	out := make([][]message, r.workers)
	for _, rec := range recs {
		r.route(rec, out)
	}
	r.flushShuffle(out)
	return slices.Concat(out...)
}

// repartitioned are the repartition records among msgs.
func repartitioned(msgs []message) []*kgo.Record {
	var recs []*kgo.Record
	for _, m := range msgs {
		if m.kind == msgShuffle {
			recs = append(recs, m.rec)
		}
	}
	return recs
}

// keyedSumInputs are n inputs of the keyed sum on partition 1 of topic,
// over keys keys, each padded with pad bytes.
func keyedSumInputs(topic string, n, keys, pad int) []*kgo.Record {
	recs := make([]*kgo.Record, n)
	for i := range recs {
		v := fmt.Sprintf(`{"key":"k%d","amount":%d,"ts":%d,"pad":%q}`, i%keys, i, i, strings.Repeat("x", pad))
		recs[i] = &kgo.Record{Topic: topic, Partition: 1, Offset: int64(i), Timestamp: time.UnixMilli(int64(1000 + i)), Value: []byte(v)}
	}
	return recs
}

// TestGroupShuffleBundlesAPoll: the source side writes the inputs of one
// poll bound for one repartition partition as one Kafka record, a bundle;
// the keyed side reads every input from the bundles, each with its own
// source position, in the order read.
func TestGroupShuffleBundlesAPoll(t *testing.T) {
	g := groupPlan(t, "../bench/jobs/keyed-sum.yaml", "group")
	src, dst := g.newRouter(2), g.newRouter(2)
	in := keyedSumInputs(g.cfg.Sources[0].Topics[0], 200, 50, 0)
	reps := repartitioned(shuffleAll(src, in))
	if len(reps) == 0 || len(reps) > g.shuffle.partitions {
		t.Fatalf("%d repartition records for %d inputs, want one per repartition partition (%d)", len(reps), len(in), g.shuffle.partitions)
	}
	seen := map[int64]bool{}
	for _, rep := range reps {
		if !isBundle(rep.Value) || len(rep.Headers) != 0 {
			t.Fatalf("repartition record %+v: want a bundle without headers", rep)
		}
		last := int64(-1)
		var newest time.Time
		for _, m := range routeOne(dst, rep) {
			if m.kind != msgRecord || m.op == nil {
				t.Fatalf("keyed side got %+v, want records for the aggregate", m)
			}
			if m.rec.Offset <= last || seen[m.rec.Offset] {
				t.Fatalf("input at offset %d after %d: out of order, or twice", m.rec.Offset, last)
			}
			if q := g.shuffle.partitionOf(state.KeyGroupOf([]byte(m.op.GroupKey), g.shuffle.groups)); q != rep.Partition {
				t.Fatalf("key %q of partition %d in the bundle of partition %d", m.op.GroupKey, q, rep.Partition)
			}
			src := in[m.rec.Offset]
			if m.rec.Topic != src.Topic || m.rec.Partition != src.Partition || !bytes.Equal(m.rec.Value, src.Value) {
				t.Fatalf("the keyed side's input %+v is not the one read %+v", m.rec, src)
			}
			last, seen[m.rec.Offset] = m.rec.Offset, true
			if m.rec.Timestamp.After(newest) {
				newest = m.rec.Timestamp
			}
		}
		if !rep.Timestamp.Equal(newest) {
			t.Fatalf("bundle timestamp %v, want its newest input's %v", rep.Timestamp, newest)
		}
	}
	if len(seen) != len(in) {
		t.Fatalf("the keyed side read %d of %d inputs", len(seen), len(in))
	}
	if again := repartitioned(shuffleAll(src, nil)); len(again) != 0 {
		t.Fatalf("%d bundles sent twice", len(again))
	}
}

// TestGroupShuffleBundleSize: a bundle holds at most maxBundleBytes, and
// is sent only when the next frame would take it past them; an input
// whose frame alone is larger is a bundle of its own.
func TestGroupShuffleBundleSize(t *testing.T) {
	g := groupPlan(t, "../bench/jobs/keyed-sum.yaml", "group")
	src := g.newRouter(2)
	topic := g.cfg.Sources[0].Topics[0]
	in := keyedSumInputs(topic, 40, 1, 10_000) // one key: one partition
	huge := keyedSumInputs(topic, 1, 1, 2*maxBundleBytes)[0]
	huge.Offset = 40
	in = append(in[:20], append([]*kgo.Record{huge}, in[20:]...)...)
	reps := repartitioned(shuffleAll(src, in))
	frames := 0
	for i, rep := range reps {
		n := countFrames(t, rep)
		if i > 0 {
			// Full: a bundle was sent only when the next frame would not fit.
			prev, _ := shuffleFrames(reps[i-1].Value, nil)
			next, _ := shuffleFrames(rep.Value, nil)
			if len(appendFrame(slices.Clone(reps[i-1].Value), next[0])) <= maxBundleBytes {
				t.Fatalf("bundle %d (%d frames, %d bytes) was sent with room for the first frame of the next", i-1, len(prev), len(reps[i-1].Value))
			}
		}
		frames += n
		if n > 1 && len(rep.Value) > maxBundleBytes {
			t.Fatalf("a bundle of %d frames takes %d bytes, more than %d", n, len(rep.Value), maxBundleBytes)
		}
		if len(rep.Value) > maxBundleBytes && n != 1 {
			t.Fatalf("the huge input shares its bundle with %d others", n-1)
		}
	}
	if frames != len(in) || len(reps) < 1+len(in)*10_000/maxBundleBytes {
		t.Fatalf("%d frames in %d bundles, want %d frames in bundles of at most %d bytes", frames, len(reps), len(in), maxBundleBytes)
	}
}

func countFrames(t *testing.T, rep *kgo.Record) int {
	t.Helper()
	frames, err := shuffleFrames(rep.Value, nil)
	if err != nil {
		t.Fatal(err)
	}
	return len(frames)
}

// TestGroupShuffleBundleMalformed: a frame of a bundle that does not
// parse is a dead letter of its own, saying which frame, with the frame
// as its value, and the bundle's other frames go on; a bundle whose
// framing does not parse is one dead letter; a version-1 record alone
// (a job upgraded with records of the version before in its repartition
// topic) is read as before.
func TestGroupShuffleBundleMalformed(t *testing.T) {
	g := groupPlan(t, "../bench/jobs/keyed-sum.yaml", "group")
	src, dst := g.newRouter(2), g.newRouter(2)
	in := keyedSumInputs(g.cfg.Sources[0].Topics[0], 2, 1, 0)
	reps := repartitioned(shuffleAll(src, in))
	if len(reps) != 1 {
		t.Fatalf("%d bundles of one key, want 1", len(reps))
	}
	frames, err := shuffleFrames(reps[0].Value, nil)
	if err != nil || len(frames) != 2 {
		t.Fatalf("frames %q, %v", frames, err)
	}
	garbage := []byte{shuffleMagic, shuffleVersion, 0, 0, 100}
	bundle := appendFrame(appendFrame(appendFrame(nil, frames[0]), garbage), frames[1])
	kinds := func(msgs []message) (recs int, dls []*kgo.Record) {
		for _, m := range msgs {
			switch m.kind {
			case msgRecord:
				recs++
			case msgDeadLetter:
				dls = append(dls, m.rec)
			}
		}
		return recs, dls
	}
	at := func(v []byte) *kgo.Record {
		return &kgo.Record{Topic: g.shuffle.repartition, Partition: reps[0].Partition, Offset: 7, Value: v}
	}

	recs, dls := kinds(routeOne(dst, at(bundle)))
	if recs != 2 || len(dls) != 1 || !bytes.Equal(dls[0].Value, garbage) || !strings.Contains(deadLetterReason(dls[0]), "frame 2 of 3 of a bundle") {
		t.Fatalf("%d records and dead letters %+v; want 2, and one of frame 2 with the frame as its value", recs, dls)
	}
	recs, dls = kinds(routeOne(dst, at(bundle[:len(bundle)-1])))
	if recs != 0 || len(dls) != 1 || !bytes.Equal(dls[0].Value, bundle[:len(bundle)-1]) || !strings.Contains(deadLetterReason(dls[0]), "after 2 whole frames") {
		t.Fatalf("a bundle cut short: %d records and dead letters %+v; want none, and the bundle one dead letter", recs, dls)
	}
	for i, f := range frames {
		if recs, dls := kinds(routeOne(dst, at(f))); recs != 1 || len(dls) != 0 {
			t.Fatalf("version-1 record %d alone: %d records, dead letters %+v", i, recs, dls)
		}
	}
}

// deadLetterReason is the reason header of a dead letter.
func deadLetterReason(dl *kgo.Record) string {
	for _, h := range dl.Headers {
		if strings.HasSuffix(h.Key, "reason") {
			return string(h.Value)
		}
	}
	return ""
}
