package checkpoint

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"hash/crc32"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

var writeGolden = flag.Bool("write-golden", false, "write testdata/record-v*.golden files that do not exist (never overwrites: a format change is a new version and a new file)")

const (
	goldenV1 = "testdata/record-v1.golden"
	goldenV2 = "testdata/record-v2.golden"
	goldenV3 = "testdata/record-v3.golden"
	goldenV4 = "testdata/record-v4.golden"
	goldenV5 = "testdata/record-v5.golden"
	goldenV6 = "testdata/record-v6.golden"
)

// goldenRecordV6 is the record pinned in testdata/record-v6.golden: the
// v5 record with held join records (opaque bytes here). Never change it.
func goldenRecordV6() *Record {
	r := goldenRecordV5()
	r.Held = []byte{1, 2, 0x2a, 0, 0xff}
	return r
}

// goldenRecordV5 is the record pinned in testdata/record-v5.golden: the
// v3 record with two tables (no event time). Never change it.
func goldenRecordV5() *Record {
	r := goldenRecordV3()
	r.Tables = []TableOffsets{
		{ID: "customers", Topic: "customers", Offsets: []PartitionOffset{{Partition: 0, Offset: 1000}, {Partition: 1, Offset: 0}, {Partition: 2, Offset: 77}}},
		{ID: "products", Topic: "product-catalog", Offsets: []PartitionOffset{{Partition: 0, Offset: 5}}},
	}
	return r
}

// goldenRecordV4 is the record pinned in testdata/record-v4.golden: the
// v3 record with a window operator and its event time (one partition has
// read nothing yet). Never change it.
func goldenRecordV4() *Record {
	r := goldenRecordV3()
	r.OperatorIDs = append(r.OperatorIDs, "window-3")
	r.Operators = append(r.Operators, OperatorDesc{ID: "window-3", Kind: KindWindow, KeyBy: "customer", Values: []AggregateValue{
		{Name: "n", Func: "count"},
	}, Window: WindowDesc{Kind: WindowHopping, Size: 300_000, Advance: 60_000}})
	r.EventTime = &EventTime{Watermark: 1748779195000, Partitions: []PartitionTime{
		{Topic: "events", Partition: 0, MaxEventTime: 1748779200000},
		{Topic: "events", Partition: 1, MaxEventTime: NoEventTime},
		{Topic: "events", Partition: 2, MaxEventTime: 1748779199000},
		{Topic: "more-events", Partition: 0, MaxEventTime: -5},
	}}
	return r
}

// goldenRecordV3 is the record pinned in testdata/record-v3.golden: the
// v1 record with its operators described (a source reading two topics,
// an aggregate). Never change it.
func goldenRecordV3() *Record {
	r := goldenRecord()
	r.Operators = []OperatorDesc{
		{ID: "aggregate-2", Kind: KindAggregate, KeyBy: `n % 2 == 0 ? "even" : "odd"`, Values: []AggregateValue{
			{Name: "count", Func: "count"}, {Name: "sum", Func: "sum", Arg: "n"},
		}},
		{ID: "source-0", Kind: KindSource, Topics: []string{"events", "more-events"}},
	}
	return r
}

// goldenRecordV2 is the record pinned in testdata/record-v2.golden: the
// v1 record, restored from a savepoint. Never change it.
func goldenRecordV2() *Record {
	r := goldenRecord()
	r.Savepoint = "sha256:5d41402abc4b2a76b9719d911017c592"
	return r
}

// goldenRecord is the record pinned in testdata/record-v1.golden. Never
// change it: the file proves today's bytes stay readable.
func goldenRecord() *Record {
	return &Record{
		ID:                42,
		Job:               "parity-sum",
		ConfigFingerprint: "sha256:9f2c4e1d",
		KeyGroups:         128,
		OperatorIDs:       []string{"aggregate-2", "source-0"},
		Offsets: []SourceOffset{
			{Topic: "events", Partition: 0, Offset: 1234},
			{Topic: "events", Partition: 1, Offset: 0},
			{Topic: "events", Partition: 2, Offset: 987654321},
			{Topic: "more-events", Partition: 0, Offset: 7},
		},
		CreatedUnixMilli: 1748779200123,
		Guarantee:        "exactly_once",
		State: []StateSummary{
			{Operator: "aggregate-2", Keys: 2, Bytes: 96},
			{Operator: "source-0", Keys: 4, Bytes: 64},
		},
	}
}

// readHexFile reads hex digits, ignoring whitespace and "#" comment lines.
func readHexFile(t *testing.T, path string) []byte {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var digits strings.Builder
	for line := range strings.Lines(string(raw)) {
		if strings.HasPrefix(line, "#") {
			continue
		}
		digits.WriteString(strings.Join(strings.Fields(line), ""))
	}
	b, err := hex.DecodeString(digits.String())
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return b
}

func writeHexFile(t *testing.T, path string, b []byte) {
	t.Helper()
	var out strings.Builder
	fn := "goldenRecord()"
	switch b[0] {
	case 2:
		fn = "goldenRecordV2()"
	case 3:
		fn = "goldenRecordV3()"
	case 4:
		fn = "goldenRecordV4()"
	case 5:
		fn = "goldenRecordV5()"
	case 6:
		fn = "goldenRecordV6()"
	}
	fmt.Fprintf(&out, "# checkpoint record, format v%d: %s in record_test.go. Never edit.\n", b[0], fn)
	for len(b) > 0 {
		n := min(32, len(b))
		out.WriteString(hex.EncodeToString(b[:n]) + "\n")
		b = b[n:]
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(out.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// Every format version stays readable, and a record is still written in
// the version its fields call for: v1 without a savepoint, v2 with one, v3
// with operator descriptions.
func TestRecordGolden(t *testing.T) {
	for _, tt := range []struct {
		version byte
		path    string
		record  func() *Record
	}{
		{1, goldenV1, goldenRecord},
		{2, goldenV2, goldenRecordV2},
		{3, goldenV3, goldenRecordV3},
		{4, goldenV4, goldenRecordV4},
		{5, goldenV5, goldenRecordV5},
		{6, goldenV6, goldenRecordV6},
	} {
		t.Run(fmt.Sprintf("v%d", tt.version), func(t *testing.T) {
			if _, err := os.Stat(tt.path); errors.Is(err, os.ErrNotExist) && *writeGolden {
				b, err := EncodeRecord(tt.record())
				if err != nil {
					t.Fatal(err)
				}
				writeHexFile(t, tt.path, b)
			}
			golden := readHexFile(t, tt.path)
			if golden[0] != tt.version {
				t.Fatalf("%s starts with version %d", tt.path, golden[0])
			}
			got, err := DecodeRecord(golden)
			if err != nil {
				t.Fatalf("today's build cannot read format v%d: %v", tt.version, err)
			}
			if want := tt.record(); !reflect.DeepEqual(got, want) {
				t.Fatalf("decoded golden v%d\n got: %+v\nwant: %+v", tt.version, got, want)
			}
			enc, err := EncodeRecord(tt.record())
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(enc, golden) {
				t.Fatalf("EncodeRecord no longer writes the v%d bytes: bump RecordVersion and add a golden file for the new version\n got: %x\nwant: %x", tt.version, enc, golden)
			}
			if got.Created() != time.Date(2025, 6, 1, 12, 0, 0, 123e6, time.UTC) {
				t.Errorf("Created() = %v", got.Created())
			}
		})
	}
}

// seal wraps a v1 payload in a valid header, so a test (or the fuzzer)
// reaches the payload parser past the CRC.
func seal(payload []byte) []byte {
	return sealVersion(recordV1, payload)
}

// sealVersion wraps a payload of the given version in a valid header.
func sealVersion(version byte, payload []byte) []byte {
	b := []byte{version, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(b[1:], crc32.Checksum(payload, castagnoli))
	return append(b, payload...)
}

// payload builds a v1 payload from parts: uint64 → uvarint, int64 → zig-zag
// varint, string → length-prefixed, []byte → raw.
func payload(parts ...any) []byte {
	var b []byte
	for _, p := range parts {
		switch v := p.(type) {
		case uint64:
			b = binary.AppendUvarint(b, v)
		case int:
			b = binary.AppendUvarint(b, uint64(v))
		case int64:
			b = binary.AppendVarint(b, v)
		case string:
			b = appendString(b, v)
		case []byte:
			b = append(b, v...)
		default:
			panic(fmt.Sprintf("payload: %T", p))
		}
	}
	return b
}

func TestDecodeRecordRejects(t *testing.T) {
	// head is a valid payload up to (not including) the operator ids.
	head := []any{42, "job", "fp", 8, int64(0), "exactly_once"}
	p := func(tail ...any) []byte { return seal(payload(append(append([]any{}, head...), tail...)...)) }
	tests := []struct {
		name string
		in   []byte
		want error
		msg  string
	}{
		{"empty", nil, ErrCorruptRecord, "empty value"},
		{"version 0", []byte{0, 1, 2, 3, 4, 5}, ErrUnknownVersion, "version 0: this build reads versions 1 to 6"},
		{"a newer version", append([]byte{7}, p(0, 0, 0)[1:]...), ErrUnknownVersion, "version 7"},
		{"v6 without held records", sealVersion(6, payload(append(append([]any{}, head...), 1, "a", []byte{2}, "k", 1, "n", "count", "", 0, 0, "", []byte{0}, 1, "t", "topic", 1, 0, int64(3), "")...)), ErrCorruptRecord, "held: none in a v6 record"},
		{"v5 without tables", sealVersion(5, payload(append(append([]any{}, head...), 1, "a", []byte{2}, "k", 1, "n", "count", "", 0, 0, "", []byte{0}, 0)...)), ErrCorruptRecord, "tables: none in a v5 record"},
		{"v5 table without partitions", sealVersion(5, payload(append(append([]any{}, head...), 1, "a", []byte{2}, "k", 1, "n", "count", "", 0, 0, "", []byte{0}, 1, "t", "topic", 0)...)), ErrCorruptRecord, "no partitions"},
		{"v5 table partitions unsorted", sealVersion(5, payload(append(append([]any{}, head...), 1, "a", []byte{2}, "k", 1, "n", "count", "", 0, 0, "", []byte{0}, 1, "t", "topic", 2, 1, int64(0), 0, int64(0))...)), ErrCorruptRecord, "not after 1"},
		{"v3 window operator", sealVersion(3, payload(append(append([]any{}, head...), 1, "a", []byte{3}, "k", 1, "n", "count", "", []byte{1}, 5, 0, 0, 0, 0, "")...)), ErrCorruptRecord, "kind 3 is v4 and later"},
		{"v4 with neither event time nor window", sealVersion(4, payload(append(append([]any{}, head...), 1, "a", []byte{2}, "k", 1, "n", "count", "", 0, 0, "", []byte{0})...)), ErrCorruptRecord, "neither event time nor a window"},
		{"v4 event time flag", sealVersion(4, payload(append(append([]any{}, head...), 1, "a", []byte{2}, "k", 1, "n", "count", "", 0, 0, "", []byte{2})...)), ErrCorruptRecord, "flag not 0 or 1"},
		{"v4 event time topics unsorted", sealVersion(4, payload(append(append([]any{}, head...), 1, "a", []byte{2}, "k", 1, "n", "count", "", 0, 0, "", []byte{1}, 0, 2, "b", 1, 0, 0, "a", 1, 0, 0)...)), ErrCorruptRecord, "event_time.topic[1]: topics not sorted"},
		{"v4 hopping advance beyond size", sealVersion(4, payload(append(append([]any{}, head...), 1, "a", []byte{3}, "k", 1, "n", "count", "", []byte{2}, 5, 6, 0, 0, 0, "", []byte{0})...)), ErrCorruptRecord, "not a valid window"},
		{"v3 without operators", sealVersion(3, payload(append(append([]any{}, head...), 0, 0, 0, "")...)), ErrCorruptRecord, "operator_ids: none in a v3 record"},
		{"v3 operator of unknown kind", sealVersion(3, payload(append(append([]any{}, head...), 1, "a", []byte{9}, 0, 0, "")...)), ErrCorruptRecord, "operators.kind[0]: unknown kind 9"},
		{"v3 aggregate without values", sealVersion(3, payload(append(append([]any{}, head...), 1, "a", []byte{2}, "k", 0, 0, 0, "")...)), ErrCorruptRecord, "an aggregate has at least one value"},
		{"v3 source topics unsorted", sealVersion(3, payload(append(append([]any{}, head...), 1, "a", []byte{1}, 2, "y", "x", 0, 0, "")...)), ErrCorruptRecord, `topics[1] "x"`},
		{"v2 without its savepoint", sealVersion(2, payload(append(append([]any{}, head...), 0, 0, 0)...)), ErrCorruptRecord, "v2 payload byte 31: savepoint: truncated"},
		{"v2 with an empty savepoint", sealVersion(2, payload(append(append([]any{}, head...), 0, 0, 0, "")...)), ErrCorruptRecord, "savepoint: empty in a v2 record"},
		{"header cut short", []byte{1, 0, 0}, ErrCorruptRecord, "shorter than the 5-byte header"},
		{"crc mismatch", func() []byte { b := p(0, 0, 0); b[len(b)-1] ^= 1; return b }(), ErrCorruptRecord, "CRC-32C"},
		{"truncated payload", seal(payload(42, "job")), ErrCorruptRecord, "config_fingerprint: truncated"},
		{"trailing bytes", p(0, 0, 0, []byte{9}), ErrCorruptRecord, "1 trailing bytes"},
		{"non-minimal varint", seal(append([]byte{0xaa, 0x00}, payload(head[1:]...)...)), ErrCorruptRecord, "id: varint not minimally encoded"},
		{"varint overflow", seal(bytes.Repeat([]byte{0xff}, 11)), ErrCorruptRecord, "overflows 64 bits"},
		{"count beyond input", p(1000, "a"), ErrCorruptRecord, "operator_ids: count 1000 exceeds"},
		{"string beyond input", p(1, []byte{0x7f}), ErrCorruptRecord, "operator_ids[0]: length 127 exceeds"},
		{"huge string length", p(1, []byte{0xff, 0xff, 0xff, 0xff, 0x0f}), ErrCorruptRecord, "exceeds"},
		{"id 0", seal(payload(0, "job", "fp", 8, int64(0), "g", 0, 0, 0)), ErrCorruptRecord, "id: must not be 0"},
		{"no job", seal(payload(1, "", "fp", 8, int64(0), "g", 0, 0, 0)), ErrCorruptRecord, "job: required"},
		{"key groups 0", seal(payload(1, "job", "fp", 0, int64(0), "g", 0, 0, 0)), ErrCorruptRecord, "key groups 0"},
		{"key groups past int32", seal(payload(1, "job", "fp", uint64(math.MaxInt32)+1, int64(0), "g", 0, 0, 0)), ErrCorruptRecord, "key_groups: 2147483648 out of range"},
		{"operators unsorted", p(2, "b", "a", 0, 0), ErrCorruptRecord, `operator_ids[1] "a": not after "b"`},
		{"operators repeated", p(2, "a", "a", 0, 0), ErrCorruptRecord, `operator_ids[1] "a": not after "a"`},
		{"topic without partitions", p(0, 1, "t", 0, 0), ErrCorruptRecord, "offsets.partitions[0]: a topic without partitions"},
		{"topic written twice", p(0, 2, "t", 1, 0, int64(5), "t", 1, 1, int64(5), 0), ErrCorruptRecord, "offsets.topic[1]: topics not sorted or repeated"},
		{"partitions unsorted", p(0, 1, "t", 2, 1, int64(5), 0, int64(5), 0), ErrCorruptRecord, "offsets[1] t/0: not after t/1"},
		{"partition past int32", p(0, 1, "t", 1, uint64(math.MaxInt32)+1, int64(5), 0), ErrCorruptRecord, "offsets.partition[0]: 2147483648 out of range"},
		{"state unsorted", p(0, 0, 2, "b", 1, 1, "a", 1, 1), ErrCorruptRecord, `state[1] "a": not after "b"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := DecodeRecord(tt.in)
			if !errors.Is(err, tt.want) || !strings.Contains(fmt.Sprint(err), tt.msg) {
				t.Fatalf("DecodeRecord = %+v, %v\nwant %v containing %q", r, err, tt.want, tt.msg)
			}
		})
	}
}

// Every truncation and every single-bit flip of a real record is an
// error, never a panic and never a different record.
func TestDecodeRecordDamage(t *testing.T) {
	good, err := EncodeRecord(goldenRecord())
	if err != nil {
		t.Fatal(err)
	}
	for n := range len(good) {
		if _, err := DecodeRecord(good[:n]); err == nil {
			t.Errorf("truncated to %d bytes: no error", n)
		}
	}
	for i := range len(good) * 8 {
		b := bytes.Clone(good)
		b[i/8] ^= 1 << (i % 8)
		if _, err := DecodeRecord(b); err == nil {
			t.Errorf("bit %d flipped: no error", i)
		}
	}
}

func TestEncodeRecordValidates(t *testing.T) {
	r := &Record{
		OperatorIDs: []string{"b", "a", ""},
		Offsets:     []SourceOffset{{Topic: "t", Partition: 1}, {Topic: "t", Partition: 1}, {Topic: "", Partition: -1}},
		State:       []StateSummary{{Operator: "x"}, {Operator: "x"}},
	}
	_, err := EncodeRecord(r)
	if !errors.Is(err, ErrInvalidRecord) {
		t.Fatalf("EncodeRecord = %v, want ErrInvalidRecord", err)
	}
	for _, want := range []string{
		"id: must not be 0",
		"job: required",
		"key groups 0: must be in 1..2147483647",
		`operator_ids[1] "a": not after "b"`,
		"operator_ids[2]: empty",
		"offsets[1] t/1: not after t/1",
		"offsets[2]: empty topic",
		"offsets[2] /-1: negative partition",
		`state[1] "x": not after "x"`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}

func TestNormalize(t *testing.T) {
	r := goldenRecord()
	r.OperatorIDs[0], r.OperatorIDs[1] = r.OperatorIDs[1], r.OperatorIDs[0]
	r.Offsets[0], r.Offsets[3] = r.Offsets[3], r.Offsets[0]
	r.Offsets[1], r.Offsets[2] = r.Offsets[2], r.Offsets[1]
	r.State[0], r.State[1] = r.State[1], r.State[0]
	if r.Validate() == nil {
		t.Fatal("shuffled record validates")
	}
	r.Normalize()
	if !reflect.DeepEqual(r, goldenRecord()) {
		t.Fatalf("Normalize = %+v", r)
	}
}

// randomRecord builds a valid record of any shape, extremes included.
func randomRecord(rng *rand.Rand) *Record {
	str := func(max int) string {
		b := make([]byte, 1+rng.IntN(max))
		for i := range b {
			b[i] = byte(rng.IntN(256))
		}
		return string(b)
	}
	r := &Record{
		ID:                ID(1 + rng.Uint64N(math.MaxUint64)),
		Job:               str(20),
		ConfigFingerprint: str(64)[1:],
		KeyGroups:         1 + rng.IntN(math.MaxInt32),
		CreatedUnixMilli:  int64(rng.Uint64()),
		Guarantee:         str(12)[1:],
	}
	seen := map[string]bool{}
	for range rng.IntN(5) {
		if op := str(10); !seen[op] {
			seen[op] = true
			r.OperatorIDs = append(r.OperatorIDs, op)
			r.State = append(r.State, StateSummary{Operator: op, Keys: rng.Uint64(), Bytes: rng.Uint64() >> rng.IntN(64)})
		}
	}
	parts := map[SourceOffset]bool{}
	for range rng.IntN(100) {
		o := SourceOffset{Topic: fmt.Sprintf("topic-%d", rng.IntN(4)), Partition: int32(rng.Int64N(math.MaxInt32+1)) >> rng.IntN(31)}
		if !parts[o] {
			parts[o] = true
			o.Offset = int64(rng.Uint64()) >> rng.IntN(64)
			r.Offsets = append(r.Offsets, o)
		}
	}
	if rng.IntN(2) == 0 {
		r.Savepoint = fmt.Sprintf("sha256:%x", rng.Uint64())
	}
	r.Normalize()
	if rng.IntN(3) > 0 {
		for _, id := range r.OperatorIDs {
			op := OperatorDesc{ID: id, Kind: KindSource}
			if rng.IntN(2) == 0 {
				op.Kind, op.KeyBy = KindAggregate, str(30)
				for range 1 + rng.IntN(4) {
					op.Values = append(op.Values, AggregateValue{Name: str(8), Func: str(5), Arg: str(10)[1:]})
				}
				if rng.IntN(3) == 0 {
					op.Kind = KindWindow
					size := 1 + rng.Int64N(math.MaxInt64)>>rng.IntN(63)
					op.Window = []WindowDesc{
						{Kind: WindowTumbling, Size: size},
						{Kind: WindowHopping, Size: size, Advance: 1 + rng.Int64N(size)},
						{Kind: WindowSession, Gap: size},
					}[rng.IntN(3)]
				}
			} else {
				for i := range rng.IntN(3) {
					op.Topics = append(op.Topics, fmt.Sprintf("topic-%d", i))
				}
			}
			r.Operators = append(r.Operators, op)
		}
	}
	if rng.IntN(3) == 0 && (len(r.Operators) > 0 || len(r.OperatorIDs) == 0) {
		r.EventTime = &EventTime{Watermark: int64(rng.Uint64())}
		seen := map[PartitionTime]bool{}
		for _, o := range r.Offsets {
			pt := PartitionTime{Topic: o.Topic, Partition: o.Partition}
			if !seen[pt] && rng.IntN(4) > 0 {
				seen[pt] = true
				pt.MaxEventTime = []int64{NoEventTime, int64(rng.Uint64())}[rng.IntN(2)]
				r.EventTime.Partitions = append(r.EventTime.Partitions, pt)
			}
		}
	}
	if rng.IntN(3) == 0 && (len(r.Operators) > 0 || len(r.OperatorIDs) == 0) {
		for i := range 1 + rng.IntN(3) {
			t := TableOffsets{ID: fmt.Sprintf("table-%d", i), Topic: str(20) + "t"}
			p := int32(rng.IntN(2))
			for range 1 + rng.IntN(4) {
				t.Offsets = append(t.Offsets, PartitionOffset{Partition: p, Offset: rng.Int64N(math.MaxInt64)})
				p += 1 + int32(rng.IntN(3))
			}
			r.Tables = append(r.Tables, t)
		}
	}
	return r
}

func TestRecordRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	for i := range 2000 {
		want := randomRecord(rng)
		b, err := EncodeRecord(want)
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		got, err := DecodeRecord(b)
		if err != nil {
			t.Fatalf("record %d: decode: %v", i, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("record %d: round trip\n got: %+v\nwant: %+v", i, got, want)
		}
		if again, _ := AppendRecord([]byte("prefix"), got); !bytes.Equal(again[6:], b) || string(again[:6]) != "prefix" {
			t.Fatalf("record %d: AppendRecord differs from EncodeRecord", i)
		}
	}
}

func TestTopicName(t *testing.T) {
	if got := TopicName("parity-sum"); got != "parity-sum-checkpoints" {
		t.Errorf("TopicName = %q", got)
	}
}

func FuzzDecodeRecord(f *testing.F) {
	good, err := EncodeRecord(goldenRecord())
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add(good[headerLen:]) // a payload: reaches the parser through seal
	v2, err := EncodeRecord(goldenRecordV2())
	if err != nil {
		f.Fatal(err)
	}
	f.Add(v2)
	v3, err := EncodeRecord(goldenRecordV3())
	if err != nil {
		f.Fatal(err)
	}
	f.Add(v3)
	f.Add(v3[headerLen:])
	v5, err := EncodeRecord(goldenRecordV5())
	if err != nil {
		f.Fatal(err)
	}
	f.Add(v5[headerLen:])
	v6, err := EncodeRecord(goldenRecordV6())
	if err != nil {
		f.Fatal(err)
	}
	f.Add(v6[headerLen:])
	f.Add([]byte{})
	f.Add([]byte{1})
	f.Add([]byte{2, 0, 0, 0, 0})
	f.Add(good[:len(good)/2])
	rng := rand.New(rand.NewPCG(3, 3))
	for range 4 {
		b, err := EncodeRecord(randomRecord(rng))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b[headerLen:])
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		// As is: mostly stopped by the version byte or the CRC.
		// Sealed: the payload parser of each version sees the bytes.
		for _, in := range [][]byte{data, seal(data), sealVersion(recordV2, data), sealVersion(RecordVersion, data)} {
			r, err := DecodeRecord(in)
			if err != nil {
				if r != nil {
					t.Fatalf("DecodeRecord returned a record and %v", err)
				}
				if !errors.Is(err, ErrCorruptRecord) && !errors.Is(err, ErrUnknownVersion) {
					t.Fatalf("error %v wraps neither ErrCorruptRecord nor ErrUnknownVersion", err)
				}
				continue
			}
			out, err := EncodeRecord(r)
			if err != nil {
				t.Fatalf("decoded %+v but cannot encode it: %v", r, err)
			}
			if !bytes.Equal(out, in) {
				t.Fatalf("encode(decode(x)) != x\n   x: %x\nenc: %x", in, out)
			}
		}
	})
}

// TestRecordHeldWithoutTables: a job started from a savepoint with held
// join records, whose configuration has no table, imports them in a v6
// record without tables (it releases them at its first checkpoint); the
// record encodes and decodes as any other.
func TestRecordHeldWithoutTables(t *testing.T) {
	r := goldenRecordV3()
	r.Held = []byte{1, 2, 3}
	b, err := EncodeRecord(r)
	if err != nil {
		t.Fatal(err)
	}
	if b[0] != RecordVersion {
		t.Fatalf("version %d, want %d", b[0], RecordVersion)
	}
	got, err := DecodeRecord(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, r) {
		t.Fatalf("decoded\n%+v\nwant\n%+v", got, r)
	}
}
