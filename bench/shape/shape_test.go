package shape

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/eoflow/pipeline/internal/datagen"
)

// peerStr and peerField are the Kafka Streams and Flink peers' field scan
// (bench/peers/*/src/main/java/bench/KeyedSum.java: str and field),
// line for line: the first occurrence of name anywhere in the text.
func peerStr(json, name string) string {
	i := strings.Index(json, name)
	if i < 0 {
		return ""
	}
	i += len(name)
	return json[i : i+strings.IndexByte(json[i:], '"')]
}

func peerField(json, name string) int64 {
	i := strings.Index(json, name)
	if i < 0 {
		return 0
	}
	i += len(name)
	j := i
	for j < len(json) && (json[j] >= '0' && json[j] <= '9' || json[j] == '-') {
		j++
	}
	v, _ := strconv.ParseInt(json[i:j], 10, 64)
	return v
}

func TestWideSizesAndFields(t *testing.T) {
	for _, tc := range []struct {
		size, fields int
	}{
		{100, 6},     // key, amount, ts, pad and 2 unused
		{1000, 46},   // 4 + 42 unused
		{10000, 432}, // 4 + 428 unused
	} {
		r := rand.New(rand.NewPCG(1, 2))
		for _, key := range []string{"k0", "k9999999"} {
			v := Wide(nil, key, 517, 1733300000123, tc.size, r)
			if len(v) != tc.size {
				t.Errorf("size %d, key %s: %d bytes", tc.size, key, len(v))
			}
			var m map[string]any
			d := json.NewDecoder(bytes.NewReader(v))
			d.UseNumber()
			if err := d.Decode(&m); err != nil {
				t.Fatalf("size %d: not JSON: %v\n%s", tc.size, err, v)
			}
			if m["key"] != key || m["amount"] != json.Number("517") || m["ts"] != json.Number("1733300000123") {
				t.Errorf("size %d: job fields key=%v amount=%v ts=%v", tc.size, m["key"], m["amount"], m["ts"])
			}
			if len(m) != tc.fields {
				t.Errorf("size %d: %d fields, want %d", tc.size, len(m), tc.fields)
			}
			// The peers read the same three values.
			s := string(v)
			if got := peerStr(s, `"key":"`); got != key {
				t.Errorf("size %d: peer scan key %q", tc.size, got)
			}
			if got := peerField(s, `"amount":`); got != 517 {
				t.Errorf("size %d: peer scan amount %d", tc.size, got)
			}
			if got := peerField(s, `"ts":`); got != 1733300000123 {
				t.Errorf("size %d: peer scan ts %d", tc.size, got)
			}
			// ... because each name occurs once, at any depth.
			for _, name := range []string{`"key"`, `"amount"`, `"ts"`} {
				if n := strings.Count(s, name); n != 1 {
					t.Errorf("size %d: %s occurs %d times", tc.size, name, n)
				}
			}
		}
	}
}

func TestWideHasEveryKindAtOneKB(t *testing.T) {
	v := Wide(nil, "k1", 1, 1, 1000, rand.New(rand.NewPCG(3, 4)))
	var m map[string]any
	if err := json.Unmarshal(v, &m); err != nil {
		t.Fatal(err)
	}
	var obj, arr, null, boolean, num, str bool
	for k, x := range m {
		switch x := x.(type) {
		case map[string]any:
			obj = len(x) == 4
		case []any:
			arr = true
		case nil:
			null = true
		case bool:
			boolean = true
		case float64:
			num = true
		case string:
			str = str || k != "key" && k != "pad"
		}
	}
	if !obj || !arr || !null || !boolean || !num || !str {
		t.Errorf("1 KB record lacks a kind: object %v array %v null %v bool %v number %v string %v\n%s", obj, arr, null, boolean, num, str, v)
	}
}

// One size, one layout: every record has the same field names.
func TestWideLayoutIsStable(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	names := func(v []byte) string {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(v, &m); err != nil {
			t.Fatal(err)
		}
		var ks []string
		for k := range m {
			ks = append(ks, k)
		}
		return strings.Join(sortStrings(ks), ",")
	}
	a := names(Wide(nil, "k1", 1, 1733300000000, 1000, r))
	b := names(Wide(nil, "k12345", 999, 1733300009999, 1000, r))
	if a != b {
		t.Errorf("layouts differ:\n%s\n%s", a, b)
	}
}

func sortStrings(s []string) []string {
	for i := range s {
		for j := i + 1; j < len(s); j++ {
			if s[j] < s[i] {
				s[i], s[j] = s[j], s[i]
			}
		}
	}
	return s
}

// The default shape is datagen.Event, byte for byte (the results so far
// were measured on it).
func TestFlatIsTheEvent(t *testing.T) {
	got := Value("flat", "k42", 7, 1733300000000, 100, nil)
	want := datagen.Event("k42", 7, 1733300000000, 100)
	if !bytes.Equal(got, want) {
		t.Errorf("flat %s, want %s", got, want)
	}
	if !strings.HasPrefix(string(got), `{"key":"k42","amount":7,"ts":1733300000000,"pad":"xxx`) || len(got) != 100 {
		t.Errorf("flat record changed: %s (%d bytes)", got, len(got))
	}
	if Check("wide") != nil || Check("flat") != nil || Check("tall") == nil {
		t.Error("Check")
	}
}
