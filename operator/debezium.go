package operator

import (
	"slices"
	"strings"
)

// Debezium change events (sources[].envelope: debezium). A Debezium
// connector writes one event per changed row: {"op", "before", "after",
// "source", "ts_ms", ...}, with op c (insert), u (update), d (delete), r
// (a snapshot read), t (truncate) or m (a message); in JSON with
// schemas enabled the event is the "payload" of {"schema", "payload"}. A
// delete is followed by a tombstone (a null value) for log compaction.
//
// Expressions see the event's fields (op, before.id, after.amount,
// source.table, ...), unwrapped from any {schema, payload}. An event
// written on unchanged (no map step) is the event itself, except that a
// delete becomes a tombstone with the event's key: what a compacted
// topic keyed by the row needs, and what Flink's debezium formats and
// Kafka Connect's ExtractNewRecordState (delete.handling.mode=none) make
// of it. Debezium's own tombstones are dropped (their delete already
// became one). An event without a known op goes to the dead letters
// (CodeDecode).

// debeziumOps are the op codes Debezium writes.
var debeziumOps = []string{"c", "u", "d", "r", "t", "m"}

// decodeDebezium decodes a JSON change event into r.
func (r *Record) decodeDebezium(d *decoder, step string) *RecordError {
	if r.Value == nil {
		r.fields, r.decoded, r.skip = map[string]any{}, true, true
		return nil
	}
	m, err := d.decodeObject(r.Value)
	if err != nil {
		return &RecordError{Step: step, Code: CodeDecode, Reason: err.Error()}
	}
	if p, ok := m["payload"]; ok && len(m) == 2 {
		if _, ok := m["schema"]; ok {
			switch p := p.(type) {
			case nil:
				r.fields, r.decoded, r.skip = map[string]any{}, true, true
				return nil
			case map[string]any:
				m = p
			default:
				return &RecordError{Step: step, Code: CodeDecode, Reason: "Debezium payload is not an object (got " + typeName(p) + ")"}
			}
		}
	}
	order := make([]string, 0, len(m))
	for k := range m {
		order = append(order, k)
	}
	slices.Sort(order)
	r.fields, r.order, r.decoded = m, order, true
	return r.debezium(step)
}

// debezium checks the decoded event in r.fields and marks a delete.
func (r *Record) debezium(step string) *RecordError {
	op, ok := r.fields["op"].(string)
	if !ok || !slices.Contains(debeziumOps, op) {
		return &RecordError{Step: step, Code: CodeDecode, Reason: "not a Debezium change event: op is " + describeOp(r.fields["op"]) + ", want one of " + strings.Join(debeziumOps, ", ")}
	}
	r.tombstone = op == "d"
	return nil
}

func describeOp(v any) string {
	if s, ok := v.(string); ok {
		return `"` + s + `"`
	}
	if v == nil {
		return "missing"
	}
	return "a " + typeName(v)
}
