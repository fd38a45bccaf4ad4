package checkpoint

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"testing"
)

// The benchmarks that chose the format: the binary v1 codec against the
// obvious alternative, JSON with a version field (and the same CRC-32C),
// on a record of a job reading one 64-partition topic.

func benchRecord() *Record {
	r := &Record{
		ID:                123456,
		Job:               "orders-revenue-per-region",
		ConfigFingerprint: "sha256:2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae",
		KeyGroups:         128,
		OperatorIDs:       []string{"aggregate-3", "source-0"},
		CreatedUnixMilli:  1748779200123,
		Guarantee:         "exactly_once",
		State: []StateSummary{
			{Operator: "aggregate-3", Keys: 1_250_000, Bytes: 96_000_000},
			{Operator: "source-0", Keys: 64, Bytes: 1024},
		},
	}
	for p := range int32(64) {
		r.Offsets = append(r.Offsets, SourceOffset{Topic: "orders", Partition: p, Offset: 1_000_000_000 + int64(p)*7_919_113})
	}
	return r
}

// jsonRecordV1 is the JSON alternative that lost.
type jsonRecordV1 struct {
	Version           int            `json:"version"`
	ID                ID             `json:"id"`
	Job               string         `json:"job"`
	ConfigFingerprint string         `json:"config_fingerprint"`
	KeyGroups         int            `json:"key_groups"`
	OperatorIDs       []string       `json:"operator_ids"`
	Offsets           []SourceOffset `json:"offsets"`
	CreatedUnixMilli  int64          `json:"created_unix_ms"`
	Guarantee         string         `json:"guarantee"`
	State             []StateSummary `json:"state"`
}

func encodeJSON(r *Record) ([]byte, error) {
	body, err := json.Marshal(jsonRecordV1{1, r.ID, r.Job, r.ConfigFingerprint, r.KeyGroups, r.OperatorIDs, r.Offsets, r.CreatedUnixMilli, r.Guarantee, r.State})
	if err != nil {
		return nil, err
	}
	return binary.BigEndian.AppendUint32(body, crc32.Checksum(body, castagnoli)), nil
}

func decodeJSON(b []byte) (*Record, error) {
	if len(b) < 4 {
		return nil, errors.New("short")
	}
	body := b[:len(b)-4]
	if crc32.Checksum(body, castagnoli) != binary.BigEndian.Uint32(b[len(b)-4:]) {
		return nil, errors.New("crc")
	}
	var j jsonRecordV1
	if err := json.Unmarshal(body, &j); err != nil {
		return nil, err
	}
	if j.Version != 1 {
		return nil, fmt.Errorf("version %d", j.Version)
	}
	r := &Record{ID: j.ID, Job: j.Job, ConfigFingerprint: j.ConfigFingerprint, KeyGroups: j.KeyGroups, OperatorIDs: j.OperatorIDs,
		Offsets: j.Offsets, CreatedUnixMilli: j.CreatedUnixMilli, Guarantee: j.Guarantee, State: j.State}
	return r, r.Validate()
}

func BenchmarkRecord(b *testing.B) {
	r := benchRecord()
	codecs := []struct {
		name   string
		encode func(*Record) ([]byte, error)
		decode func([]byte) (*Record, error)
	}{
		{"binary-v1", EncodeRecord, DecodeRecord},
		{"json", encodeJSON, decodeJSON},
	}
	for _, c := range codecs {
		enc, err := c.encode(r)
		if err != nil {
			b.Fatal(err)
		}
		if got, err := c.decode(enc); err != nil || len(got.Offsets) != 64 {
			b.Fatalf("%s: round trip: %v", c.name, err)
		}
		b.Run(c.name+"/encode", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.encode(r); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(enc)), "bytes/record")
		})
		b.Run(c.name+"/decode", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.decode(enc); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(enc)), "bytes/record")
		})
	}
}
