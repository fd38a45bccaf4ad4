package operator

import (
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/eoflow/pipeline/config"
)

func TestProcess(t *testing.T) {
	type want struct {
		keep     bool
		groupKey string // checked when keyed
		keyed    bool
		out      string // AppendValue(json), when kept
		rawOut   string // AppendValue(raw), when set
		code     Code   // a RecordError is expected when set
		path     string
		reason   string // substring of Reason
	}
	tests := []struct {
		name   string
		steps  []config.Step
		format config.Format
		value  string
		want   want
	}{
		// filter
		{"filter keeps", []config.Step{filterStep("n % 2 == 0")}, "", `{"n": 4}`,
			want{keep: true, out: `{"n":4}`}},
		{"filter drops", []config.Step{filterStep("n % 2 == 0")}, "", `{"n":3}`,
			want{keep: false}},
		{"filter on float", []config.Step{filterStep("amount > 10")}, "", `{"amount":10.5}`,
			want{keep: true, out: `{"amount":10.5}`}},
		{"filter nested", []config.Step{filterStep(`user.id == "u1"`)}, "", `{"user":{"id":"u1"}}`,
			want{keep: true, out: `{"user":{"id":"u1"}}`}},
		{"filter non-bool", []config.Step{filterStep("x")}, "", `{"x":1}`,
			want{code: CodeType, path: "steps[0].filter", reason: "filter must be true or false, got number"}},
		{"filter null", []config.Step{filterStep("x")}, "", `{"x":null}`,
			want{code: CodeType, path: "steps[0].filter", reason: "got null"}},
		{"filter missing field", []config.Step{filterStep("n % 2 == 0")}, "", `{"m":1}`,
			want{code: CodeMissingField, path: "steps[0].filter", reason: "missing field n"}},
		{"filter eval error", []config.Step{filterStep("n % 2 == 0")}, "", `{"n":"x"}`,
			want{code: CodeEval, path: "steps[0].filter", reason: "invalid operation"}},
		{"filter modulo of float", []config.Step{filterStep("n % 2 == 0")}, "", `{"n":2.5}`,
			want{code: CodeEval, path: "steps[0].filter"}},
		{"filter division by zero", []config.Step{filterStep("n % d == 0")}, "", `{"n":1,"d":0}`,
			want{code: CodeEval, path: "steps[0].filter", reason: "divide by zero"}},
		{"optional field ??", []config.Step{filterStep("(x ?? 0) > 1")}, "", `{"n":1}`,
			want{keep: false}},
		{"optional field ?.", []config.Step{filterStep("(u?.id ?? 7) == 7")}, "", `{"n":1}`,
			want{keep: true, out: `{"n":1}`}},
		{"let binding is not a field", []config.Step{filterStep("let y = n * 2; y > 3")}, "", `{"n":2}`,
			want{keep: true, out: `{"n":2}`}},
		{"predicate", []config.Step{filterStep("any(xs, # > lim)")}, "", `{"xs":[1,5],"lim":4}`,
			want{keep: true, out: `{"xs":[1,5],"lim":4}`}},
		{"predicate missing outer field", []config.Step{filterStep("any(xs, # > lim)")}, "", `{"xs":[1,5]}`,
			want{code: CodeMissingField, reason: "missing field lim", path: "steps[0].filter"}},
		{"meta variables", []config.Step{filterStep(`_key == "k1" && _topic == "numbers" && _partition == 3 && _offset == 42 && _timestamp.Year() == 2025`)}, "", `{}`,
			want{keep: true, out: `{}`}},
		{"$env", []config.Step{filterStep(`$env["a b"] == 1`)}, "", `{"a b":1}`,
			want{keep: true, out: `{"a b":1}`}},

		// decode
		{"not JSON", []config.Step{filterStep("true")}, "", `hello`,
			want{code: CodeDecode, path: "steps[0].filter", reason: "invalid character 'h'"}},
		{"not an object", []config.Step{keyByStep("n")}, "", `[1]`,
			want{code: CodeDecode, path: "steps[0].key_by", reason: "not a JSON object"}},
		{"empty value", nil, "", ``,
			want{code: CodeDecode, path: "steps", reason: "empty value"}},
		{"invalid UTF-8 in a string read", []config.Step{keyByStep("k")}, "", "{\"k\":\"caf\xe9\"}",
			want{code: CodeDecode, path: "steps[0].key_by", reason: "invalid UTF-8 byte 0xe9 in string at offset 9"}},
		{"invalid UTF-8 in a field no step reads", []config.Step{keyByStep("k")}, "", "{\"k\":\"a\",\"note\":\"\xff\"}",
			want{code: CodeDecode, path: "steps[0].key_by", reason: "invalid UTF-8 byte 0xff in string at offset 17"}},
		{"invalid UTF-8 without steps", nil, "", "{\"a\":\"\xc0\xaf\"}",
			want{code: CodeDecode, path: "steps", reason: "invalid UTF-8 byte 0xc0 in string at offset 6"}},
		{"no steps: compacted pass-through", nil, "", " {\"b\": 1,  \"a\": 2.50} ",
			want{keep: true, out: `{"b":1,"a":2.50}`, rawOut: " {\"b\": 1,  \"a\": 2.50} "}},

		// map
		{"map in config order", []config.Step{mapStep("z", "n * 2", "a", "n / 2", "s", `"id-" + string(n)`)}, "", `{"n":3,"x":1}`,
			want{keep: true, out: `{"z":6,"a":1.5,"s":"id-3"}`, rawOut: `{"z":6,"a":1.5,"s":"id-3"}`}},
		{"map values from input, not from each other", []config.Step{mapStep("n", "n + 1", "m", "n")}, "", `{"n":1}`,
			want{keep: true, out: `{"n":2,"m":1}`}},
		{"map then filter on new fields", []config.Step{mapStep("d", "n * 2"), filterStep("d > 5")}, "", `{"n":3}`,
			want{keep: true, out: `{"d":6}`}},
		{"map drops old fields", []config.Step{mapStep("d", "n * 2"), filterStep("n > 1")}, "", `{"n":3}`,
			want{code: CodeMissingField, path: "steps[1].filter", reason: "missing field n"}},
		{"map nested object sorted", []config.Step{mapStep("o", `{"b": n, "a": [n, "x"]}`)}, "", `{"n":1}`,
			want{keep: true, out: `{"o":{"a":[1,"x"],"b":1}}`}},
		{"map timestamp", []config.Step{mapStep("ts", "_timestamp")}, "", `{}`,
			want{keep: true, out: `{"ts":"2025-03-01T11:00:00.000000005Z"}`}},
		{"map exact int64", []config.Step{mapStep("v", "n")}, "", `{"n":9223372036854775807}`,
			want{keep: true, out: `{"v":9223372036854775807}`}},
		{"map non-finite", []config.Step{mapStep("v", "n / 0")}, "", `{"n":1}`,
			want{code: CodeType, path: "steps[0].map.v", reason: "not a finite number"}},
		{"map missing field", []config.Step{mapStep("a", "1", "v", "q")}, "", `{"n":1}`,
			want{code: CodeMissingField, path: "steps[0].map.v", reason: "missing field q"}},
		{"map groupBy result", []config.Step{mapStep("g", `groupBy(xs, # % 2 == 0)`)}, "", `{"xs":[1,2,3]}`,
			want{keep: true, out: `{"g":{"false":[1,3],"true":[2]}}`}},

		// key_by
		{"key_by string", []config.Step{keyByStep(`n % 2 == 0 ? "even" : "odd"`)}, "", `{"n":7}`,
			want{keep: true, keyed: true, groupKey: "odd", out: `{"n":7}`}},
		{"key_by int", []config.Step{keyByStep("n")}, "", `{"n":-9007199254740993}`,
			want{keep: true, keyed: true, groupKey: "-9007199254740993", out: `{"n":-9007199254740993}`}},
		{"key_by float integral", []config.Step{keyByStep("n")}, "", `{"n":2.0}`,
			want{keep: true, keyed: true, groupKey: "2", out: `{"n":2.0}`}},
		{"key_by bool", []config.Step{keyByStep("n > 1")}, "", `{"n":2}`,
			want{keep: true, keyed: true, groupKey: "true", out: `{"n":2}`}},
		{"key_by object", []config.Step{keyByStep("u")}, "", `{"u":{"a":1}}`,
			want{code: CodeType, path: "steps[0].key_by", reason: "got object"}},
		{"key_by array", []config.Step{keyByStep("u")}, "", `{"u":[1]}`,
			want{code: CodeType, path: "steps[0].key_by", reason: "got array"}},
		{"key_by null", []config.Step{keyByStep("u")}, "", `{"u":null}`,
			want{code: CodeType, path: "steps[0].key_by", reason: "got null"}},
		{"key_by nested missing is null", []config.Step{keyByStep("u.id")}, "", `{"u":{}}`,
			want{code: CodeType, path: "steps[0].key_by", reason: "got null"}},
		{"filter after key_by", []config.Step{keyByStep("n"), filterStep("n > 5")}, "", `{"n":1}`,
			want{keep: false}},

		// raw
		{"raw filter and key", []config.Step{filterStep(`value startsWith "he"`), keyByStep(`key + ":" + string(len(value))`)}, config.FormatRaw, "he\xffllo",
			want{keep: true, keyed: true, groupKey: "k1:6", out: "\"he\uFFFDllo\"", rawOut: "he\xffllo"}},
		{"raw is never decoded", nil, config.FormatRaw, "not json",
			want{keep: true, out: `"not json"`, rawOut: "not json"}},
		{"raw map", []config.Step{mapStep("v", "upper(value)")}, config.FormatRaw, "abc",
			want{keep: true, out: `{"v":"ABC"}`, rawOut: `{"v":"ABC"}`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := mustCompile(t, tt.steps...)
			r := jsonRecord(tt.value)
			r.Format = tt.format
			orig := string(r.Value)
			keep, err := c.Process(r)
			if string(r.Value) != orig {
				t.Fatalf("Process modified Value: %q", r.Value)
			}
			if tt.want.code != "" {
				if err == nil {
					t.Fatalf("no error, want %s", tt.want.code)
				}
				if err.Code != tt.want.code || err.Step != tt.want.path || !strings.Contains(err.Reason, tt.want.reason) {
					t.Fatalf("error = %+v, want code %s, step %s, reason containing %q", err, tt.want.code, tt.want.path, tt.want.reason)
				}
				if strings.Contains(err.Reason, "\n") {
					t.Fatalf("reason is not one line: %q", err.Reason)
				}
				return
			}
			if err != nil {
				t.Fatalf("error %v", err)
			}
			if keep != tt.want.keep {
				t.Fatalf("keep = %v, want %v", keep, tt.want.keep)
			}
			if !keep {
				return
			}
			if r.Keyed != tt.want.keyed || r.GroupKey != tt.want.groupKey {
				t.Fatalf("group key = %q (keyed %v), want %q (keyed %v)", r.GroupKey, r.Keyed, tt.want.groupKey, tt.want.keyed)
			}
			out, err := r.AppendValue(nil, config.FormatJSON)
			if err != nil || string(out) != tt.want.out {
				t.Fatalf("json output = %s (%v), want %s", out, err, tt.want.out)
			}
			if tt.want.rawOut != "" {
				out, err := r.AppendValue(nil, config.FormatRaw)
				if err != nil || string(out) != tt.want.rawOut {
					t.Fatalf("raw output = %q (%v), want %q", out, err, tt.want.rawOut)
				}
			}
		})
	}
}

func TestCompileErrors(t *testing.T) {
	tests := []struct {
		name  string
		steps []config.Step
		want  []string // Error() of each CompileError, in order
	}{
		{"syntax", []config.Step{keyByStep("n"), filterStep("n %% 2")},
			[]string{"steps[1].filter: unexpected token Operator(\"%\") (expression 1:4)"}},
		{"filter not bool", []config.Step{filterStep("1 + 1")},
			[]string{"steps[0].filter: expected bool, but got int"}},
		{"filter of a field never bool", []config.Step{filterStep("n + 1"), filterStep("x ? n * 2 : -n")},
			[]string{
				"steps[0].filter: expected bool, but its result is never true or false: a filter needs a condition, such as a comparison (expression 1:3)",
				"steps[1].filter: expected bool, but its result is never true or false: a filter needs a condition, such as a comparison (expression 1:1)",
			}},
		{"broken key_by is still a key_by", []config.Step{keyByStep("n %"), aggStep("", val("c", config.AggCount, ""))},
			[]string{`steps[0].key_by: unexpected token EOF (expression 1:3)`}},
		{"unknown function", []config.Step{keyByStep("n"), aggStep("", val("s", config.AggSum, "  frob(n)"))},
			[]string{"steps[1].aggregate.values.s: unknown function frob() (expression 1:3)"}},
		{"now refused", []config.Step{mapStep("t", "now()")},
			[]string{"steps[0].map.t: now() is not available: a replay would compute different results; use _timestamp, the record's time (expression 1:1)"}},
		{"multi-line position", []config.Step{filterStep("n > 1 &&\n  n <")},
			[]string{"steps[0].filter: unexpected token EOF (expression 2:5)"}},
		{"no kind", []config.Step{{}},
			[]string{"steps[0]: step has no kind: set one of filter, map, key_by, join, aggregate, window"}},
		{"two kinds", []config.Step{{Filter: "true", KeyBy: "n"}},
			[]string{"steps[0]: step has 2 kinds: set exactly one of filter, map, key_by, join, aggregate, window"}},
		{"map problems", []config.Step{{Map: []config.Field{}}, mapStep("a", "1", "a", "2", "_key", "3", "", "4")},
			[]string{
				"steps[0].map: map needs at least one field",
				`steps[1].map.a: duplicate field "a"`,
				"steps[1].map._key: _key is reserved for the record's metadata; choose another name",
				"steps[1].map.: field name is empty",
			}},
		{"aggregate problems", []config.Step{aggStep("sometimes",
			val("key", config.AggCount, ""),
			val("c", config.AggCount, "n"),
			val("s", config.AggSum, ""),
			val("m", "median", "n"),
			val("x", config.AggMax, "n"),
			val("x", config.AggMin, "n"),
		), filterStep("true")},
			[]string{
				`steps[0].aggregate: needs a key_by step before it (for one global group: key_by: '"all"')`,
				`steps[0].aggregate.emit: unknown emit mode "sometimes": want every_record or on_checkpoint`,
				`steps[0].aggregate.values.key: "key" is the output field of the group key; choose another name`,
				"steps[0].aggregate.values.c: count() takes no argument",
				"steps[0].aggregate.values.s: sum() needs an argument, e.g. sum(amount)",
				`steps[0].aggregate.values.m: unknown aggregate function "median": want count, sum, min, max, avg, first or last`,
				`steps[0].aggregate.values.x: duplicate value "x"`,
				"steps[1].filter: no step may follow the aggregate (steps[0].aggregate)",
			}},
		{"empty aggregate", []config.Step{keyByStep("n"), aggStep("")},
			[]string{"steps[1].aggregate.values: at least one value is required, e.g. count: count()"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Compile(tt.steps)
			if err == nil {
				t.Fatal("Compile succeeded")
			}
			var got []string
			for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
				var ce *CompileError
				if !errors.As(e, &ce) {
					t.Fatalf("%T is not a *CompileError", e)
				}
				got = append(got, ce.Error())
			}
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Fatalf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}

func TestCompileErrorFields(t *testing.T) {
	_, err := Compile([]config.Step{keyByStep("n"), filterStep("n >")})
	var ce *CompileError
	if !errors.As(err, &ce) {
		t.Fatalf("%v", err)
	}
	if ce.Path != "steps[1].filter" || ce.Step != 1 || ce.Kind != config.StepFilter || ce.Line != 1 || ce.Column == 0 {
		t.Fatalf("%+v", ce)
	}
}

func TestExprFields(t *testing.T) {
	tests := []struct {
		src  string
		want string
		meta metaMask
	}{
		{"n % 2 == 0", "n", 0},
		{"a + b.c + a", "a b", 0},
		{"x ?? y", "y", 0},
		{"u?.id", "", 0},
		{"let t = a; t + b", "a b", 0},
		{"filter(xs, # > m) | map(#.v)", "m xs", 0},
		{"_key + _topic + string(_offset)", "", metaKey | metaTopic | metaOffset},
		{"$env.q", "", 0},
		{"upper(s)", "s", 0},
		{"s.upper", "s", 0},
	}
	for _, tt := range tests {
		e, err := CompileExpr("x", tt.src)
		if err != nil {
			t.Fatalf("%s: %v", tt.src, err)
		}
		if got := strings.Join(e.Fields(), " "); got != tt.want || e.meta != tt.meta {
			t.Errorf("%s: fields %q meta %b, want %q %b", tt.src, got, e.meta, tt.want, tt.meta)
		}
	}
}

// TestExprFieldFastPath: an expression that is one top-level field is read
// from the record without the VM, with the result the VM gives, for every
// kind of value; anything more is left to the VM.
func TestExprFieldFastPath(t *testing.T) {
	for src, fast := range map[string]bool{
		"amount": true, "null": true, "amount + 0": false, "$env": false, "_key": false,
		"x ?? amount": false, "amount.v": false, "(amount)": true, "let a = 1; a": false,
	} {
		e, err := CompileExpr("x", src)
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		if (e.field != "") != fast {
			t.Errorf("%s: fast path %v, want %v", src, e.field != "", fast)
		}
	}
	e, err := CompileExpr("x", "amount")
	if err != nil {
		t.Fatal(err)
	}
	slow := *e
	slow.field = ""
	for _, v := range []string{`1`, `-9223372036854775808`, `2.5`, `"s"`, `null`, `true`, `[1,{"a":[]}]`, `{"b":{}}`} {
		r := jsonRecord(`{"amount":` + v + `}`)
		got, gerr := e.Eval(r)
		want, werr := slow.Eval(r)
		if gerr != nil || werr != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("amount = %s: fast path %#v (%v), VM %#v (%v)", v, got, gerr, want, werr)
		}
	}
	if _, rerr := e.Eval(jsonRecord(`{}`)); rerr == nil || rerr.Code != CodeMissingField {
		t.Errorf("missing field: %+v", rerr)
	}
}

func TestExprEval(t *testing.T) {
	e, err := CompileExpr("sinks[0].key", `"k-" + id`)
	if err != nil {
		t.Fatal(err)
	}
	v, rerr := e.Eval(jsonRecord(`{"id":"a"}`))
	if rerr != nil || v != "k-a" {
		t.Fatalf("%v %v", v, rerr)
	}
	_, rerr = e.Eval(jsonRecord(`{}`))
	if rerr == nil || rerr.Step != "sinks[0].key" || rerr.Code != CodeMissingField {
		t.Fatalf("%+v", rerr)
	}
}

// A map step may name a field like the input had it; the metadata variables
// written for later expressions never leak into the output.
func TestMetaDoesNotLeak(t *testing.T) {
	c := mustCompile(t, mapStep("n", "n"), filterStep(`_key != ""`), keyByStep("_topic"))
	r := jsonRecord(`{"n":1,"_key":"shadowed"}`)
	if keep, err := c.Process(r); !keep || err != nil {
		t.Fatal(keep, err)
	}
	out, _ := r.AppendValue(nil, config.FormatJSON)
	if string(out) != `{"n":1}` || r.GroupKey != "numbers" {
		t.Fatalf("%s %q", out, r.GroupKey)
	}
}

func TestCloneIsIndependent(t *testing.T) {
	c := mustCompile(t, keyByStep("n"), aggStep("", val("s", config.AggSum, "n")))
	d := c.Clone()
	if d.Aggregator() == c.Aggregator() || d.Aggregator().layout != c.Aggregator().layout {
		t.Fatal("Clone must share the layout, not the Aggregator")
	}
	st := c.Aggregator().NewState()
	r := jsonRecord(`{"n":5}`)
	if _, err := d.Process(r); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Aggregator().Add(st, r); err != nil {
		t.Fatal(err)
	}
	if got := string(st.Output(r.GroupKey)); got != `{"key":5,"s":5}` {
		t.Fatal(got)
	}
}

// TestRecycle: a recycled record's map may be decoded into again by a
// clone, while what was read from the record before stays as it was; a record is
// recycled by one goroutine while another decodes (run it under -race).
func TestRecycle(t *testing.T) {
	c := mustCompile(t, mapStep("u", "user", "n", "n"), keyByStep("u"))
	d := c.Clone()
	a := jsonRecord(`{"user":"ann","n":[1,2]}`)
	if _, err := d.Process(a); err != nil {
		t.Fatal(err)
	}
	am, _ := a.Fields()
	n := am["n"]
	c.Recycle(a)
	if a.decoded || a.fields != nil || a.changed {
		t.Fatal("a recycled record must be as if never decoded")
	}
	b := jsonRecord(`{"user":"bob","n":3,"x":1}`)
	if _, err := d.Process(b); err != nil {
		t.Fatal(err)
	}
	// (Whether b got a's map is up to sync.Pool, which under -race drops
	// some on purpose; BenchmarkKeyedSumHotPath counts the allocations.)
	bm, _ := b.Fields()
	if b.GroupKey != "bob" || bm["n"] != 3 || !reflect.DeepEqual(n, []any{1, 2}) || a.GroupKey != "ann" {
		t.Errorf("b %s %v, a's n %v, a %s", b.GroupKey, bm, n, a.GroupKey)
	}
	// A decode error gives the map back too.
	if _, err := d.Process(jsonRecord(`{"user":`)); err == nil {
		t.Fatal("want a decode error")
	}

	recs := make(chan *Record, 16)
	go func() {
		defer close(recs)
		for i := range 2000 {
			r := jsonRecord(`{"user":"u` + strconv.Itoa(i%7) + `","n":` + strconv.Itoa(i) + `}`)
			if _, err := d.Process(r); err != nil {
				t.Error(err)
				return
			}
			recs <- r
		}
	}()
	i := 0
	for r := range recs {
		m, _ := r.Fields()
		if r.GroupKey != "u"+strconv.Itoa(i%7) || m["n"] != i {
			t.Fatalf("record %d: key %s, fields %v", i, r.GroupKey, m)
		}
		c.Recycle(r)
		i++
	}
}

func TestRecordFields(t *testing.T) {
	r := jsonRecord(`{"a":[1]}`)
	m, err := r.Fields()
	if err != nil || len(m) != 1 {
		t.Fatal(m, err)
	}
	r.Reset()
	r.Value = []byte("x")
	if _, err := r.Fields(); err == nil {
		t.Fatal("want a decode error")
	}
	r.Reset()
	r.Value = []byte("x")
	if _, err := r.AppendValue(nil, config.FormatJSON); err == nil || err.Code != CodeDecode {
		t.Fatalf("AppendValue of undecodable JSON: %v", err)
	}
}

// Clones share compiled programs; under -race this proves they may run at
// the same time.
func TestClonesConcurrently(t *testing.T) {
	c := mustCompile(t, filterStep("n >= 0"), mapStep("n", "n", "half", "n / 2"), keyByStep(`n % 2 == 0 ? "even" : "odd"`),
		aggStep("", val("count", config.AggCount, ""), val("sum", config.AggSum, "n"), val("avg", config.AggAvg, "half")))
	done := make(chan string, 4)
	for range 4 {
		w := c.Clone()
		go func() {
			st := w.Aggregator().NewState()
			var out []byte
			for i := range 200 {
				r := jsonRecord(fmt.Sprintf(`{"n":%d}`, 2*i))
				if _, err := w.Process(r); err != nil {
					done <- err.Error()
					return
				}
				if _, err := w.Aggregator().Add(st, r); err != nil {
					done <- err.Error()
					return
				}
				out = st.Output(r.GroupKey)
			}
			done <- string(out)
		}()
	}
	for range 4 {
		if got := <-done; got != `{"key":"even","count":200,"sum":39800,"avg":99.5}` {
			t.Fatal(got)
		}
	}
}

// $env is the record's own map, which receives the meta variables
// expressions read; a value taken from it must not see them, and state
// must not share it with the record.
func TestEnvIsDetached(t *testing.T) {
	c := mustCompile(t, filterStep(`_key != ""`), mapStep("all", "$env", "k", "_key"), keyByStep(`_topic`),
		aggStep("", val("first", config.AggFirst, "$env"), val("t", config.AggLast, "_partition")))
	r := jsonRecord(`{"n":1}`)
	if _, err := c.Process(r); err != nil {
		t.Fatal(err)
	}
	out, _ := r.AppendValue(nil, config.FormatJSON)
	if string(out) != `{"all":{"n":1},"k":"k1"}` {
		t.Fatal(string(out))
	}
	st := c.Aggregator().NewState()
	if _, err := c.Aggregator().Add(st, r); err != nil {
		t.Fatal(err)
	}
	want := `{"key":"numbers","first":{"all":{"n":1},"k":"k1"},"t":3}`
	if got := string(st.Output(r.GroupKey)); got != want {
		t.Fatal(got)
	}
	// Another expression on the same record writes more meta variables
	// into its map; the state does not change.
	e, _ := CompileExpr("x", "_offset + _partition")
	if _, err := e.Eval(r); err != nil {
		t.Fatal(err)
	}
	if got := string(st.Output(r.GroupKey)); got != want {
		t.Fatal(got)
	}
}

func TestExprEvalKey(t *testing.T) {
	e, err := CompileExpr("sinks[0].key", "k")
	if err != nil {
		t.Fatal(err)
	}
	if k, rerr := e.EvalKey(jsonRecord(`{"k":12}`)); rerr != nil || k != "12" {
		t.Fatal(k, rerr)
	}
	_, rerr := e.EvalKey(jsonRecord(`{"k":[1]}`))
	if rerr == nil || rerr.Step != "sinks[0].key" || rerr.Code != CodeType {
		t.Fatalf("%+v", rerr)
	}
}

// TestPartialDecoding: Process builds only the fields the chain reads;
// whatever reads more of the record (Fields, another expression, one
// reading $env) gets the whole value, and fields added with AlsoRead are
// built with the rest.
func TestPartialDecoding(t *testing.T) {
	c := mustCompile(t, filterStep(`(opt ?? 0) >= 0`), keyByStep("k"), aggStep(config.EmitEveryRecord, val("s", config.AggSum, "n")))
	d := c.Clone()
	r := jsonRecord(`{"k":"a","n":2,"pad":"xxx","obj":{"z":[1]}}`)
	if keep, err := d.Process(r); !keep || err != nil {
		t.Fatal(keep, err)
	}
	if r.partial == nil || len(r.fields) != 2 {
		t.Fatalf("partial %v, fields %v: want k and n only", r.partial, r.fields)
	}
	st := d.Aggregator().NewState()
	if _, err := d.Aggregator().Add(st, r); err != nil {
		t.Fatal(err)
	}
	if got := string(st.Output(r.GroupKey)); got != `{"key":"a","s":2}` {
		t.Fatal(got)
	}
	e, err := CompileExpr("sinks[0].key", `_key + pad + string(obj.z[0]) + k`)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := e.Eval(r); err != nil || v != "k1xxx1a" {
		t.Fatalf("an expression reading more: %v, %v", v, err)
	}
	if r.partial != nil || len(r.fields) != 4+1 { // and _key
		t.Fatalf("after decoding whole: partial %v, fields %v", r.partial, r.fields)
	}

	r = jsonRecord(`{"k":"a","n":2,"pad":"xxx"}`)
	d.Process(r)
	if m, err := r.Fields(); err != nil || len(m) != 3 {
		t.Fatalf("Fields: %v, %v", m, err)
	}

	key, err := CompileExpr("sinks[0].key", `pad`)
	if err != nil {
		t.Fatal(err)
	}
	d.AlsoRead(key)
	r = jsonRecord(`{"k":"a","n":2,"pad":"xxx","other":1}`)
	d.Process(r)
	if v, err := key.EvalKey(r); err != nil || v != "xxx" || r.partial == nil || len(r.fields) != 3 {
		t.Fatalf("AlsoRead: %v, %v, fields %v", v, err, r.fields)
	}
	if _, ok := c.need.names["pad"]; ok {
		t.Fatal("AlsoRead of a clone changed the original")
	}

	for _, steps := range [][]config.Step{
		{filterStep(`$env.n > 0`), keyByStep("k")},
		{mapStep("k", "k"), keyByStep("k")},
	} {
		c := mustCompile(t, steps...)
		r := jsonRecord(`{"k":"a","n":2,"pad":"xxx"}`)
		c.Process(r)
		if r.partial != nil {
			t.Errorf("%v: decoded in part", steps)
		}
	}
}

// TestSlotsMatchTheMap: a chain whose expressions are all bare fields,
// few enough for slots, gives exactly what the same chain decoding into a
// map gives (the map path forced by dropping the slots): the same kept
// records, errors, group keys, aggregates, output values, and the same
// answers to expressions evaluated afterwards, covered or not.
func TestSlotsMatchTheMap(t *testing.T) {
	chains := [][]config.Step{
		{keyByStep("k"), aggStep(config.EmitEveryRecord, val("s", config.AggSum, "n"), val("c", config.AggCount, ""), val("t", config.AggLast, "t"))},
		{keyByStep("k"), aggStep(config.EmitEveryRecord, val("lo", config.AggMin, "n"), val("f", config.AggFirst, "t"), val("a", config.AggAvg, "m"))},
		{keyByStep("k")},
		{},
	}
	inputs := []string{
		`{"k":"a","n":2,"t":1764688091000,"m":1.5,"pad":"xx"}`,
		`{"k":"a","n":2,"n":3,"t":"x"}`,
		`{"n":2,"t":1}`,
		`{"k":7,"n":-1,"t":null,"m":2}`,
		`{"k":true,"n":1e3,"t":[1,2],"m":{"x":1}}`,
		`{"k":"é\u00e9\n","n":9223372036854775807,"t":{"a":[]}}`,
		`{"k":"a","n":"two"}`,
		` {"k":"b","n":1} `,
		`{}`,
		`{"k":"a",}`,
		`{"k":"a"`,
		`[1,2]`,
		`42`,
		``,
		`   `,
		`{"k":"a","n":1} x`,
	}
	later := []string{`k`, `n + 1`, `pad`, `_key + string(n)`}
	for ci, steps := range chains {
		slotted := mustCompile(t, steps...)
		if slotted.need == nil || slotted.need.slots == nil {
			t.Fatalf("chain %d: no slots", ci)
		}
		mapped := mustCompile(t, steps...)
		mapped.need = newFieldSet(nil, slices.Collect(maps.Keys(mapped.need.names)))
		mapped.need.slots = nil
		for _, in := range inputs {
			for li := -1; li < len(later); li++ {
				got, want := runBoth(t, slotted.Clone(), mapped.Clone(), in, li, later)
				if got != want {
					t.Fatalf("chain %d, input %q, later %d:\nslots: %s\nmap:   %s", ci, in, li, got, want)
				}
			}
		}
	}
}

// runBoth runs one input through both chains and renders what each gave.
func runBoth(t *testing.T, a, b *Chain, in string, later int, exprs []string) (string, string) {
	t.Helper()
	render := func(c *Chain) string {
		r := jsonRecord(in)
		keep, err := c.Process(r)
		out := fmt.Sprintf("keep=%v err=%v key=%q/%v/%v", keep, err, r.GroupKey, r.Keyed, r.keyKind)
		if !keep || err != nil {
			return out
		}
		if agg := c.Aggregator(); agg != nil {
			st := agg.NewState()
			changed, err := agg.Add(st, r)
			out += fmt.Sprintf(" add=%v/%v state=%s", changed, err, st.Output(r.GroupKey))
		}
		if later >= 0 {
			e, cerr := CompileExpr("sinks[0].key", exprs[later])
			if cerr != nil {
				t.Fatal(cerr)
			}
			v, err := e.Eval(r)
			out += fmt.Sprintf(" eval=%#v/%v", v, err)
		}
		v, err := r.AppendValue(nil, config.FormatJSON)
		out += fmt.Sprintf(" value=%s/%v", v, err)
		c.Recycle(r)
		if r.inSlots || r.slotted != 0 || r.fields != nil {
			out += " not recycled"
		}
		return out
	}
	return render(a), render(b)
}

// TestAppendValueOfCompactInput: a value decoded without whitespace is
// written as its own bytes; any other is compacted. Either way the output
// is what appendCompact makes of the input, whichever way it was decoded.
func TestAppendValueOfCompactInput(t *testing.T) {
	inputs := []string{
		`{"k":"a","n":2}`,
		`{"k":"a b","n":[1, 2]}`,
		`{"k":"a", "n":2}`,
		` {"k":"a"}`,
		`{"k":"a"} `,
		"{\"k\":\"\\u00e9\\n\",\n\"n\":{\"x\":\t1}}",
		`{"k":"é","n":-0.5e3}`,
		`{"k":1,"o":{}}`,
	}
	chains := []*Chain{
		mustCompile(t, keyByStep("k")),                     // slots
		mustCompile(t, filterStep("true"), keyByStep("k")), // a map
		nil, // decoded by AppendValue itself
	}
	for _, in := range inputs {
		want := string(appendCompact(nil, []byte(in)))
		for i, c := range chains {
			r := jsonRecord(in)
			if c != nil {
				if _, err := c.Process(r); err != nil {
					t.Fatal(err)
				}
			}
			// Unchanged: the input itself exactly when it is what
			// AppendValue writes and a step validated it.
			same, ok := r.Unchanged(config.FormatJSON)
			if ok != (c != nil && want == in) || ok && (string(same) != want || &same[0] != &r.Value[0]) {
				t.Fatalf("chain %d, %q: Unchanged %q, %v", i, in, same, ok)
			}
			got, err := r.AppendValue(nil, config.FormatJSON)
			if err != nil || string(got) != want {
				t.Fatalf("chain %d, %q: %s, %v; want %s", i, in, got, err, want)
			}
			if r.compact != (want == in) {
				t.Fatalf("chain %d, %q: compact %v", i, in, r.compact)
			}
		}
	}
}

// TestUnchangedValue: a raw sink takes any non-empty input as it is; a
// value a map step replaced, and an empty one, never are.
func TestUnchangedValue(t *testing.T) {
	r := jsonRecord(`not json`)
	if v, ok := r.Unchanged(config.FormatRaw); !ok || string(v) != "not json" {
		t.Fatalf("raw sink: %q, %v", v, ok)
	}
	if _, ok := r.Unchanged(config.FormatJSON); ok {
		t.Fatal("an undecoded value taken as valid JSON")
	}
	c := mustCompile(t, mapStep("a", "n"))
	r = jsonRecord(`{"n":1}`)
	if _, err := c.Process(r); err != nil {
		t.Fatal(err)
	}
	for _, f := range []config.Format{config.FormatJSON, config.FormatRaw} {
		if v, ok := r.Unchanged(f); ok {
			t.Fatalf("format %q: the value a map step replaced is %q", f, v)
		}
	}
	r = jsonRecord("")
	if _, ok := r.Unchanged(config.FormatRaw); ok {
		t.Fatal("an empty value taken as it is")
	}
}
