package jobtest

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"time"
)

// Record is a record a job committed.
type Record struct {
	Topic     string
	Partition int32
	Offset    int64
	// Key and Value are nil when null.
	Key, Value []byte
	Timestamp  time.Time
	Headers    []Header
	// ValueSchema and KeySchema are the schema ids the value and key were
	// written with, in the wire format (0: not): Value and Key are then
	// what they read as, a string's text or any other value's JSON.
	ValueSchema, KeySchema int
}

// where names a written record in a diff.
func (r Record) where() string {
	w := fmt.Sprintf("%s/%d@%d", r.Topic, r.Partition, r.Offset)
	switch {
	case r.ValueSchema != 0 && r.KeySchema != 0:
		w += fmt.Sprintf(" (read with schema ids %d, key %d)", r.ValueSchema, r.KeySchema)
	case r.ValueSchema != 0:
		w += fmt.Sprintf(" (read with schema id %d)", r.ValueSchema)
	case r.KeySchema != 0:
		w += fmt.Sprintf(" (key read with schema id %d)", r.KeySchema)
	}
	return w
}

// header returns the value of the record's last header named k.
func (r Record) header(k string) ([]byte, bool) {
	for i := len(r.Headers) - 1; i >= 0; i-- {
		if r.Headers[i].Key == k {
			return r.Headers[i].Value, true
		}
	}
	return nil, false
}

// mismatch says how written record r differs from e, or "" when it
// matches: key, value, then partition, timestamp and headers when e
// gives them.
func mismatch(e *Expected, r Record) string {
	switch {
	case !sameKey(e.Key, r.Key):
		return fmt.Sprintf("the key: expected %s, written %s", keyLabel(e.Key), keyLabel(r.Key))
	case !e.Value.Matches(r.Value):
		if fields := fieldDiff(e.Value, r.Value); fields != "" {
			return "the value: " + fields
		}
		return "the value"
	case e.HasPartition && e.Partition != r.Partition:
		return fmt.Sprintf("the partition: expected %d, written %d", e.Partition, r.Partition)
	case e.HasTimestamp && !e.Timestamp.Equal(r.Timestamp):
		return fmt.Sprintf("the timestamp: expected %s, written %s", showTime(e.Timestamp), showTime(r.Timestamp))
	}
	for _, h := range e.Headers {
		got, ok := r.header(h.Key)
		switch {
		case !ok:
			return fmt.Sprintf("header %s: expected %s, the record has none", h.Key, showBytes(h.Value))
		case !bytes.Equal(got, h.Value) || (got == nil) != (h.Value == nil):
			return fmt.Sprintf("header %s: expected %s, written %s", h.Key, showBytes(h.Value), showBytes(got))
		}
	}
	return ""
}

func showTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

func sameKey(a, b []byte) bool { return (a == nil) == (b == nil) && bytes.Equal(a, b) }

// groupKey is a map key telling a null key from an empty one.
func groupKey(k []byte) string {
	if k == nil {
		return "\x00null"
	}
	return "=" + string(k)
}

func keyLabel(k []byte) string {
	if k == nil {
		return "no key"
	}
	return "key " + strconv.Quote(string(k))
}

// Diff is how one compared topic (or set of topics: every dead-letter
// topic of a job) differs from what was expected. A Diff with no Groups,
// Missing and Unexpected is a match.
type Diff struct {
	// Name is what the test file lists ("parity-sums", "dead_letters").
	Name string
	// Topics are the Kafka topics read for it.
	Topics []string
	Rule   Rule
	// Unlisted: dead letters or late records the case did not list, so
	// none were expected.
	Unlisted bool
	// Expected and Written count the records on either side.
	Expected, Written int
	// Groups are the keys (per_key, last_per_key) or partitions (exact)
	// whose records differ, in order: the expected ones first, as the
	// file lists them, then the ones only written.
	Groups []GroupDiff
	// Missing and Unexpected are the records expected and not written,
	// and written and not expected (unordered, and records without a key
	// spread over partitions under per_key).
	Missing    []*Expected
	Unexpected []Record
}

// OK reports whether nothing differs.
func (d *Diff) OK() bool { return len(d.Groups) == 0 && len(d.Missing) == 0 && len(d.Unexpected) == 0 }

// GroupDiff is one key's (or partition's) sequence, expected and written,
// which differ from record First (0-based) on.
type GroupDiff struct {
	Label    string
	Expected []*Expected
	Written  []Record
	First    int
	// Why says how the records at First differ when both exist.
	Why string
}

// Compare compares the records written to a topic with the expected ones
// under rule. partitions is how many partitions the written records came
// from (records without a key are ordered only within one).
func Compare(rule Rule, expected []*Expected, written []Record, partitions int) Diff {
	d := Diff{Rule: rule, Expected: len(expected), Written: len(written)}
	switch rule {
	case Unordered:
		d.Missing, d.Unexpected = matchUnordered(expected, written)
	case Exact:
		d.Groups = compareGroups(expected, written,
			func(e *Expected) string { return strconv.Itoa(int(e.Partition)) },
			func(r Record) string { return strconv.Itoa(int(r.Partition)) },
			func(e *Expected) string { return fmt.Sprintf("partition %d", e.Partition) },
			func(r Record) string { return fmt.Sprintf("partition %d", r.Partition) })
	case LastPerKey:
		d.Groups = compareGroups(expected, lastPerKey(written),
			func(e *Expected) string { return groupKey(e.Key) },
			func(r Record) string { return groupKey(r.Key) },
			func(e *Expected) string { return "the last value of " + keyLabel(e.Key) },
			func(r Record) string { return "the last value of " + keyLabel(r.Key) })
	default: // PerKey
		keyed := func(e *Expected) bool { return e.Key != nil }
		var noKeyExp []*Expected
		var noKeyWritten []Record
		if partitions > 1 {
			// Records without a key land on any partition: no order
			// between them to compare.
			noKeyExp = slices.DeleteFunc(slices.Clone(expected), keyed)
			expected = slices.DeleteFunc(slices.Clone(expected), func(e *Expected) bool { return !keyed(e) })
			noKeyWritten = slices.DeleteFunc(slices.Clone(written), func(r Record) bool { return r.Key != nil })
			written = slices.DeleteFunc(slices.Clone(written), func(r Record) bool { return r.Key == nil })
		}
		d.Groups = compareGroups(expected, written,
			func(e *Expected) string { return groupKey(e.Key) },
			func(r Record) string { return groupKey(r.Key) },
			func(e *Expected) string { return keyLabel(e.Key) },
			func(r Record) string { return keyLabel(r.Key) })
		d.Missing, d.Unexpected = matchUnordered(noKeyExp, noKeyWritten)
	}
	return d
}

// compareGroups splits both sides into groups and compares each group's
// sequences record by record.
func compareGroups(expected []*Expected, written []Record,
	expGroup func(*Expected) string, wGroup func(Record) string,
	expLabel func(*Expected) string, wLabel func(Record) string,
) []GroupDiff {
	var order []string
	labels := map[string]string{}
	exp := map[string][]*Expected{}
	got := map[string][]Record{}
	for _, e := range expected {
		g := expGroup(e)
		if _, seen := labels[g]; !seen {
			order, labels[g] = append(order, g), expLabel(e)
		}
		exp[g] = append(exp[g], e)
	}
	for _, r := range written {
		g := wGroup(r)
		if _, seen := labels[g]; !seen {
			order, labels[g] = append(order, g), wLabel(r)
		}
		got[g] = append(got[g], r)
	}
	var diffs []GroupDiff
	for _, g := range order {
		es, ws := exp[g], got[g]
		first, why := -1, ""
		for i := range max(len(es), len(ws)) {
			if i >= len(es) || i >= len(ws) {
				first = i
				break
			}
			if why = mismatch(es[i], ws[i]); why != "" {
				first = i
				break
			}
		}
		if first >= 0 {
			diffs = append(diffs, GroupDiff{Label: labels[g], Expected: es, Written: ws, First: first, Why: why})
		}
	}
	return diffs
}

// lastPerKey keeps each key's last written record, in the order of their
// first appearance.
func lastPerKey(written []Record) []Record {
	var out []Record
	at := map[string]int{}
	for _, r := range written {
		k := groupKey(r.Key)
		if i, ok := at[k]; ok {
			out[i] = r
			continue
		}
		at[k] = len(out)
		out = append(out, r)
	}
	return out
}

// matchUnordered pairs expected with written records, each used once, as
// many as possible (a maximum bipartite matching, so an expected record
// that leaves out a timestamp cannot take the record a stricter one
// needs), and returns the ones left over on either side, in order.
func matchUnordered(expected []*Expected, written []Record) (missing []*Expected, unexpected []Record) {
	// Candidates of each expected record; exact matches are rare to
	// share, so the augmenting paths stay short.
	cand := make([][]int, len(expected))
	for i, e := range expected {
		for j, r := range written {
			if mismatch(e, r) == "" {
				cand[i] = append(cand[i], j)
			}
		}
	}
	owner := make([]int, len(written)) // written j -> expected i, or -1
	for j := range owner {
		owner[j] = -1
	}
	var try func(i int, seen []bool) bool
	try = func(i int, seen []bool) bool {
		for _, j := range cand[i] {
			if seen[j] {
				continue
			}
			seen[j] = true
			if owner[j] < 0 || try(owner[j], seen) {
				owner[j] = i
				return true
			}
		}
		return false
	}
	matched := make([]bool, len(expected))
	for i := range expected {
		matched[i] = try(i, make([]bool, len(written)))
	}
	for i, e := range expected {
		if !matched[i] {
			missing = append(missing, e)
		}
	}
	for j, r := range written {
		if owner[j] < 0 {
			unexpected = append(unexpected, r)
		}
	}
	return missing, unexpected
}
