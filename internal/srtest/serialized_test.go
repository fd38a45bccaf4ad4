package srtest

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"

	"github.com/twmb/franz-go/pkg/sr"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/descriptorpb"
)

// A Protobuf schema fetched with format=serialized comes back as its
// FileDescriptorProto in base64 (with its references resolved), by id
// and by subject version; without the parameter, or for another type,
// the answer is srfake's.
func TestSerialized(t *testing.T) {
	reg := Start(t)
	common := `syntax = "proto3"; package shop; message Money { string currency = 1; }`
	payment := `syntax = "proto3"; package shop; import "common.proto"; import "google/protobuf/timestamp.proto";
message Payment { Money money = 1; google.protobuf.Timestamp ts = 2; }`
	if _, _, err := reg.RegisterSchema("common", sr.Schema{Schema: common, Type: sr.TypeProtobuf}); err != nil {
		t.Fatal(err)
	}
	id, _, err := reg.RegisterSchema("payments-value", sr.Schema{Schema: payment, Type: sr.TypeProtobuf,
		References: []sr.SchemaReference{{Name: "common.proto", Subject: "common", Version: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	avroID, _, err := reg.RegisterSchema("other-value", sr.Schema{Schema: `"string"`, Type: sr.TypeAvro})
	if err != nil {
		t.Fatal(err)
	}
	get := func(path string) (schema string, refs int) {
		t.Helper()
		resp, err := http.Get(reg.URL() + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %s: %s", path, resp.Status, body)
		}
		var doc struct {
			Schema     string            `json:"schema"`
			References []json.RawMessage `json:"references"`
		}
		if err := json.Unmarshal(body, &doc); err != nil {
			t.Fatalf("GET %s: %v: %s", path, err, body)
		}
		return doc.Schema, len(doc.References)
	}
	for _, path := range []string{fmt.Sprintf("/schemas/ids/%d?format=serialized", id), "/subjects/payments-value/versions/1?format=serialized", "/subjects/payments-value/versions/latest?format=serialized"} {
		text, refs := get(path)
		b, err := base64.StdEncoding.DecodeString(text)
		if err != nil {
			t.Fatalf("GET %s: not base64: %v: %s", path, err, text)
		}
		fdp := new(descriptorpb.FileDescriptorProto)
		if err := proto.Unmarshal(b, fdp); err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		if m := fdp.GetMessageType(); fdp.GetPackage() != "shop" || len(m) != 1 || m[0].GetName() != "Payment" || m[0].GetField()[0].GetTypeName() != ".shop.Money" ||
			len(fdp.GetDependency()) != 2 || refs != 1 {
			t.Fatalf("GET %s: %v (%d references)", path, fdp, refs)
		}
	}
	if text, _ := get(fmt.Sprintf("/schemas/ids/%d", id)); text != payment {
		t.Fatalf("without format=serialized: %q", text)
	}
	if text, _ := get(fmt.Sprintf("/schemas/ids/%d?format=serialized", avroID)); text != `"string"` {
		t.Fatalf("an Avro schema with format=serialized: %q", text)
	}
}
