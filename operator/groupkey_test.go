package operator

import (
	"bytes"
	"encoding/hex"
	"testing"

	"github.com/eoflow/pipeline/config"
)

// TestGroupKeyKeepsJSONType: the output's "key" has the JSON type key_by
// gave it, while the group (state key, record key, key group) is its text,
// so 3 and "3" still share one state.
func TestGroupKeyKeepsJSONType(t *testing.T) {
	tests := []struct {
		keyBy   string
		inputs  []string
		wantKey string // GroupKey of the last input
		want    string // the output after the last input
	}{
		{"n % 3", []string{`{"n":3}`}, "0", `{"key":0,"c":1}`},
		{"n % 3", []string{`{"n":-7}`}, "-1", `{"key":-1,"c":1}`},
		{"ok", []string{`{"ok":true}`}, "true", `{"key":true,"c":1}`},
		{"ok", []string{`{"ok":false}`}, "false", `{"key":false,"c":1}`},
		{"x", []string{`{"x":2.5}`}, "2.5", `{"key":2.5,"c":1}`},
		{"x", []string{`{"x":1e21}`}, "1e+21", `{"key":1e+21,"c":1}`},
		{"x", []string{`{"x":9007199254740993}`}, "9007199254740993", `{"key":9007199254740993,"c":1}`},
		{"x", []string{`{"x":"3"}`}, "3", `{"key":"3","c":1}`},
		{"x", []string{`{"x":"true"}`}, "true", `{"key":"true","c":1}`},
		{"_timestamp", []string{`{}`}, "2025-03-01T11:00:00.000000005Z", `{"key":"2025-03-01T11:00:00.000000005Z","c":1}`},
		// One group, the type of the latest record's key.
		{"x", []string{`{"x":3}`, `{"x":"3"}`}, "3", `{"key":"3","c":2}`},
		{"x", []string{`{"x":"3"}`, `{"x":3.0}`}, "3", `{"key":3,"c":2}`},
	}
	for _, tt := range tests {
		t.Run(tt.keyBy+" "+tt.inputs[len(tt.inputs)-1], func(t *testing.T) {
			c := mustCompile(t, keyByStep(tt.keyBy), aggStep("", val("c", config.AggCount, "")))
			agg := c.Aggregator()
			st := agg.NewState()
			var r *Record
			for _, in := range tt.inputs {
				r = jsonRecord(in)
				if _, err := c.Process(r); err != nil {
					t.Fatal(err)
				}
				if _, err := agg.Add(st, r); err != nil {
					t.Fatal(err)
				}
			}
			if r.GroupKey != tt.wantKey {
				t.Fatalf("GroupKey %q, want %q", r.GroupKey, tt.wantKey)
			}
			if got := string(st.Output(r.GroupKey)); got != tt.want {
				t.Fatalf("output %s, want %s", got, tt.want)
			}
			// The type survives the changelog.
			enc, err := st.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			back, err := agg.DecodeState(enc)
			if err != nil {
				t.Fatalf("%x: %v", enc, err)
			}
			if got := string(back.Output(r.GroupKey)); got != tt.want {
				t.Fatalf("restored output %s, want %s", got, tt.want)
			}
		})
	}
}

// TestGroupKeyKindEncoding pins the state encodings: a string key's state
// is version 1, byte for byte as before kinds were kept (the parity-sum
// state of testdata in checkpoint/savepoint), and a version 1 state
// restores with a string key even when its key looks like a number (as
// states of number keys written before were), until a record changes it.
func TestGroupKeyKindEncoding(t *testing.T) {
	c := mustCompile(t, keyByStep("x"), aggStep("", val("count", config.AggCount, ""), val("sum", config.AggSum, "n")))
	agg := c.Aggregator()
	// count 3, sum 6: checkpoint/savepoint/testdata/v1, key "even".
	v1, _ := hex.DecodeString("010205636f756e74030101030373756d040102010c")
	st, err := agg.DecodeState(v1)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(st.Output("0")); got != `{"key":"0","count":3,"sum":6}` {
		t.Fatalf("version 1 state: %s", got)
	}
	if enc, _ := st.MarshalBinary(); !bytes.Equal(enc, v1) {
		t.Fatalf("version 1 state re-encoded as %x", enc)
	}
	r := jsonRecord(`{"x":0,"n":4}`)
	if _, err := c.Process(r); err != nil {
		t.Fatal(err)
	}
	if changed, err := agg.Add(st, r); err != nil || !changed {
		t.Fatal(changed, err)
	}
	if got := string(st.Output(r.GroupKey)); got != `{"key":0,"count":4,"sum":10}` {
		t.Fatalf("after a number key: %s", got)
	}
	enc, _ := st.MarshalBinary()
	if want := "02010205636f756e74030101040373756d0401020114"; hex.EncodeToString(enc) != want {
		t.Fatalf("number key state %x, want %s", enc, want)
	}
	for _, bad := range []string{"0200", "020305636f756e74030101040373756d0401020114", "03"} {
		b, _ := hex.DecodeString(bad)
		if _, err := agg.DecodeState(b); err == nil {
			t.Errorf("%s decoded", bad)
		}
	}
	// A damaged state whose kind does not fit its key still writes JSON.
	if got := string(st.Output("zero")); got != `{"key":"zero","count":4,"sum":10}` {
		t.Fatalf("mismatched kind: %s", got)
	}
}
