package kstore

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/checkpoint"
)

// wide is a checkpoint of a job reading partitions partitions, with event
// time: about 25 bytes a partition.
func wide(job string, id checkpoint.ID, partitions int) *checkpoint.Record {
	rec := record(job, id, 0)
	rec.Offsets = nil
	et := &checkpoint.EventTime{Watermark: 1_700_000_000_000}
	for p := range partitions {
		rec.Offsets = append(rec.Offsets, checkpoint.SourceOffset{Topic: "in", Partition: int32(p), Offset: int64(id)*1_000_000 + int64(p)})
		et.Partitions = append(et.Partitions, checkpoint.PartitionTime{Topic: "in", Partition: int32(p), MaxEventTime: 1_700_000_000_000 + int64(p)})
	}
	rec.EventTime = et
	rec.Operators = []checkpoint.OperatorDesc{
		{ID: "agg", Kind: checkpoint.KindAggregate, KeyBy: "k", Values: []checkpoint.AggregateValue{{Name: "n", Func: "count"}}},
		{ID: "src", Kind: checkpoint.KindSource, Topics: []string{"in"}},
	}
	rec.Normalize()
	return rec
}

// fold folds recs, in order, as a reader of the checkpoint topic does.
func fold(t *testing.T, key string, member bool, recs []*kgo.Record) (*checkpoint.Record, error) {
	t.Helper()
	n := Newest{Job: key, Member: member}
	for i, r := range recs {
		r.Offset = int64(i)
		if err := n.Add(r); err != nil {
			return nil, err
		}
	}
	return n.Record, n.Err()
}

// A record that fits is the one record it always was; one that does not
// goes in pieces that each fit, then its head, and reads back the same.
func TestCheckpointRecordsInPieces(t *testing.T) {
	small := wide("job", 1, 4)
	recs, err := CheckpointRecords(small, "job", 1000)
	if err != nil {
		t.Fatal(err)
	}
	whole, err := CheckpointRecord(small)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || !bytes.Equal(recs[0].Key, whole.Key) || !bytes.Equal(recs[0].Value, whole.Value) || recs[0].Topic != whole.Topic {
		t.Fatalf("a record that fits became %d records", len(recs))
	}

	for _, key := range []string{"job", "job/instance-7"} {
		big := wide("job", 2, 3000)
		const limit = 4096
		recs, err := CheckpointRecords(big, key, limit)
		if err != nil {
			t.Fatal(err)
		}
		enc, _ := checkpoint.EncodeRecord(big)
		if want := len(enc)/(limit/2) + 1; len(recs) < 3 || len(recs) > want+1 {
			t.Fatalf("%d bytes in %d records", len(enc), len(recs))
		}
		for i, r := range recs {
			if len(r.Key)+len(r.Value) > limit || r.Topic != "job-checkpoints" {
				t.Fatalf("record %d: %d bytes of key and value to %s, limit %d", i, len(r.Key)+len(r.Value), r.Topic, limit)
			}
		}
		if head := recs[len(recs)-1]; string(head.Key) != key || !checkpoint.IsPieces(head.Value) {
			t.Fatalf("the last record is %q, not the head", head.Key)
		}
		if strings.HasPrefix(string(recs[0].Key), "job/") || strings.HasPrefix(string(recs[0].Key), "job#") {
			t.Fatalf("piece key %q looks like a member's or a pause's", recs[0].Key)
		}
		got, err := fold(t, key, key != "job", recs)
		if err != nil || !reflect.DeepEqual(got, big) {
			t.Fatalf("key %s: read back %v, %v", key, got != nil, err)
		}
	}
}

// The fold: a newer record replaces one in pieces and the other way
// round; a head whose pieces were compacted away is no error once a newer
// checkpoint follows it, and is one while it is the newest; ids must
// still increase; pieces of another key are not ours.
func TestNewestJoinsPieces(t *testing.T) {
	const limit = 2048
	pieces := func(rec *checkpoint.Record, key string) []*kgo.Record {
		t.Helper()
		recs, err := CheckpointRecords(rec, key, limit)
		if err != nil {
			t.Fatal(err)
		}
		return recs
	}
	cp1, cp2, cp3 := wide("job", 1, 500), wide("job", 2, 3), wide("job", 3, 800)
	log := append(append(pieces(cp1, "job"), pieces(cp2, "job")...), pieces(cp3, "job")...)
	if got, err := fold(t, "job", false, log); err != nil || !reflect.DeepEqual(got, cp3) {
		t.Fatalf("pieces, whole, pieces: %v", err)
	}
	if got, err := fold(t, "job", false, log[:len(pieces(cp1, "job"))+1]); err != nil || !reflect.DeepEqual(got, cp2) {
		t.Fatalf("pieces, whole: %v", err)
	}

	// Compaction kept head 1 but removed its pieces, which checkpoint 3
	// overwrote: head 1 does not join, head 3 does.
	p1, p3 := pieces(cp1, "job"), pieces(cp3, "job")
	compacted := append([]*kgo.Record{p1[len(p1)-1]}, p3...)
	if got, err := fold(t, "job", false, compacted); err != nil || !reflect.DeepEqual(got, cp3) {
		t.Fatalf("a superseded head without its pieces: %v", err)
	}
	// The newest head without a piece is an error.
	missing := append(append([]*kgo.Record{}, p3[:1]...), p3[2:]...)
	if _, err := fold(t, "job", false, missing); !errors.Is(err, checkpoint.ErrCorruptRecord) || !strings.Contains(err.Error(), "piece 1 is missing") {
		t.Fatalf("a missing piece: %v", err)
	}
	// A stale piece of an older record in its place fails its CRC.
	stale := append(append([]*kgo.Record{}, p1[:len(p1)-1]...), p3[len(p3)-1])
	if _, err := fold(t, "job", false, stale); !errors.Is(err, checkpoint.ErrCorruptRecord) {
		t.Fatalf("pieces of another checkpoint: %v", err)
	}
	// Ids still increase, pieces or not.
	if _, err := fold(t, "job", false, append(pieces(cp3, "job"), pieces(cp1, "job")...)); err == nil || !strings.Contains(err.Error(), "ids must increase") {
		t.Fatalf("checkpoint 1 after 3: %v", err)
	}
	// A member takes the highest id, whatever the order.
	if got, err := fold(t, "job/a", true, append(pieces(wide("job", 3, 800), "job/a"), pieces(wide("job", 1, 500), "job/a")...)); err != nil || got.ID != 3 {
		t.Fatalf("member: %v, %v", got, err)
	}
	// Another member's pieces and records are not this one's.
	other := pieces(wide("job", 9, 800), "job/b")
	if got, err := fold(t, "job/a", true, append(pieces(wide("job", 3, 800), "job/a"), other...)); err != nil || got.ID != 3 {
		t.Fatalf("another member's pieces: %v, %v", got, err)
	}
}

// A limit that leaves no room beside a piece's key is refused, never an
// endless split.
func TestCheckpointRecordsTooLarge(t *testing.T) {
	key := strings.Repeat("k", 300)
	_, err := CheckpointRecords(wide("job", 1, 100), key, 600)
	if !errors.Is(err, ErrRecordTooLarge) {
		t.Fatalf("err %v", err)
	}
}

func TestPieceKeys(t *testing.T) {
	for _, tt := range []struct {
		in   string
		key  string
		i    int
		okay bool
	}{
		{"#piece/0/job", "job", 0, true},
		{"#piece/12/job/inst", "job/inst", 12, true},
		{"#piece/012/job", "", 0, false},
		{"#piece/-1/job", "", 0, false},
		{"#piece/x/job", "", 0, false},
		{"#piece/3", "", 0, false},
		{"job", "", 0, false},
		{"job#paused/a", "", 0, false},
	} {
		key, i, ok := parsePieceKey([]byte(tt.in))
		if key != tt.key || i != tt.i || ok != tt.okay {
			t.Errorf("parsePieceKey(%q) = %q, %d, %v", tt.in, key, i, ok)
		}
	}
	if got := pieceKey("job/inst", 7); got != "#piece/7/job/inst" {
		t.Errorf("pieceKey: %q", got)
	}
	for _, p := range []checkpoint.Pieces{{ID: 1, Count: 2, Length: 2}, {ID: 1 << 40, Count: 1000, Length: 1 << 30}} {
		got, err := checkpoint.DecodePieces(checkpoint.AppendPieces(nil, p))
		if err != nil || got != p {
			t.Errorf("pieces %+v: %+v, %v", p, got, err)
		}
	}
	for _, bad := range [][]byte{
		{checkpoint.PiecesVersion},
		checkpoint.AppendPieces(nil, checkpoint.Pieces{ID: 1, Count: 1, Length: 5}),
		checkpoint.AppendPieces(nil, checkpoint.Pieces{ID: 1, Count: 3, Length: 2}),
		append(checkpoint.AppendPieces(nil, checkpoint.Pieces{ID: 1, Count: 2, Length: 5}), 0),
	} {
		if _, err := checkpoint.DecodePieces(bad); !errors.Is(err, checkpoint.ErrCorruptRecord) {
			t.Errorf("DecodePieces(%x): %v", bad, err)
		}
	}
	// A build that knows no pieces refuses a head as a newer version.
	if _, err := checkpoint.DecodeRecord(checkpoint.AppendPieces(nil, checkpoint.Pieces{ID: 1, Count: 2, Length: 5})); !errors.Is(err, checkpoint.ErrUnknownVersion) {
		t.Errorf("DecodeRecord of a head: %v", err)
	}
}
