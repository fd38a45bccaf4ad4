package jobtest

import (
	"testing"
	"time"
)

// expectations parses the expect list of a one-case test file.
func expectations(t *testing.T, list string) []*Expected {
	t.Helper()
	f := mustParse(t, "cases:\n  - name: c\n    expect:\n      t:\n"+list)
	return f.Cases[0].Expect[0].Records
}

func rec(p int32, off int64, key, value string) Record {
	r := Record{Topic: "t", Partition: p, Offset: off, Value: []byte(value)}
	if key != "" {
		r.Key = []byte(key)
	}
	return r
}

func TestCompareRules(t *testing.T) {
	exp := expectations(t, `
        - {key: a, value: {n: 1}}
        - {key: b, value: {n: 2}}
        - {key: a, value: {n: 3}}
`)
	for _, tc := range []struct {
		name       string
		rule       Rule
		written    []Record
		partitions int
		ok         bool
	}{
		{"per_key: the keys interleaved otherwise", PerKey, []Record{rec(0, 0, "b", `{"n":2}`), rec(0, 1, "a", `{"n":1}`), rec(0, 2, "a", `{"n":3}`)}, 1, true},
		{"per_key: one key's order matters", PerKey, []Record{rec(0, 0, "a", `{"n":3}`), rec(0, 1, "b", `{"n":2}`), rec(0, 2, "a", `{"n":1}`)}, 1, false},
		{"per_key: a record more", PerKey, []Record{rec(0, 0, "a", `{"n":1}`), rec(0, 1, "b", `{"n":2}`), rec(0, 2, "a", `{"n":3}`), rec(0, 3, "b", `{"n":2}`)}, 1, false},
		{"per_key: a record less", PerKey, []Record{rec(0, 0, "a", `{"n":1}`), rec(0, 2, "a", `{"n":3}`)}, 1, false},
		{"exact: in the order written", Exact, []Record{rec(0, 0, "a", `{"n":1}`), rec(0, 1, "b", `{"n":2}`), rec(0, 2, "a", `{"n":3}`)}, 1, true},
		{"exact: keys interleaved otherwise", Exact, []Record{rec(0, 0, "b", `{"n":2}`), rec(0, 1, "a", `{"n":1}`), rec(0, 2, "a", `{"n":3}`)}, 1, false},
		{"exact: another partition", Exact, []Record{rec(0, 0, "a", `{"n":1}`), rec(1, 0, "b", `{"n":2}`), rec(0, 1, "a", `{"n":3}`)}, 2, false},
		{"unordered: any order", Unordered, []Record{rec(0, 0, "a", `{"n":3}`), rec(0, 1, "b", `{"n":2}`), rec(0, 2, "a", `{"n":1}`)}, 1, true},
		{"unordered: a duplicate", Unordered, []Record{rec(0, 0, "a", `{"n":3}`), rec(0, 1, "a", `{"n":3}`), rec(0, 2, "a", `{"n":1}`)}, 1, false},
		{"unordered: the key counts", Unordered, []Record{rec(0, 0, "a", `{"n":3}`), rec(0, 1, "c", `{"n":2}`), rec(0, 2, "a", `{"n":1}`)}, 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := Compare(tc.rule, exp, tc.written, tc.partitions)
			if d.OK() != tc.ok {
				t.Errorf("OK = %v, want %v: %+v", d.OK(), tc.ok, d)
			}
		})
	}
}

func TestCompareLastPerKey(t *testing.T) {
	exp := expectations(t, `
        - {key: a, value: 3}
        - {key: b, value: 2}
`)
	written := []Record{rec(0, 0, "a", "1"), rec(0, 1, "b", "2"), rec(0, 2, "a", "3")}
	if d := Compare(LastPerKey, exp, written, 1); !d.OK() {
		t.Fatalf("the last value per key matches: %+v", d)
	}
	written = append(written, rec(0, 3, "a", "4"))
	d := Compare(LastPerKey, exp, written, 1)
	if d.OK() || len(d.Groups) != 1 || d.Groups[0].Label != `the last value of key "a"` || d.Groups[0].Why != "the value" {
		t.Fatalf("a later value of a: %+v", d)
	}
	d = Compare(LastPerKey, exp, append(written, rec(0, 4, "c", "1")), 1)
	if len(d.Groups) != 2 || d.Groups[1].Label != `the last value of key "c"` || len(d.Groups[1].Expected) != 0 {
		t.Fatalf("a key not expected: %+v", d.Groups)
	}
}

// Records without a key have no order across partitions: per_key compares
// them as a set there, and in order within one partition.
func TestComparePerKeyWithoutKeys(t *testing.T) {
	exp := expectations(t, "        - 1\n        - 2\n")
	written := []Record{rec(0, 0, "", "2"), rec(1, 0, "", "1")}
	if d := Compare(PerKey, exp, written, 2); !d.OK() {
		t.Fatalf("two partitions: %+v", d)
	}
	d := Compare(PerKey, exp, written, 1)
	if d.OK() || len(d.Groups) != 1 || d.Groups[0].Label != "no key" {
		t.Fatalf("one partition: %+v", d)
	}
	d = Compare(PerKey, exp, written[:1], 2)
	if len(d.Missing) != 1 || string(d.Missing[0].Value.Bytes()) != "1" || len(d.Unexpected) != 0 {
		t.Fatalf("a record missing, two partitions: %+v", d)
	}
}

// JSON compares as JSON: whatever the field order and spacing, numbers as
// exact decimals. A string compares as bytes; null is a null value.
func TestCompareValues(t *testing.T) {
	exp := expectations(t, `
        - {value: {a: 1.50, b: [1e2, "x"], c: null, d: {e: true}}}
        - '{"a": 1}'
        - ~
        - 9007199254740993
`)
	for _, tc := range []struct {
		i       int
		written string
		null    bool
		ok      bool
	}{
		{0, `{"d":{"e":true},"c":null,"b":[100,"x"],"a":1.5}`, false, true},
		{0, `{ "a" : 1.500 , "b" : [ 100.0 , "x" ] , "c" : null , "d" : { "e" : true } }`, false, true},
		{0, `{"a":1.5,"b":["x",100],"c":null,"d":{"e":true}}`, false, false},
		{0, `{"a":1.5,"b":[100,"x"],"d":{"e":true}}`, false, false},
		{0, `{"a":1.5,"b":[100,"x"],"c":null,"d":{"e":true},"f":1}`, false, false},
		{0, `{"a":"1.5","b":[100,"x"],"c":null,"d":{"e":true}}`, false, false},
		{0, `{"a":1.5} trailing`, false, false},
		{0, ``, true, false},
		{1, `{"a": 1}`, false, true},
		{1, `{"a":1}`, false, false},
		{2, ``, true, true},
		{2, ``, false, false},
		{2, `null`, false, false},
		{3, `9007199254740993`, false, true},
		{3, `9007199254740992`, false, false}, // equal as float64s, not as decimals
	} {
		r := rec(0, 0, "", tc.written)
		if tc.null {
			r.Value = nil
		}
		if got := mismatch(exp[tc.i], r) == ""; got != tc.ok {
			t.Errorf("expected %s, written %q (null %v): match %v, want %v", exp[tc.i].Value, tc.written, tc.null, got, tc.ok)
		}
	}
}

// Partition, timestamp and headers are compared only when given; the
// listed headers must be there, others may be.
func TestCompareOptionalFields(t *testing.T) {
	exp := expectations(t, `
        - {value: 1, key: k, partition: 1, timestamp: 2026-12-04T10:00:00Z, headers: {h: v, code: ~}}
        - {value: 1, key: k}
`)
	ts := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	good := Record{Partition: 1, Key: []byte("k"), Value: []byte("1"), Timestamp: ts,
		Headers: []Header{{"other", []byte("x")}, {"h", []byte("v")}, {"code", nil}}}
	if why := mismatch(exp[0], good); why != "" {
		t.Fatalf("a match: %s", why)
	}
	for _, tc := range []struct {
		change func(*Record)
		why    string
	}{
		{func(r *Record) { r.Key = nil }, `the key: expected key "k", written no key`},
		{func(r *Record) { r.Key = []byte("K") }, `the key: expected key "k", written key "K"`},
		{func(r *Record) { r.Partition = 0 }, "the partition: expected 1, written 0"},
		{func(r *Record) { r.Timestamp = ts.Add(time.Millisecond) }, "the timestamp: expected 2026-12-04T10:00:00Z, written 2026-12-04T10:00:00.001Z"},
		{func(r *Record) { r.Headers = r.Headers[:1] }, "header h: expected v, the record has none"},
		{func(r *Record) { r.Headers[1].Value = []byte("w") }, "header h: expected v, written w"},
		{func(r *Record) { r.Headers[2].Value = []byte{} }, `header code: expected null value, written ""`},
	} {
		r := good
		r.Headers = append([]Header(nil), good.Headers...)
		tc.change(&r)
		if why := mismatch(exp[0], r); why != tc.why {
			t.Errorf("why = %q, want %q", why, tc.why)
		}
		if tc.change != nil && r.Key != nil && string(r.Key) == "k" {
			if why := mismatch(exp[1], r); why != "" {
				t.Errorf("without partition, timestamp and headers expected: %q", why)
			}
		}
	}
}

// An expected record that leaves a field out must not take the written
// record a stricter one needs: unordered pairs them as a maximum matching.
func TestCompareUnorderedMatchesAll(t *testing.T) {
	exp := expectations(t, `
        - {value: 1}
        - {value: 1, partition: 0}
`)
	written := []Record{rec(0, 0, "", "1"), rec(1, 0, "", "1")}
	if d := Compare(Unordered, exp, written, 2); !d.OK() {
		t.Fatalf("a greedy pairing fails here, a matching does not: %+v", d)
	}
}

func TestFieldDiff(t *testing.T) {
	exp := expectations(t, "        - {key: odd, count: 2, sum: 4, avg: 2}\n")
	why := mismatch(exp[0], rec(0, 0, "", `{"key":"odd","count":2,"sum":5,"extra":[1]}`))
	if want := `the value: sum is 5, expected 4, no field avg (expected 2), field extra ([1]) not expected`; why != want {
		t.Fatalf("why = %q\nwant %q", why, want)
	}
}
