package datagen

import (
	"context"
	"math/big"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"
)

// TestAvroNumbers: datagen registers Number under <topic>-value and
// frames each number with its id; the amount is n cents, exactly; the
// resume path reads n back from the bytes.
func TestAvroNumbers(t *testing.T) {
	reg := srfake.New()
	defer reg.Close()
	for _, version := range []int{1, 2} {
		e, err := (&Avro{Registry: reg.URL(), Version: version}).encoder(context.Background(), "nums")
		if err != nil {
			t.Fatal(err)
		}
		b := e.encode(-12345, time.UnixMilli(1765000000123))
		id, body, err := (&sr.ConfluentHeader{}).DecodeID(b)
		if err != nil || id != e.id {
			t.Fatalf("framing: %d %v", id, err)
		}
		ss, err := sr.NewClient(sr.URLs(reg.URL()))
		if err != nil {
			t.Fatal(err)
		}
		s, err := ss.SchemaByID(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		var v map[string]any
		if err := avro.Unmarshal(avro.MustParse(s.Schema), body, &v); err != nil {
			t.Fatal(err)
		}
		if v["n"] != int64(-12345) || v["parity"] != "odd" || v["amount"].(*big.Rat).FloatString(2) != "-123.45" {
			t.Errorf("v%d: %v", version, v)
		}
		if _, has := v["note"]; has != (version == 2) {
			t.Errorf("v%d: note %v", version, v["note"])
		}
		if n, ok := avroNumber(b); !ok || n != -12345 {
			t.Errorf("avroNumber = %d, %v", n, ok)
		}
	}
	if _, ok := avroNumber([]byte(`{"n":1}`)); ok {
		t.Error("avroNumber read JSON")
	}
	if _, err := (&Avro{Registry: reg.URL(), Version: 3}).encoder(context.Background(), "nums"); err == nil {
		t.Error("schema version 3 accepted")
	}
}
