package operator

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/eoflow/pipeline/config"
)

func TestTableApply(t *testing.T) {
	tb := NewTable(config.Table{ID: "customers", Format: config.FormatJSON, KeyFormat: config.FormatRaw})
	apply := func(key, value string, null bool) {
		t.Helper()
		var v []byte
		if !null {
			v = []byte(value)
		}
		if skip, detail := tb.Apply([]byte(key), v); skip != "" {
			t.Fatalf("Apply(%s, %s) skipped: %s (%s)", key, value, skip, detail)
		}
	}
	apply("c1", `{"tier": "gold"}`, false)
	apply("c2", `{"tier": "silver", "n": 7}`, false)
	apply("c1", `{"tier": "platinum"}`, false) // the latest value wins
	apply("c3", `"just text"`, false)          // any JSON value
	apply("c2", "", true)                      // a tombstone deletes
	apply("c9", "", true)                      // a tombstone of a key never seen
	if got := tb.Len(); got != 2 {
		t.Errorf("Len = %d, want 2 (c1, c3)", got)
	}
	if got, want := tb.Bytes(), int64(len("c1")+len(`{"tier": "platinum"}`)+len("c3")+len(`"just text"`)); got != want {
		t.Errorf("Bytes = %d, want %d: the latest values' keys and values", got, want)
	}
	if v, ok := tb.Lookup("c1"); !ok || v.(map[string]any)["tier"] != "platinum" {
		t.Errorf("c1 = %v, %v; want the latest value", v, ok)
	}
	if v, ok := tb.Lookup("c2"); ok {
		t.Errorf("c2 = %v after its tombstone; want none", v)
	}
	if v, ok := tb.Lookup("c3"); !ok || v != "just text" {
		t.Errorf("c3 = %v, %v", v, ok)
	}
	// What cannot be applied changes nothing.
	for _, c := range []struct {
		key, value []byte
		want       SkipReason
	}{
		{nil, []byte(`{}`), SkipNoKey},
		{[]byte("c1"), []byte(`{"tier": `), SkipDecode},
	} {
		if skip, _ := tb.Apply(c.key, c.value); skip != c.want {
			t.Errorf("Apply(%q, %q) = %q, want %q", c.key, c.value, skip, c.want)
		}
	}
	if v, _ := tb.Lookup("c1"); v.(map[string]any)["tier"] != "platinum" {
		t.Errorf("a value that does not decode replaced c1: %v", v)
	}
}

// TestTableCheck: Check says what Apply would, reason and error alike,
// and changes nothing (a kept table checks records it applied already).
func TestTableCheck(t *testing.T) {
	tb := NewTable(config.Table{ID: "t", Format: config.FormatJSON, KeyFormat: config.FormatJSON})
	if skip, d := tb.Apply([]byte(`"c1"`), []byte(`{"tier": "gold"}`)); skip != "" {
		t.Fatalf("Apply: %s %s", skip, d)
	}
	for _, c := range []struct {
		key, value []byte
		want       SkipReason
	}{
		{[]byte(`"c1"`), []byte(`{"tier": "silver"}`), ""},
		{[]byte(`"c1"`), nil, ""},
		{nil, []byte(`{}`), SkipNoKey},
		{[]byte(`{"id": 1}`), []byte(`{}`), SkipKey},
		{[]byte(`"c1"`), []byte(`{"tier": `), SkipDecode},
	} {
		skip, rerr := tb.Check(c.key, c.value)
		if skip != c.want || (skip == "") != (rerr == nil) {
			t.Errorf("Check(%q, %q) = %q, %v; want %q", c.key, c.value, skip, rerr, c.want)
		}
		// Apply on a copy of the table agrees, reason and error.
		cp := NewTable(config.Table{ID: "t", Format: config.FormatJSON, KeyFormat: config.FormatJSON})
		if askip, aerr := cp.Apply(c.key, c.value); askip != skip || (rerr != nil && (aerr == nil || aerr.Reason != rerr.Reason)) {
			t.Errorf("Apply(%q, %q) = %q, %v; Check said %q, %v", c.key, c.value, askip, aerr, skip, rerr)
		}
	}
	if v, ok := tb.Lookup("c1"); tb.Len() != 1 || !ok || v.(map[string]any)["tier"] != "gold" {
		t.Errorf("after Check: %d keys, c1 = %v, %v; want c1 still gold", tb.Len(), v, ok)
	}
}

func TestTableKeyFormats(t *testing.T) {
	js := NewTable(config.Table{ID: "t", Format: config.FormatRaw, KeyFormat: config.FormatJSON})
	for _, c := range []struct{ key, value string }{{`"c1"`, "a"}, {`42`, "b"}, {`true`, "c"}} {
		if skip, d := js.Apply([]byte(c.key), []byte(c.value)); skip != "" {
			t.Fatalf("Apply(%s): %s %s", c.key, skip, d)
		}
	}
	for k, want := range map[string]string{"c1": "a", "42": "b", "true": "c"} {
		if v, ok := js.Lookup(k); !ok || v != want {
			t.Errorf("json key %s = %v, %v; want %q (raw values are text)", k, v, ok, want)
		}
	}
	for _, bad := range []string{`{"id": 1}`, `c1`} {
		if skip, _ := js.Apply([]byte(bad), []byte("x")); skip != SkipKey {
			t.Errorf("json key %s: skip %q, want %q", bad, skip, SkipKey)
		}
	}
	raw := NewTable(config.Table{ID: "t", Format: config.FormatJSON, KeyFormat: config.FormatRaw})
	raw.Apply([]byte(`"c1"`), []byte(`1`))
	if _, ok := raw.Lookup("c1"); ok {
		t.Error(`a raw key "c1" (with its quotes) was found as c1`)
	}
}

// counts counts a join's lookups.
type counts struct {
	mu            sync.Mutex
	matched, miss int
}

func (c *counts) Joined(matched bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if matched {
		c.matched++
	} else {
		c.miss++
	}
}

const joinJob = `name: job
kafka:
  brokers: [localhost:9092]
sources:
  - id: orders
    topics: [orders]
tables:
  - {id: customers, topic: customers}
steps:
  - id: enrich
    join: {table: customers, key: customer, as: c, how: ${HOW}}
  - key_by: 'c == nil ? "none" : c.tier'
  - id: totals
    aggregate:
      values:
        count: count()
        sum: 'sum(n * (c?.factor ?? 1))'
sinks:
  - topic: out
`

func joinConfig(t *testing.T, how string) *config.Config {
	t.Helper()
	cfg, err := config.Parse("job.yaml", []byte(strings.Replace(joinJob, "${HOW}", how, 1)), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func customers(t *testing.T) *Table {
	t.Helper()
	tb := NewTable(config.Table{ID: "customers", Format: config.FormatJSON, KeyFormat: config.FormatRaw})
	tb.Apply([]byte("c1"), []byte(`{"tier": "gold", "factor": 10}`))
	tb.Apply([]byte("c2"), []byte(`{"tier": "silver"}`))
	tb.Apply([]byte("7"), []byte(`{"tier": "seven"}`))
	tb.Apply([]byte("c3"), []byte(`{"tier": "gone"}`))
	tb.Apply([]byte("c3"), nil)
	return tb
}

// TestJoinInChain runs a linear job with a join: the key looked up, the
// table's value read by later steps, no match dropped (inner) or read as
// nil (left), and the record's own value untouched.
func TestJoinInChain(t *testing.T) {
	for _, how := range []string{"inner", "left"} {
		t.Run(how, func(t *testing.T) {
			g, err := CompileGraph(joinConfig(t, how))
			if err != nil {
				t.Fatal(err)
			}
			n := &counts{}
			if err := g.BindTables(map[string]*Table{"customers": customers(t)}, func(step string) JoinCounter {
				if step != "enrich" {
					t.Errorf("counter for step %q", step)
				}
				return n
			}); err != nil {
				t.Fatal(err)
			}
			c := g.NewBranches().Linear()
			agg := g.Targets()[0].Agg.Clone()
			for _, tc := range []struct {
				value   string
				key     string // "" : dropped
				sum     int64
				missing bool
			}{
				{`{"customer": "c1", "n": 2}`, "gold", 20, false},
				{`{"customer": "c2", "n": 3}`, "silver", 3, false},
				{`{"customer": 7, "n": 4}`, "seven", 4, false},                  // a number's text is its key
				{`{"customer": "c3", "n": 5}`, "none", 5, true},                 // tombstoned
				{`{"customer": "c4", "n": 6}`, "none", 6, true},                 // never there
				{`{"customer": null, "n": 8}`, "none", 8, true},                 // nil matches nothing
				{`{"c": "mine", "customer": "c2", "n": 1}`, "silver", 1, false}, // the join hides the field c
			} {
				r := jsonRecord(tc.value)
				keep, rerr := c.Process(r)
				if rerr != nil {
					t.Fatalf("%s: %v", tc.value, rerr)
				}
				if how == "inner" && tc.missing {
					if keep {
						t.Errorf("%s: kept by an inner join without a match", tc.value)
					}
					continue
				}
				if !keep || r.GroupKey != tc.key {
					t.Errorf("%s: keep %v, key %q; want key %q", tc.value, keep, r.GroupKey, tc.key)
					continue
				}
				// The aggregate reads the joined value too.
				st := agg.NewState()
				if _, aerr := agg.Add(st, r); aerr != nil {
					t.Fatalf("%s: %v", tc.value, aerr)
				}
				if out := string(st.Output(r.GroupKey)); !strings.Contains(out, fmt.Sprintf(`"sum":%d`, tc.sum)) {
					t.Errorf("%s: output %s, want sum %d", tc.value, out, tc.sum)
				}
				// The record's value is what was read.
				if v, verr := r.AppendValue(nil, config.FormatJSON); verr != nil || string(v) != strings.ReplaceAll(strings.ReplaceAll(tc.value, ": ", ":"), ", ", ",") {
					t.Errorf("%s: written as %s, %v", tc.value, v, verr)
				}
			}
			wantMiss := 3
			if n.matched != 4 || n.miss != wantMiss {
				t.Errorf("counted %d matched, %d missed; want 4, %d", n.matched, n.miss, wantMiss)
			}
		})
	}
}

func TestJoinKeyOfTheWrongType(t *testing.T) {
	g, err := CompileGraph(joinConfig(t, "left"))
	if err != nil {
		t.Fatal(err)
	}
	if err := g.BindTables(map[string]*Table{"customers": customers(t)}, nil); err != nil {
		t.Fatal(err)
	}
	c := g.NewBranches().Linear()
	_, rerr := c.Process(jsonRecord(`{"customer": {"id": "c1"}, "n": 1}`))
	if rerr == nil || rerr.Code != CodeType || rerr.Step != "steps[0].join.key" {
		t.Errorf("an object as key: %v; want a type error at steps[0].join.key", rerr)
	}
	_, rerr = c.Process(jsonRecord(`{"n": 1}`))
	if rerr == nil || rerr.Code != CodeMissingField {
		t.Errorf("no key field: %v; want missing_field", rerr)
	}
}

// A join read by two branches of a graph shows each its value; the
// branch without the join never sees it.
func TestJoinInGraph(t *testing.T) {
	cfg := parseJob(t, `name: job
kafka:
  brokers: [localhost:9092]
sources:
  - id: orders
    topics: [orders]
tables:
  - {id: customers, topic: customers}
steps:
  - {id: enrich, join: {table: customers, key: customer, as: c}}
  - {id: by-tier, key_by: c.tier}
  - {id: tiers, aggregate: {values: {n: count()}}}
  - {id: gold, from: enrich, filter: 'c.tier == "gold"'}
  - {id: all, from: orders, filter: 'n > 0'}
sinks:
  - {from: tiers, topic: tiers}
  - {from: gold, topic: gold, key: c.tier}
  - {from: all, topic: all}
`)
	g, err := CompileGraph(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.BindTables(map[string]*Table{"customers": customers(t)}, nil); err != nil {
		t.Fatal(err)
	}
	b := g.NewBranches()
	got := map[string]string{}
	r := jsonRecord(`{"customer": "c1", "n": 1}`)
	if err := b.Process(0, r, func() *Record { return &Record{} }, func(_, target int, rec *Record, rerr *RecordError) {
		if rerr != nil {
			t.Fatalf("route to %d: %v", target, rerr)
		}
		id := g.Targets()[target].ID
		v, _ := rec.joinedField("c")
		got[id] = fmt.Sprintf("%s %v", rec.GroupKey, v != nil)
		if id == "gold" {
			e, err := CompileExpr("sinks[1].key", "c.tier")
			if err != nil {
				t.Fatal(err)
			}
			if k, kerr := e.EvalKey(rec); kerr != nil || k != "gold" {
				t.Errorf("the sink key after the join: %q, %v", k, kerr)
			}
		}
	}); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"tiers": "gold true", "gold": " true", "all": " false"}
	for id, w := range want {
		if got[id] != w {
			t.Errorf("target %s got %q, want %q", id, got[id], w)
		}
	}
}

// An expression that reads a join's name where the join is not before it
// is refused at its place.
func TestJoinScope(t *testing.T) {
	cfg := parseJob(t, `name: job
kafka:
  brokers: [localhost:9092]
sources:
  - id: orders
    topics: [orders]
  - id: returns
    topics: [returns]
tables:
  - {id: customers, topic: customers}
steps:
  - {id: enrich, from: orders, join: {table: customers, key: customer, as: c}}
  - {id: both, from: [enrich, returns], key_by: c.tier}
  - {id: sums, aggregate: {values: {n: count()}}}
  - {id: early, from: orders, filter: 'c != nil'}
sinks:
  - {from: sums, topic: sums}
  - {from: early, topic: early}
`)
	_, err := CompileGraph(cfg)
	var msgs []string
	for _, e := range unwrapAll(err) {
		var ce *CompileError
		if errors.As(e, &ce) {
			msgs = append(msgs, ce.Path+": "+ce.Message)
		}
	}
	want := []string{
		`steps[1].key_by: c is the table value the join steps[0].join shows (as: c), and this expression does not come after it on the way from source "returns": move it after the join (or, to read a field of the record by that name, give the join another as:)`,
		`steps[3].filter: c is the table value the join steps[0].join shows (as: c), and this expression does not come after it on the way from source "orders": move it after the join (or, to read a field of the record by that name, give the join another as:)`,
	}
	if strings.Join(msgs, "\n") != strings.Join(want, "\n") {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(msgs, "\n"), strings.Join(want, "\n"))
	}
	// In a linear chain too.
	_, err = Compile([]config.Step{{Filter: "c.tier != nil"}, {Join: &config.Join{Table: "customers", Key: "customer", As: "c"}}})
	if err == nil || !strings.Contains(err.Error(), "steps[0].filter") {
		t.Errorf("a filter before its join: %v", err)
	}
}

func unwrapAll(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// A map step after a join keeps the join's value readable, and a map
// reading $env gets the record's fields only.
func TestJoinAfterMap(t *testing.T) {
	c := mustCompile(t,
		config.Step{Join: &config.Join{Table: "customers", Key: "customer", As: "c", How: config.JoinLeft}},
		mapStep("who", "customer", "all", "$env"),
		keyByStep("c.tier"),
	)
	g := &Graph{joins: []*joinStep{c.steps[0].join}}
	if err := g.BindTables(map[string]*Table{"customers": customers(t)}, nil); err != nil {
		t.Fatal(err)
	}
	r := jsonRecord(`{"customer": "c2", "n": 1}`)
	keep, rerr := c.Process(r)
	if !keep || rerr != nil || r.GroupKey != "silver" {
		t.Fatalf("keep %v, %v, key %q; want silver", keep, rerr, r.GroupKey)
	}
	v, _ := r.AppendValue(nil, config.FormatJSON)
	if string(v) != `{"who":"c2","all":{"customer":"c2","n":1}}` {
		t.Errorf("map output %s: the join's value must not be part of it", v)
	}
}

// Lookups run while another goroutine applies (the race detector checks
// the table's locking).
func TestTableConcurrentLookups(t *testing.T) {
	tb := NewTable(config.Table{ID: "t", Format: config.FormatJSON, KeyFormat: config.FormatRaw})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 2000 {
				tb.Lookup(fmt.Sprintf("k%d", (i+w)%100))
			}
		})
	}
	for i := range 2000 {
		tb.Apply(fmt.Appendf(nil, "k%d", i%100), fmt.Appendf(nil, `{"v": %d}`, i))
	}
	wg.Wait()
	if v, ok := tb.Lookup("k99"); !ok || v.(map[string]any)["v"] != 1999 {
		t.Errorf("k99 = %v, %v", v, ok)
	}
}

// stubDecoder decodes "ok:TEXT" as TEXT, "obj:TEXT" as {"v": TEXT}, and
// fails on anything else, as a schema decoder of the registry formats
// does (CodeSchema).
type stubDecoder struct{}

func (stubDecoder) DecodeObject(b []byte) (Decoded, *RecordError) {
	return Decoded{}, &RecordError{Code: CodeSchema, Reason: "unused"}
}

func (stubDecoder) DecodeValue(b []byte) (any, *RecordError) {
	switch s := string(b); {
	case strings.HasPrefix(s, "ok:"):
		return s[3:], nil
	case strings.HasPrefix(s, "obj:"):
		return map[string]any{"v": s[4:]}, nil
	}
	return nil, &RecordError{Code: CodeSchema, SchemaID: 7, Reason: "schema id 7: bad bytes"}
}

// A table in a schema format decodes keys and values with its decoders;
// what they cannot decode is not applied, and comes back with the error
// a dead letter carries.
func TestTableApplySchemaFormats(t *testing.T) {
	tb := NewTable(config.Table{ID: "customers", Format: config.FormatAvro, KeyFormat: config.FormatAvro})
	tb.SetDecoders(stubDecoder{}, stubDecoder{})
	if skip, rerr := tb.Apply([]byte("ok:c1"), []byte("obj:gold")); skip != "" {
		t.Fatalf("Apply = %s, %v", skip, rerr)
	}
	if v, ok := tb.Lookup("c1"); !ok || v.(map[string]any)["v"] != "gold" {
		t.Fatalf("c1 = %v, %v", v, ok)
	}
	for _, c := range []struct {
		key, value string
		want       SkipReason
		code       Code
	}{
		{"ok:c1", "garbage", SkipSchema, CodeSchema},
		{"garbage", "obj:silver", SkipKey, CodeSchema},
		{"obj:c1", "obj:silver", SkipKey, CodeType}, // a key that is an object
	} {
		skip, rerr := tb.Apply([]byte(c.key), []byte(c.value))
		if skip != c.want || rerr == nil || rerr.Code != c.code {
			t.Errorf("Apply(%q, %q) = %q, %v; want %q with code %s", c.key, c.value, skip, rerr, c.want, c.code)
		}
	}
	if v, _ := tb.Lookup("c1"); v.(map[string]any)["v"] != "gold" {
		t.Errorf("a record that did not decode replaced c1: %v", v)
	}
	if skip, _ := tb.Apply([]byte("ok:c1"), nil); skip != "" || tb.Len() != 0 {
		t.Errorf("a tombstone with a decoded key: %q, %d keys", skip, tb.Len())
	}
}
