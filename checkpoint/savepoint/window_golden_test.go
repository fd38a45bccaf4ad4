package savepoint

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eoflow/pipeline/checkpoint"
	"github.com/eoflow/pipeline/state"
)

// goldenWindows is a version 1 savepoint of a windowed job with event
// time, written once by TestGoldenWindows -write-golden. Never edit or
// regenerate it: every future version of the pipeline must read it as
// the golden functions below say.
const goldenWindows = "testdata/v1-windows"

// goldenWindowEntries are the open windows of "counts" over 8 key groups,
// exported by two workers. The savepoint does not interpret values (the
// runtime's window state encoding is the runtime's to pin), so these are
// plain bytes.
func goldenWindowEntries() []testEntry {
	return []testEntry{
		{Operator: "counts", Group: 3, Key: "even", Value: "\x01\x01windows-of-even"},
		{Operator: "counts", Group: 4, Key: "ünïcode", Value: ""},
		{Operator: "counts", Group: 7, Key: "odd", Value: "\x01\x02windows-of-odd"},
	}
}

func goldenWindowMeta() Meta {
	return Meta{
		Job: "parity-windows", CheckpointID: 43,
		Created:           time.Date(2026, 12, 2, 10, 0, 5, 250e6, time.UTC),
		ConfigFingerprint: "0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0",
		KeyGroups:         8, Guarantee: "exactly_once",
	}
}

func goldenWindowDesc() AggregateDesc {
	return AggregateDesc{
		KeyBy:  `n % 2 == 0 ? "even" : "odd"`,
		Window: &WindowDesc{Kind: "hopping", SizeMs: 10000, AdvanceMs: 5000},
		Values: []Value{{Name: "count", Func: "count"}, {Name: "sum", Func: "sum", Arg: "n"}},
	}
}

func goldenWindowOffsets() map[string][]checkpoint.SourceOffset {
	return map[string][]checkpoint.SourceOffset{
		"numbers": {{Topic: "numbers", Partition: 0, Offset: 120}, {Topic: "numbers", Partition: 1, Offset: 0}, {Topic: "more", Partition: 0, Offset: 9}},
	}
}

// goldenEventTime: numbers/1 has delivered no record yet, so it holds the
// watermark at none.
func goldenEventTime() *checkpoint.EventTime {
	return &checkpoint.EventTime{Watermark: checkpoint.NoEventTime, Partitions: []checkpoint.PartitionTime{
		{Topic: "more", Partition: 0, MaxEventTime: 1796205609500},
		{Topic: "numbers", Partition: 0, MaxEventTime: 1796205601234},
		{Topic: "numbers", Partition: 1, MaxEventTime: checkpoint.NoEventTime},
	}}
}

func writeGoldenWindows(t *testing.T, dir string) {
	t.Helper()
	w, err := Create(dir, goldenWindowMeta(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	op, err := w.Aggregate("counts", goldenWindowDesc())
	if err != nil {
		t.Fatal(err)
	}
	for _, rng := range []state.Range{{Start: 0, End: 4}, {Start: 4, End: 8}} {
		p, err := op.Part(rng)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range goldenWindowEntries() {
			if rng.Contains(e.Group) {
				if err := p.Add(state.Entry{Group: e.Group, Key: []byte(e.Key), Value: []byte(e.Value)}); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
	}
	for id, offs := range goldenWindowOffsets() {
		if err := w.Source(id, offs); err != nil {
			t.Fatal(err)
		}
	}
	w.SetEventTime(goldenEventTime())
	if _, err := w.Commit(); err != nil {
		t.Fatal(err)
	}
}

// TestGoldenWindows reads the windowed savepoint of testdata/v1-windows:
// its window operator, its state, restored into workers as the runtime
// does, and its event time, "none yet" included; then writes it again and
// demands the same bytes.
func TestGoldenWindows(t *testing.T) {
	if _, err := os.Stat(goldenWindows); errors.Is(err, os.ErrNotExist) && *writeGolden {
		writeGoldenWindows(t, goldenWindows)
	}
	r, err := Open(goldenWindows)
	if err != nil {
		t.Fatalf("%v (run go test -run TestGoldenWindows -write-golden once to create it)", err)
	}
	if err := r.Verify(nil); err != nil {
		t.Fatal(err)
	}
	m := r.Manifest()
	op := m.Operator("counts")
	if op == nil || op.Kind != KindWindow || !reflect.DeepEqual(*op.Aggregate, goldenWindowDesc()) || op.Keys != 3 || len(op.Files) != 2 {
		t.Fatalf("window counts: %+v", op)
	}
	if got := m.EventTime.Checkpoint(); !reflect.DeepEqual(got, goldenEventTime()) {
		t.Errorf("event time\n got: %+v\nwant: %+v", got, goldenEventTime())
	}
	if got := readAll(t, r); !reflect.DeepEqual(got, goldenWindowEntries()) {
		t.Errorf("entries\n got: %v\nwant: %v", got, goldenWindowEntries())
	}
	// A restore into 3 workers feeds each its key groups' windows.
	var restored []testEntry
	for w := range 3 {
		rng := state.RangeFor(w, 3, 8)
		s, _ := state.New[[]byte]("counts", 8, rng, state.BytesCodec{})
		rs, _ := state.NewRestorer(8, rng)
		must(t, rs.Register(s))
		if _, err := r.Restore(rs, rng, []string{"counts"}); err != nil {
			t.Fatal(err)
		}
		restored = append(restored, storeEntries([]*state.Store[[]byte]{s})...)
	}
	if !reflect.DeepEqual(restored, goldenWindowEntries()) {
		t.Errorf("restored\n got: %v\nwant: %v", restored, goldenWindowEntries())
	}

	fresh := filepath.Join(t.TempDir(), "v1-windows")
	writeGoldenWindows(t, fresh)
	names := dirNames(t, goldenWindows)
	if got := dirNames(t, fresh); !slices.Equal(got, names) {
		t.Fatalf("the writer now writes files %v, v1-windows has %v", got, names)
	}
	for _, name := range names {
		want, err := os.ReadFile(filepath.Join(goldenWindows, name))
		must(t, err)
		got, err := os.ReadFile(filepath.Join(fresh, name))
		must(t, err)
		if !bytes.Equal(got, want) {
			t.Errorf("the writer no longer writes the bytes of %s: bump Version and add a new golden\n got: %q\nwant: %q", name, got, want)
		}
	}
}

// TestGoldenInspectWindows pins what `pipeline savepoint inspect` prints
// for a window and event time, and the JSON of its event time.
func TestGoldenInspectWindows(t *testing.T) {
	s, err := Inspect(goldenWindows)
	if err != nil {
		t.Fatal(err)
	}
	want := `savepoint testdata/v1-windows
  job          parity-windows
  created      2026-12-02T10:00:05.250Z
  checkpoint   43
  format       version 1, id ` + s.ID + `
  fingerprint  0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0
  key groups   8
  guarantee    exactly_once
sources
  numbers
    more/0: 9
    numbers/0: 120
    numbers/1: 0
operators
  counts (window): 3 keys, 49 B in 2 files (` + humanBytes(s.Operators[0].FileBytes) + ` on disk)
    window  hopping 10s every 5s
    key_by  n % 2 == 0 ? "even" : "odd"
    values  count: count(), sum: sum(n)
event time
  watermark    none yet
    more/0: largest event time 2026-12-02T10:00:09.5Z
    numbers/0: largest event time 2026-12-02T10:00:01.234Z
    numbers/1: largest event time none yet
`
	if got := s.String(); got != want {
		t.Errorf("inspect:\n%s\nwant:\n%s", got, want)
	}
	b, err := json.Marshal(s)
	must(t, err)
	for _, part := range []string{
		`"kind":"window","aggregate":{"key_by":"n % 2 == 0 ? \"even\" : \"odd\"","window":{"kind":"hopping","size_ms":10000,"advance_ms":5000},"values":`,
		`"event_time":{"watermark":null,"partitions":[{"topic":"more","partition":0,"max_event_time":1796205609500},{"topic":"numbers","partition":0,"max_event_time":1796205601234},{"topic":"numbers","partition":1,"max_event_time":null}]}`,
	} {
		if !bytes.Contains(b, []byte(part)) {
			t.Errorf("inspect JSON lacks %s:\n%s", part, b)
		}
	}
	// A savepoint without event time has no event_time at all.
	v1, err := Inspect(goldenV1)
	must(t, err)
	if b, _ := json.Marshal(v1); bytes.Contains(b, []byte("event_time")) || bytes.Contains(b, []byte(`"window"`)) {
		t.Errorf("v1 inspect JSON: %s", b)
	}
}

// TestWindowManifestDamage: a manifest whose window or event time is not
// well formed is refused by Open, saying where.
func TestWindowManifestDamage(t *testing.T) {
	tests := []struct {
		name string
		edit func(string) string
		want string // a regexp
	}{
		{"unknown window kind", replace(`"kind": "hopping"`, `"kind": "sliding"`),
			`operators\[0\] "counts": aggregate.window \{"kind":"sliding","size_ms":10000,"advance_ms":5000\}: kind must be tumbling, hopping or session`},
		{"advance over size", replace(`"advance_ms": 5000`, `"advance_ms": 20000`), `\{"kind":"hopping","size_ms":10000,"advance_ms":20000\}: a hopping window has a size_ms above 0, an advance_ms above 0 and at most size_ms, and no gap_ms`},
		{"hopping without advance", replace(`,
          "advance_ms": 5000`, ``), `\{"kind":"hopping","size_ms":10000\}: a hopping window has`},
		{"session with a size", replace(`"kind": "hopping"`, `"kind": "session"`), `\{"kind":"session","size_ms":10000,"advance_ms":5000\}: a session window has a gap_ms above 0 and no size_ms or advance_ms`},
		{"window without a shape", func(s string) string {
			return regexp.MustCompile(`(?s)"window": \{.*?\},\s*`).ReplaceAllString(s, "")
		}, `operators\[0\] "counts": a window needs its shape \(aggregate.window\)`},
		{"aggregate with a shape", replace(`"kind": "window"`, `"kind": "aggregate"`), `operators\[0\] "counts": an aggregate has no window`},
		{"window with offsets", replace(`"kind": "window",`, `"kind": "window", "offsets": [{"topic": "x", "partition": 0, "offset": 1}],`), `operators\[0\] "counts": a window has no offsets`},
		{"event time partitions out of order", func(s string) string {
			s = strings.Replace(s, `"topic": "more",
        "partition": 0,
        "max_event_time"`, `"topic": "zzz",
        "partition": 0,
        "max_event_time"`, 1)
			return s
		}, `event_time.partitions\[1\] numbers/0: not after zzz/0 \(sorted by topic, then partition, once each\)`},
		{"event time partition twice", replace(`"partition": 1,
        "max_event_time"`, `"partition": 0,
        "max_event_time"`), `event_time.partitions\[2\] numbers/0: not after numbers/0`},
		{"event time of a partition without an offset", replace(`"partition": 1,
        "max_event_time"`, `"partition": 7,
        "max_event_time"`), `event_time.partitions\[2\] numbers/7: no source holds this partition's offset`},
		{"event time field unknown", replace(`"watermark": null`, `"watermark": null, "low": 1`), `unknown field "low"`},
		{"watermark not a number", replace(`"watermark": null`, `"watermark": "soon"`), `cannot unmarshal string`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := copyDir(t, goldenWindows)
			before, err := os.ReadFile(filepath.Join(dir, ManifestFile))
			must(t, err)
			rewrite(tc.edit)(t, dir)
			after, err := os.ReadFile(filepath.Join(dir, ManifestFile))
			must(t, err)
			if bytes.Equal(before, after) {
				t.Fatal("the edit changed nothing")
			}
			_, err = Open(dir)
			if !errors.Is(err, ErrCorrupt) || !regexp.MustCompile(tc.want).MatchString(err.Error()) {
				t.Fatalf("got  %v\nwant ErrCorrupt matching %s", err, tc.want)
			}
			t.Log(err)
		})
	}
}

func replace(old, new string) func(string) string {
	return func(s string) string { return strings.Replace(s, old, new, 1) }
}

// TestWriterWindowErrors: the writer refuses a window without a valid
// shape when it is declared, and event time that does not match the
// offsets when it commits.
func TestWriterWindowErrors(t *testing.T) {
	w, err := Create(filepath.Join(t.TempDir(), "sp"), goldenWindowMeta(), Options{})
	must(t, err)
	defer w.Abort()
	bad := goldenWindowDesc()
	bad.Window = &WindowDesc{Kind: "hopping", SizeMs: 1000, AdvanceMs: 2000}
	if _, err := w.Aggregate("counts", bad); err == nil || !strings.Contains(err.Error(), `window "counts": aggregate.window {"kind":"hopping","size_ms":1000,"advance_ms":2000}: a hopping window has`) {
		t.Errorf("Aggregate with a bad window: %v", err)
	}
	desc := goldenWindowDesc()
	op, err := w.Aggregate("counts", desc)
	must(t, err)
	desc.Window.SizeMs = 1 // the writer keeps its own copy
	must(t, op.WriteAll(state.Range{Start: 0, End: 8}, func(func(state.Entry) bool) {}))
	must(t, w.Source("numbers", []checkpoint.SourceOffset{{Topic: "numbers", Partition: 0, Offset: 1}}))
	w.SetEventTime(&checkpoint.EventTime{Watermark: 5, Partitions: []checkpoint.PartitionTime{{Topic: "other", Partition: 0, MaxEventTime: 9}}})
	if _, err := w.Commit(); err == nil || !strings.Contains(err.Error(), "event_time.partitions[0] other/0: no source holds this partition's offset") {
		t.Fatalf("Commit with event time of an unread partition: %v", err)
	}
}

// TestWindowManifestRoundTrip: a manifest with windows and event time,
// encoded and decoded, is the same manifest; without them it has neither
// field.
func TestWindowManifestRoundTrip(t *testing.T) {
	r, err := Open(goldenWindows)
	must(t, err)
	b, err := encodeManifest(r.Manifest())
	must(t, err)
	back, err := decodeManifest(b, goldenWindows)
	must(t, err)
	if !reflect.DeepEqual(back, r.Manifest()) {
		t.Errorf("round trip\n got: %+v\nwant: %+v", back, r.Manifest())
	}
	v1, err := os.ReadFile(filepath.Join(goldenV1, ManifestFile))
	must(t, err)
	if bytes.Contains(v1, []byte("event_time")) || bytes.Contains(v1, []byte(`"window"`)) {
		t.Errorf("a manifest without windows or event time mentions them:\n%s", v1)
	}
}

// FuzzDecodeManifest: no manifest, however damaged, panics the reader or
// inspect, or gets an error of no sentinel; one it accepts encodes to
// what it decodes to.
func FuzzDecodeManifest(f *testing.F) {
	for _, dir := range []string{goldenV1, goldenWindows} {
		b, err := os.ReadFile(filepath.Join(dir, ManifestFile))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := decodeManifest(b, "fuzz")
		if err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrNotSavepoint) && !errors.Is(err, ErrUnknownVersion) {
				t.Fatalf("unclassified error: %v", err)
			}
			return
		}
		_ = (&Reader{dir: "fuzz", m: m}).Summary().String()
		_ = m.EventTime.Checkpoint()
		enc, err := encodeManifest(m)
		if err != nil {
			t.Fatal(err)
		}
		back, err := decodeManifest(enc, "fuzz")
		if err != nil {
			t.Fatalf("an accepted manifest re-encoded is refused: %v\n%s", err, enc)
		}
		// Equal up to empty and absent lists, which encode alike.
		if again, err := encodeManifest(back); err != nil || !bytes.Equal(again, enc) {
			t.Fatalf("round trip changed the manifest (%v)\n got: %s\nwant: %s", err, again, enc)
		}
	})
}
