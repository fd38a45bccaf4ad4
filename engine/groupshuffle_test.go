package engine

import (
	"bytes"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/operator"
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

// routeOne routes rec and returns what came out, for every worker.
func routeOne(r *router, rec *kgo.Record) []message {
	out := make([][]message, r.workers)
	r.route(rec, out)
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
