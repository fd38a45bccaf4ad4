package paritycheck

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/internal/kread"
)

// Output is one output record of the job.
type Output struct {
	Key   string `json:"key"`
	Count int64  `json:"count"`
	Sum   int64  `json:"sum"`
}

// Read returns the committed outputs of topic per key, in log order (all
// outputs of one key share a record key, hence a partition).
func Read(ctx context.Context, conn []kgo.Opt, topic string) (map[string][]Output, error) {
	out := map[string][]Output{}
	err := kread.All(ctx, conn, topic, func(r *kgo.Record) error {
		var o Output
		if err := json.Unmarshal(r.Value, &o); err != nil {
			return fmt.Errorf("output %s/%d@%d %q: %w", r.Topic, r.Partition, r.Offset, r.Value, err)
		}
		if string(r.Key) != o.Key {
			return fmt.Errorf("output %s/%d@%d: record key %q, value key %q", r.Topic, r.Partition, r.Offset, r.Key, o.Key)
		}
		out[o.Key] = append(out[o.Key], o)
		return nil
	})
	return out, err
}

// KeyOf is the key a job's aggregate files input number x under.
type KeyOf func(x int64) string

// Parity is parity-sum's key: "odd" or "even".
func Parity(x int64) string {
	if x%2 == 0 {
		return "even"
	}
	return "odd"
}

// ExpectedBy is the exact final output of each key for inputs 1..n
// summed by keyOf.
func ExpectedBy(n int64, keyOf KeyOf) map[string]Output {
	out := map[string]Output{}
	for x := int64(1); x <= n; x++ {
		k := keyOf(x)
		o := out[k]
		o.Key, o.Count, o.Sum = k, o.Count+1, o.Sum+x
		out[k] = o
	}
	return out
}

// Expected is the exact final output of each parity for inputs 1..n.
func Expected(n int64) map[string]Output {
	odd, even := (n+1)/2, n/2
	return map[string]Output{
		"odd":  {Key: "odd", Count: odd, Sum: odd * odd},           // 1+3+...+(2k-1) = k²
		"even": {Key: "even", Count: even, Sum: even * (even + 1)}, // 2+4+...+2k = k(k+1)
	}
}

// Report says what a run lost and duplicated, per key.
type Report struct {
	N int64
	// want is the exact final output of each key.
	want map[string]Output
	// Outputs is how many outputs were read, per key.
	Outputs map[string]int
	// Final is the last output per key.
	Final map[string]Output
	// Missing counts the numbers (inputs) no output reflects; Duplicated
	// counts the extra outputs of numbers reflected more than once.
	Missing, Duplicated int64
	// OutOfOrder counts outputs whose count did not follow the previous
	// one by exactly one.
	OutOfOrder int64
	// WrongValues counts outputs whose other values (JudgeAvro's
	// amounts) are not what their count and sum say.
	WrongValues int64
	// Problems holds the first few specific findings, for messages.
	Problems []string
}

// Exact reports whether the run is exactly the failure-free result.
func (r *Report) Exact() bool {
	if r.Missing != 0 || r.Duplicated != 0 || r.OutOfOrder != 0 || r.WrongValues != 0 {
		return false
	}
	for k, want := range r.want {
		if want.Count > 0 && r.Final[k] != want {
			return false
		}
	}
	return true
}

// StateExact reports whether the final values are exact, whatever was
// repeated on the way (what at_least_once promises for state).
func (r *Report) StateExact() bool {
	if r.WrongValues != 0 {
		return false
	}
	for k, want := range r.want {
		if want.Count > 0 && r.Final[k] != want {
			return false
		}
	}
	return true
}

func (r *Report) String() string {
	keys := make([]string, 0, len(r.Final))
	for k := range r.Final {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	fmt.Fprintf(&b, "n=%d missing=%d duplicated=%d out_of_order=%d", r.N, r.Missing, r.Duplicated, r.OutOfOrder)
	if r.WrongValues != 0 {
		fmt.Fprintf(&b, " wrong_values=%d", r.WrongValues)
	}
	for _, k := range keys {
		fmt.Fprintf(&b, " %s:{outputs=%d final count=%d sum=%d}", k, r.Outputs[k], r.Final[k].Count, r.Final[k].Sum)
	}
	if len(r.Problems) > 0 {
		fmt.Fprintf(&b, "; first problems: %s", strings.Join(r.Problems, "; "))
	}
	return b.String()
}

// Judge checks parity-sum's every_record outputs of inputs 1..n.
func Judge(outputs map[string][]Output, n int64) *Report { return JudgeBy(outputs, n, Parity) }

// JudgeBy checks the every_record outputs of a running count and sum by
// keyOf over inputs 1..n: every output adds one input of its key to the
// output before it, every input is added once, and the last outputs are
// the exact totals.
func JudgeBy(outputs map[string][]Output, n int64, keyOf KeyOf) *Report {
	want := ExpectedBy(n, keyOf)
	r := &Report{N: n, want: want, Outputs: map[string]int{}, Final: map[string]Output{}}
	note := func(format string, args ...any) {
		if len(r.Problems) < 5 {
			r.Problems = append(r.Problems, fmt.Sprintf(format, args...))
		}
	}
	for key, outs := range outputs {
		if _, ok := want[key]; !ok {
			note("unexpected key %q", key)
			continue
		}
		r.Outputs[key] = len(outs)
		r.Final[key] = outs[len(outs)-1]
		// seen[x] counts how often number x was added. Each output adds
		// one number to the output of count-1 before it; after a replay
		// (at_least_once) or a reset (at_most_once: state lost, counts
		// start at 1 again) that is not the previous output but the
		// latest one with count-1, so sumAt remembers those.
		seen := map[int64]int{}
		sumAt := map[int64]int64{0: 0}
		prev := Output{Key: key}
		for i, o := range outs {
			if o.Count != prev.Count+1 {
				r.OutOfOrder++
				note("%s output %d: count %d after %d", key, i, o.Count, prev.Count)
			}
			base, ok := sumAt[o.Count-1]
			d := o.Sum - base
			switch {
			case !ok:
				note("%s output %d: count %d with no output of count %d before it", key, i, o.Count, o.Count-1)
			case d <= 0 || d > n || keyOf(d) != key:
				note("%s output %d: sum %d after %d is not plus a number of key %s", key, i, o.Sum, base, key)
			default:
				seen[d]++
			}
			sumAt[o.Count] = o.Sum
			prev = o
		}
		for x := int64(1); x <= n; x++ {
			if keyOf(x) != key {
				continue
			}
			switch c := seen[x]; {
			case c == 0:
				r.Missing++
			case c > 1:
				r.Duplicated += int64(c - 1)
			}
		}
	}
	for _, key := range slices.Sorted(maps.Keys(want)) {
		if _, ok := outputs[key]; !ok && want[key].Count > 0 {
			r.Missing += want[key].Count
			note("no %s output at all", key)
		}
	}
	return r
}
