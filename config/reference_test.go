package config

import (
	"os"
	"reflect"
	"strings"
	"testing"
)

// referenceDoc is the configuration reference.
const referenceDoc = "../docs/configuration.md"

// readReference returns the configuration reference's text.
func readReference(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(referenceDoc)
	if err != nil {
		t.Fatalf("the configuration reference: %v", err)
	}
	return string(data)
}

// TestReferenceCoversSchema keeps the configuration reference
// (docs/configuration.md) in step with the schema: every field path (lists
// written as sources[].id) must appear there in backticks.
func TestReferenceCoversSchema(t *testing.T) {
	text := readReference(t)

	paths := schemaPaths(reflect.TypeFor[Config](), "")
	// The step shapes and aggregate forms, named by the docs too.
	paths = append(paths, "filter", "map", "key_by", "aggregate", "emit", "values",
		"every_record", "on_checkpoint", "earliest", "latest", "${VAR}", "${VAR:-default}", "$$")
	for _, f := range aggregateFuncs {
		paths = append(paths, f+"(") // written `count()`, `sum(expr)`
	}
	if len(paths) < 50 {
		t.Fatalf("only %d paths: the walk over the schema is broken", len(paths))
	}
	for _, p := range paths {
		quoted := "`" + p + "`"
		if strings.HasSuffix(p, "(") {
			quoted = "`" + p
		}
		if !strings.Contains(text, quoted) {
			t.Errorf("%s does not mention `%s`", referenceDoc, p)
		}
	}
}

// schemaPaths lists the yaml paths of struct type t: "kafka.tls.ca_file",
// "sources[].topics", "steps[].aggregate.values".
func schemaPaths(t reflect.Type, prefix string) []string {
	var out []string
	keys, index := yamlFields(t)
	for _, k := range keys {
		path := join(prefix, k)
		out = append(out, path)
		ft := t.Field(index[k]).Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct {
			path, ft = path+"[]", ft.Elem()
		}
		if ft.Kind() == reflect.Struct && ft != startType {
			out = append(out, schemaPaths(ft, path)...)
		}
	}
	return out
}

// TestReferenceExamplesParse loads every YAML example of the
// configuration reference as `pipeline validate` would (expressions aside).
func TestReferenceExamplesParse(t *testing.T) {
	blocks := strings.Split(readReference(t), "```yaml\n")[1:]
	if len(blocks) < 2 {
		t.Fatalf("%d YAML examples in %s, want the annotated job and the windowed one", len(blocks), referenceDoc)
	}
	for n, b := range blocks {
		yaml, _, ok := strings.Cut(b, "```")
		if !ok {
			t.Fatalf("example %d is not closed", n)
		}
		if _, err := Parse(referenceDoc, []byte(yaml), env(nil)); err != nil {
			t.Errorf("example %d:\n%s", n, err)
		}
	}
}

// TestReadmeJobsParse loads every whole job the README shows (a YAML
// example with a top-level name:) as `pipeline validate` would,
// expressions aside.
func TestReadmeJobsParse(t *testing.T) {
	data, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	jobs := 0
	for n, b := range strings.Split(string(data), "```yaml\n")[1:] {
		yaml, _, ok := strings.Cut(b, "```")
		if !ok {
			t.Fatalf("README.md: YAML example %d is not closed", n)
		}
		if !strings.HasPrefix(yaml, "name:") && !strings.Contains(yaml, "\nname:") {
			continue // a fragment, or a test file
		}
		jobs++
		if _, err := Parse("README.md", []byte(yaml), env(nil)); err != nil {
			t.Errorf("README.md: YAML example %d:\n%s", n, err)
		}
	}
	if jobs == 0 {
		t.Error("README.md shows no whole job")
	}
}
