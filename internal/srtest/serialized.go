package srtest

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"

	"github.com/bufbuild/protocompile"
	"github.com/twmb/franz-go/pkg/sr/srfake"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
)

// serialized answers a schema fetch that asks for format=serialized as
// Confluent's registry does: a Protobuf schema kept as .proto text comes
// back as its FileDescriptorProto in base64, the form Confluent's
// deserializers parse (their Python client asks for nothing else).
// srfake ignores the parameter; everything else is srfake's answer.
func serialized(reg *srfake.Registry, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodGet || req.URL.Query().Get("format") != "serialized" ||
			!(strings.HasPrefix(req.URL.Path, "/schemas/ids/") || strings.Contains(req.URL.Path, "/versions/")) ||
			strings.HasSuffix(req.URL.Path, "/schema") {
			next.ServeHTTP(w, req)
			return
		}
		rec := httptest.NewRecorder()
		next.ServeHTTP(rec, req)
		body := rec.Body.Bytes()
		if rec.Code == http.StatusOK {
			if b, err := serializeProtobuf(reg, body); err != nil {
				http.Error(w, fmt.Sprintf(`{"error_code":50001,"message":%q}`, err.Error()), http.StatusInternalServerError)
				return
			} else if b != nil {
				body = b
			}
		}
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(rec.Code)
		_, _ = w.Write(body)
	})
}

// serializeProtobuf rewrites a schema answer's Protobuf text as its
// serialized form; nil when there is nothing to rewrite (another type,
// or a schema registered in the serialized form already).
func serializeProtobuf(reg *srfake.Registry, body []byte) ([]byte, error) {
	var doc map[string]any
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, err
	}
	text, _ := doc["schema"].(string)
	if doc["schemaType"] != "PROTOBUF" || !strings.ContainsAny(text, ";{") {
		return nil, nil
	}
	const main = "schema.proto"
	files := map[string]string{main: text}
	if refs, ok := doc["references"].([]any); ok {
		for _, r := range refs {
			ref, _ := r.(map[string]any)
			name, _ := ref["name"].(string)
			subject, _ := ref["subject"].(string)
			version, _ := ref["version"].(float64)
			ss, ok := reg.GetSchema(subject, int(version))
			if !ok {
				return nil, fmt.Errorf("reference %s: no version %d of subject %s", name, int(version), subject)
			}
			files[name] = ss.Schema.Schema
		}
	}
	c := protocompile.Compiler{Resolver: protocompile.WithStandardImports(protocompile.ResolverFunc(func(path string) (protocompile.SearchResult, error) {
		src, ok := files[path]
		if !ok {
			return protocompile.SearchResult{}, fmt.Errorf("%s: %w", path, fs.ErrNotExist)
		}
		return protocompile.SearchResult{Source: strings.NewReader(src)}, nil
	}))}
	out, err := c.Compile(context.Background(), main)
	if err != nil {
		return nil, err
	}
	b, err := proto.Marshal(protodesc.ToFileDescriptorProto(out[0]))
	if err != nil {
		return nil, err
	}
	doc["schema"] = base64.StdEncoding.EncodeToString(b)
	var buf bytes.Buffer
	err = json.NewEncoder(&buf).Encode(doc)
	return buf.Bytes(), err
}
