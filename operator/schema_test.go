package operator

import (
	"strings"
	"testing"
	"time"

	"github.com/eoflow/pipeline/config"
)

func mustDecimal(t *testing.T, s string) Decimal {
	t.Helper()
	d, err := ParseDecimal(s)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestDecimalText(t *testing.T) {
	for _, tt := range []struct{ in, str, json string }{
		{"112.90", "112.90", "112.9"}, {"-0.05", "-0.05", "-0.05"}, {"3", "3", "3"}, {".5", "0.5", "0.5"},
		{"1.5e-7", "0.00000015", "1.5e-7"}, {"2E+3", "2000", "2000"}, {"-12345678901234567890.12", "-12345678901234567890.12", "-12345678901234567890.12"},
	} {
		d := mustDecimal(t, tt.in)
		if d.String() != tt.str || string(d.appendJSON(nil)) != tt.json {
			t.Errorf("%s: String %s JSON %s, want %s and %s", tt.in, d, d.appendJSON(nil), tt.str, tt.json)
		}
	}
	for _, bad := range []string{"", "-", "1.2.3", "1e", "x", "1e400"} {
		if _, err := ParseDecimal(bad); err == nil {
			t.Errorf("ParseDecimal(%q) succeeded", bad)
		}
	}
	d := mustDecimal(t, "1.50")
	if r, ok := d.Rescale(1); !ok || r.String() != "1.5" {
		t.Errorf("Rescale(1) = %s, %v", r, ok)
	}
	if _, ok := mustDecimal(t, "1.55").Rescale(1); ok {
		t.Error("Rescale dropped a digit")
	}
	for in, want := range map[string]string{"1.55": "1.6", "-1.55": "-1.6", "1.54": "1.5", "2.5": "2.5"} {
		if got := mustDecimal(t, in).Round(1).String(); got != want {
			t.Errorf("Round(%s) = %s, want %s", in, got, want)
		}
	}
}

// TestDecimalInAggregates: Decimal values are summed, compared and
// averaged exactly, mixed with integers, and keyed by their text.
func TestDecimalInAggregates(t *testing.T) {
	chain, err := Compile([]config.Step{
		{KeyBy: "k"},
		{ID: "a", Aggregate: &config.Aggregate{Values: []config.AggregateValue{
			{Name: "s", Func: config.AggSum, Arg: "x"}, {Name: "lo", Func: config.AggMin, Arg: "x"},
			{Name: "hi", Func: config.AggMax, Arg: "x"}, {Name: "m", Func: config.AggAvg, Arg: "x"}, {Name: "f", Func: config.AggFirst, Arg: "x"},
		}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	agg := chain.Aggregator()
	st := agg.NewState()
	for _, x := range []any{mustDecimal(t, "0.10"), mustDecimal(t, "0.20"), 3, mustDecimal(t, "12345678901234567.89")} {
		r := &Record{Format: config.FormatAvro, Topic: "t", decoded: true, fields: map[string]any{"k": mustDecimal(t, "1.50"), "x": x}}
		if _, rerr := chain.Process(r); rerr != nil {
			t.Fatal(rerr)
		}
		if r.GroupKey != "1.5" {
			t.Fatalf("group key %q", r.GroupKey)
		}
		if _, rerr := agg.Add(st, r); rerr != nil {
			t.Fatal(rerr)
		}
	}
	if got, want := string(st.Output("1.5")), `{"key":1.5,"s":12345678901234571.19,"lo":0.1,"hi":12345678901234567.89,"m":3086419725308640,"f":0.1}`; got != want {
		t.Errorf("output %s\nwant   %s", got, want)
	}
	// The state encodes and decodes to the same output.
	enc, err := st.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	back, err := agg.DecodeState(enc)
	if err != nil {
		t.Fatal(err)
	}
	if string(back.Output("1.5")) != string(st.Output("1.5")) {
		t.Errorf("restored %s", back.Output("1.5"))
	}
}

func TestDecodeJSONObjectExact(t *testing.T) {
	m, err := DecodeJSONObjectExact([]byte(`{"a":12345678901234567.89,"b":3,"c":1e-7,"d":[0.1]}`))
	if err != nil {
		t.Fatal(err)
	}
	if d, ok := m["a"].(Decimal); !ok || d.String() != "12345678901234567.89" {
		t.Errorf("a = %#v", m["a"])
	}
	if m["b"] != 3 {
		t.Errorf("b = %#v", m["b"])
	}
	if d, ok := m["c"].(Decimal); !ok || d.String() != "0.0000001" {
		t.Errorf("c = %#v", m["c"])
	}
}

// TestSchemaValuesAsJSON: a record decoded from a schema format writes
// its fields in the schema's order, times as RFC 3339, bytes as base64,
// decimals as numbers.
func TestSchemaValuesAsJSON(t *testing.T) {
	r := &Record{Format: config.FormatAvro, Value: []byte{0, 1}, decoded: true, order: []string{"z", "ts", "b", "amount", "nested"},
		fields: map[string]any{"z": 1, "ts": time.UnixMilli(1765000000123).UTC(), "b": []byte{0xff, 0}, "amount": mustDecimal(t, "112.90"),
			"nested": map[string]any{"t": time.Unix(0, 0).UTC(), "y": []any{[]byte("a")}}}}
	got, rerr := r.AppendValue(nil, config.FormatJSON)
	if rerr != nil {
		t.Fatal(rerr)
	}
	if want := `{"z":1,"ts":"2025-12-06T05:46:40.123Z","b":"/wA=","amount":112.9,"nested":{"t":"1970-01-01T00:00:00Z","y":["YQ=="]}}`; string(got) != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	if _, ok := r.Unchanged(config.FormatJSON); ok {
		t.Error("Unchanged gave the Avro bytes to a JSON sink")
	}
	if v, ok := r.Unchanged(config.FormatRaw); !ok || len(v) != 2 {
		t.Error("a raw sink does not get the input's bytes")
	}
}

// TestDebeziumJSON: the envelope's fields are what expressions see, a
// delete is written on as a tombstone, Debezium's own tombstone is
// dropped, and an event without op is a dead letter.
func TestDebeziumJSON(t *testing.T) {
	chain, err := Compile([]config.Step{{Filter: `source.table == "orders"`}})
	if err != nil {
		t.Fatal(err)
	}
	chain.SetInputs(Inputs{"cdc": {Debezium: true, JSONKey: true}})
	process := func(key, value string) (*Record, bool, *RecordError) {
		r := &Record{Topic: "cdc", Key: []byte(key), Format: config.FormatJSON}
		if value != "" {
			r.Value = []byte(value)
		}
		keep, rerr := chain.Process(r)
		return r, keep, rerr
	}
	r, keep, rerr := process(`{"id":1}`, `{"schema":{"type":"struct"},"payload":{"op":"u","before":{"id":1,"qty":1},"after":{"id":1,"qty":2},"source":{"table":"orders"}}}`)
	if rerr != nil || !keep {
		t.Fatalf("update: %v %v", keep, rerr)
	}
	out, _ := r.AppendValue(nil, config.FormatJSON)
	if want := `{"after":{"id":1,"qty":2},"before":{"id":1,"qty":1},"op":"u","source":{"table":"orders"}}`; string(out) != want {
		t.Errorf("update written as %s", out)
	}
	r, keep, rerr = process(`{"id":1}`, `{"op":"d","before":{"id":1,"qty":2},"after":null,"source":{"table":"orders"}}`)
	if rerr != nil || !keep || !r.Tombstone() {
		t.Fatalf("delete: %v %v %v", keep, rerr, r.Tombstone())
	}
	if out, _ := r.AppendValue(nil, config.FormatJSON); len(out) != 0 {
		t.Errorf("delete written as %s", out)
	}
	if _, ok := r.Unchanged(config.FormatRaw); ok {
		t.Error("a delete's bytes go to a raw sink")
	}
	if _, keep, rerr = process(`{"id":1}`, ""); rerr != nil || keep {
		t.Errorf("Debezium's tombstone: keep %v, %v", keep, rerr)
	}
	if _, _, rerr = process(`{"id":1}`, `{"after":{}}`); rerr == nil || rerr.Code != CodeDecode || !strings.Contains(rerr.Reason, "not a Debezium change event: op is missing") {
		t.Errorf("no op: %v", rerr)
	}
	// The key, in key_format json, is what _key reads.
	kchain, err := Compile([]config.Step{{KeyBy: "_key.id"}})
	if err != nil {
		t.Fatal(err)
	}
	kchain.SetInputs(Inputs{"cdc": {Debezium: true, JSONKey: true}})
	kr := &Record{Topic: "cdc", Key: []byte(`{"id":7}`), Value: []byte(`{"op":"c","after":{"id":7}}`)}
	if _, rerr := kchain.Process(kr); rerr != nil || kr.GroupKey != "7" {
		t.Errorf("key_by _key.id: %q %v", kr.GroupKey, rerr)
	}
}

// TestDecimalExpressions: filters, maps and keys compute exactly with
// Decimals when the record holds them, and as before when it does not.
func TestDecimalExpressions(t *testing.T) {
	for _, tt := range []struct {
		src  string
		x    any
		want string
	}{
		{"x > 100.5", mustDecimal(t, "100.51"), "true"},
		{"x > 100.5", mustDecimal(t, "100.50"), "false"},
		{"x == 0.3", mustDecimal(t, "0.30"), "true"},
		{"x + 0.2 == 0.3", mustDecimal(t, "0.1"), "false"}, // float arithmetic, as in SQL
		{"x + 1", mustDecimal(t, "0.10"), "1.1"},
		{"x * 3", mustDecimal(t, "19.99"), "59.97"},
		{"x * x", mustDecimal(t, "1.1"), "1.21"},
		{"x - 1 < 0", mustDecimal(t, "0.99"), "true"},
		{"-x", mustDecimal(t, "2.5"), "-2.5"},
		{"x / 2", mustDecimal(t, "1"), "0.5"},
		{"abs(x)", mustDecimal(t, "-3.25"), "3.25"},
		{"float(x)", mustDecimal(t, "0.125"), "0.125"},
		{"int(x)", mustDecimal(t, "7.9"), "7"},
		{"string(x)", mustDecimal(t, "7.90"), `"7.90"`},
		{"x % 4", mustDecimal(t, "10"), "2"},
		{"x > 100.5", 101, "true"}, // no Decimal: expr's own operators
		{`x + "a"`, "b", `"ba"`},
	} {
		chain, err := Compile([]config.Step{{Map: []config.Field{{Name: "v", Expr: tt.src}}}})
		if err != nil {
			t.Fatalf("%s: %v", tt.src, err)
		}
		_, isDec := tt.x.(Decimal)
		r := &Record{Format: config.FormatAvro, Topic: "t", decoded: true, decimals: isDec, fields: map[string]any{"x": tt.x}}
		if _, rerr := chain.Process(r); rerr != nil {
			t.Errorf("%s: %v", tt.src, rerr)
			continue
		}
		got, _ := r.AppendValue(nil, config.FormatJSON)
		if want := `{"v":` + tt.want + `}`; string(got) != want {
			t.Errorf("%s with x=%v: %s, want %s", tt.src, tt.x, got, want)
		}
	}
}
