package config

import (
	"os"
	"reflect"
	"strings"
	"testing"
)

// TestReadmeCoversSchema keeps the configuration reference in README.md in
// step with the schema: every field path (lists written as sources[].id)
// must appear there in backticks.
func TestReadmeCoversSchema(t *testing.T) {
	data, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatalf("README.md: %v", err)
	}
	const start, end = "<!-- config-reference:start -->", "<!-- config-reference:end -->"
	text := string(data)
	i, j := strings.Index(text, start), strings.Index(text, end)
	if i < 0 || j < i {
		t.Fatalf("README.md has no %s ... %s section", start, end)
	}
	section := text[i:j]

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
		if !strings.Contains(section, quoted) {
			t.Errorf("README.md configuration reference does not mention `%s`", p)
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

// TestReadmeExamplesParse loads every YAML example of the configuration
// reference as `pipeline validate` would (expressions aside).
func TestReadmeExamplesParse(t *testing.T) {
	data, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatalf("README.md: %v", err)
	}
	text := string(data)
	i, j := strings.Index(text, "<!-- config-reference:start -->"), strings.Index(text, "<!-- config-reference:end -->")
	if i < 0 || j < i {
		t.Fatal("README.md has no configuration reference section")
	}
	blocks := strings.Split(text[i:j], "```yaml\n")[1:]
	if len(blocks) < 2 {
		t.Fatalf("%d YAML examples in the reference, want the annotated job and the windowed one", len(blocks))
	}
	for n, b := range blocks {
		yaml, _, ok := strings.Cut(b, "```")
		if !ok {
			t.Fatalf("example %d is not closed", n)
		}
		if _, err := Parse("README.md", []byte(yaml), env(nil)); err != nil {
			t.Errorf("example %d:\n%s", n, err)
		}
	}
}
