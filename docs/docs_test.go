// Package docs holds the project's documents and the tests that keep them
// true: every relative link resolves, the import graph is the code's, the
// crash table is the one measured, and the metrics table lists what the
// pipeline exports. It has no code outside its tests.
package docs

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"go/build"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/eoflow/pipeline/metrics"
)

var update = flag.Bool("update", false, "rewrite the generated parts of the documents (the import graph) from the code")

// root is the repository's root, from this package's directory.
const root = ".."

// module is the import path of the repository's module.
const module = "github.com/eoflow/pipeline"

// documents are the markdown files whose links must resolve, relative to
// root.
func documents(t *testing.T) []string {
	t.Helper()
	docs := []string{"README.md", "bench/README.md"}
	for _, pattern := range []string{"docs/*.md", "examples/*/README.md"} {
		more, err := filepath.Glob(filepath.Join(root, pattern))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range more {
			rel, err := filepath.Rel(root, m)
			if err != nil {
				t.Fatal(err)
			}
			docs = append(docs, filepath.ToSlash(rel))
		}
	}
	return docs
}

func read(t *testing.T, rel string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

var (
	fence      = regexp.MustCompile("(?m)^\\s*```")
	codeSpan   = regexp.MustCompile("`[^`\n]*`")
	link       = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	heading    = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)
	inlineLink = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
)

// prose returns the lines of a markdown text outside fenced code blocks,
// each with its line number.
func prose(text string) (lines []string, numbers []int) {
	in := false
	for i, line := range strings.Split(text, "\n") {
		if fence.MatchString(line) {
			in = !in
			continue
		}
		if !in {
			lines = append(lines, line)
			numbers = append(numbers, i+1)
		}
	}
	return lines, numbers
}

// anchors returns the anchors GitHub gives the headings of a markdown
// text: the heading's text lower-cased, without punctuation, spaces as
// hyphens; a repeated one gets -1, -2, ...
func anchors(text string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	lines, _ := prose(text)
	for _, line := range lines {
		m := heading.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		h := inlineLink.ReplaceAllString(m[1], "$1")
		var b strings.Builder
		for _, r := range strings.ToLower(h) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsNumber(r) || unicode.IsMark(r):
				b.WriteRune(r)
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			out[fmt.Sprintf("%s-%d", a, n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}

// pending are documents being written on another branch together with
// the code they describe, which other documents link to already: a link
// to one is allowed while it does not exist. Once it exists it is checked
// like any other, and its entry here can go.
var pending = map[string]string{}

// TestLinksResolve: every relative link of the documents points at a file
// of the repository that exists, and at a heading of it that exists when
// it names one. No link leaves the repository: a clone has nothing else.
func TestLinksResolve(t *testing.T) {
	absRoot, err := filepath.Abs(root)
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, doc := range documents(t) {
		lines, numbers := prose(read(t, doc))
		for i, line := range lines {
			for _, m := range link.FindAllStringSubmatch(codeSpan.ReplaceAllString(line, ""), -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				checked++
				where := fmt.Sprintf("%s:%d: %s", doc, numbers[i], target)
				file, anchor, _ := strings.Cut(target, "#")
				path := doc
				if file != "" {
					path = filepath.ToSlash(filepath.Join(filepath.Dir(doc), file))
				}
				abs, err := filepath.Abs(filepath.Join(root, path))
				if err != nil {
					t.Fatal(err)
				}
				if rel, err := filepath.Rel(absRoot, abs); err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
					t.Errorf("%s: points outside the repository", where)
					continue
				}
				info, err := os.Stat(abs)
				if err != nil {
					if _, ok := pending[path]; ok && errors.Is(err, fs.ErrNotExist) && anchor == "" {
						continue
					}
					t.Errorf("%s: no such file", where)
					continue
				}
				if _, ok := pending[path]; ok {
					t.Logf("%s exists now: remove it from pending", path)
				}
				if anchor == "" || info.IsDir() || !strings.HasSuffix(path, ".md") {
					continue
				}
				if !anchors(read(t, path))[anchor] {
					t.Errorf("%s: %s has no heading #%s", where, path, anchor)
				}
			}
		}
	}
	if checked < 50 {
		t.Errorf("only %d relative links checked: the scan is broken", checked)
	}
}

// TestAnchors pins the heading rule the link check relies on.
func TestAnchors(t *testing.T) {
	got := anchors("# A job is a graph\n## Testing a job (`pipeline test`)\n```\n# not a heading\n```\n" +
		"### The job's watermark, W(N)\n## Notes\n## Notes\n## [docs/formats.md](docs/formats.md) and `admin`\n")
	want := []string{"a-job-is-a-graph", "testing-a-job-pipeline-test", "the-jobs-watermark-wn", "notes", "notes-1", "docsformatsmd-and-admin"}
	for _, a := range want {
		if !got[a] {
			t.Errorf("no anchor %q in %v", a, got)
		}
	}
	if len(got) != len(want) {
		t.Errorf("anchors %v, want %v", got, want)
	}
}

// TestNothingPointsOutside: no file of the repository names the design
// notes the project started from, which a clone does not have.
func TestNothingPointsOutside(t *testing.T) {
	outside := []byte(".." + "/shared/")
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		switch filepath.Ext(name) {
		case ".go", ".md", ".yaml", ".yml", ".sh", ".json", ".txt", ".java", ".py", ".xml":
		default:
			if name != "Makefile" && name != "Dockerfile" {
				return nil
			}
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if i := bytes.Index(data, outside); i >= 0 {
			line := bytes.Count(data[:i], []byte("\n")) + 1
			t.Errorf("%s:%d names %s..., outside the repository", path, line, outside)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// The import graph of docs/architecture.md: generated between these
// markers from the code (go test ./docs -run TestImportGraph -update).
const (
	graphDoc   = "docs/architecture.md"
	graphStart = "<!-- import-graph:start -->"
	graphEnd   = "<!-- import-graph:end -->"
)

// packages returns the module's packages (import paths relative to the
// module) with their imports of other packages of the module, as go/build
// sees them for this platform, tests left out. The benchmark harness
// (bench/) is left out too: nothing imports it.
func packages(t *testing.T) map[string][]string {
	t.Helper()
	pkgs := map[string][]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		name := d.Name()
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if path != root && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || rel == "bench") {
			return filepath.SkipDir
		}
		p, err := build.ImportDir(path, 0)
		if err != nil {
			if _, ok := err.(*build.NoGoError); ok {
				return nil
			}
			return fmt.Errorf("%s: %w", rel, err)
		}
		if len(p.GoFiles) == 0 {
			return nil // tests only, such as this one
		}
		var deps []string
		for _, imp := range p.Imports {
			if dep, ok := strings.CutPrefix(imp, module+"/"); ok {
				deps = append(deps, dep)
			}
		}
		slices.Sort(deps)
		pkgs[rel] = deps
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return pkgs
}

// closure returns the packages reachable from start, start included.
func closure(pkgs map[string][]string, start string) map[string]bool {
	seen := map[string]bool{}
	var visit func(string)
	visit = func(p string) {
		if seen[p] {
			return
		}
		seen[p] = true
		for _, d := range pkgs[p] {
			visit(d)
		}
	}
	visit(start)
	return seen
}

// reduced returns the edges of pkgs (restricted to keep) that no longer
// path implies: the transitive reduction, which draws the layers without
// the clutter of every direct import.
func reduced(pkgs map[string][]string, keep map[string]bool) [][2]string {
	var edges [][2]string
	for p := range keep {
		for _, d := range pkgs[p] {
			implied := false
			for _, other := range pkgs[p] {
				if other != d && closure(pkgs, other)[d] {
					implied = true
					break
				}
			}
			if !implied {
				edges = append(edges, [2]string{p, d})
			}
		}
	}
	slices.SortFunc(edges, func(a, b [2]string) int {
		if c := strings.Compare(a[0], b[0]); c != 0 {
			return c
		}
		return strings.Compare(a[1], b[1])
	})
	return edges
}

// importGraph renders the generated part of docs/architecture.md.
func importGraph(pkgs map[string][]string) string {
	node := func(p string) string {
		return strings.NewReplacer("/", "_", ".", "_", "-", "_").Replace(p)
	}
	binary := closure(pkgs, "cmd/pipeline")
	var b strings.Builder
	b.WriteString("```mermaid\nflowchart TD\n")
	names := slices.Sorted(func(yield func(string) bool) {
		for p := range binary {
			if !yield(p) {
				return
			}
		}
	})
	for _, p := range names {
		fmt.Fprintf(&b, "  %s[\"%s\"]\n", node(p), p)
	}
	for _, e := range reduced(pkgs, binary) {
		fmt.Fprintf(&b, "  %s --> %s\n", node(e[0]), node(e[1]))
	}
	b.WriteString("```\n\n")
	b.WriteString("| package | imports (of this module) |\n|---|---|\n")
	all := slices.Sorted(func(yield func(string) bool) {
		for p := range pkgs {
			if !yield(p) {
				return
			}
		}
	})
	for _, p := range all {
		deps := make([]string, len(pkgs[p]))
		for i, d := range pkgs[p] {
			deps[i] = "`" + d + "`"
		}
		imports := strings.Join(deps, ", ")
		if imports == "" {
			imports = "none"
		}
		fmt.Fprintf(&b, "| `%s` | %s |\n", p, imports)
	}
	return b.String()
}

// TestImportGraph: the import graph of docs/architecture.md is the code's,
// and every package of the module is described there.
func TestImportGraph(t *testing.T) {
	pkgs := packages(t)
	if len(pkgs) < 20 || pkgs["engine"] == nil {
		t.Fatalf("found %d packages: the walk is broken", len(pkgs))
	}
	text := read(t, graphDoc)
	i, j := strings.Index(text, graphStart), strings.Index(text, graphEnd)
	if i < 0 || j < i {
		t.Fatalf("%s has no %s ... %s section", graphDoc, graphStart, graphEnd)
	}
	want := "\n" + importGraph(pkgs)
	if got := text[i+len(graphStart) : j]; got != want {
		if *update {
			text = text[:i+len(graphStart)] + want + text[j:]
			if err := os.WriteFile(filepath.Join(root, graphDoc), []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
			t.Logf("rewrote the import graph of %s", graphDoc)
		} else {
			t.Errorf("the import graph of %s is not the code's: run\n\tgo test ./docs -run TestImportGraph -update\nand review the diff. Want:\n%s", graphDoc, want)
		}
	}
	// The rooms: each package once in the table that says what it holds,
	// outside the generated part.
	rooms := text[:i] + text[j:]
	for p := range pkgs {
		if !strings.Contains(rooms, "| `"+p+"` |") {
			t.Errorf("%s does not say what package %s holds (a row | `%s` | ... of its table of packages)", graphDoc, p, p)
		}
	}
}

// TestCrashTable: the table of docs/guarantees.md is the one make
// crash-table measured (bench/results/guarantees.md).
func TestCrashTable(t *testing.T) {
	const start, end = "<!-- crash-table:start -->\n", "<!-- crash-table:end -->"
	text := read(t, "docs/guarantees.md")
	i, j := strings.Index(text, start), strings.Index(text, end)
	if i < 0 || j < i {
		t.Fatalf("docs/guarantees.md has no %q ... %q section", start, end)
	}
	if got, want := text[i+len(start):j], read(t, "bench/results/guarantees.md"); got != want {
		t.Errorf("docs/guarantees.md shows\n%s\nbut make crash-table wrote (bench/results/guarantees.md)\n%s", got, want)
	}
}

// describer records the names of the metrics registered through it.
type describer struct {
	prometheus.Registerer
	names map[string]bool
}

var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

func (d describer) Register(c prometheus.Collector) error {
	ch := make(chan *prometheus.Desc)
	go func() {
		c.Describe(ch)
		close(ch)
	}()
	for desc := range ch {
		if m := fqName.FindStringSubmatch(desc.String()); m != nil {
			d.names[m[1]] = true
		}
	}
	return d.Registerer.Register(c)
}

func (d describer) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := d.Register(c); err != nil {
			panic(err)
		}
	}
}

// metricName finds metric names in prose: pipeline_ and lower-case words.
var metricName = regexp.MustCompile(`\bpipeline_[a-z0-9_]*[a-z0-9]`)

// TestMetricsTable: docs/operations.md lists every metric of the pipeline
// (but franz-go's, pipeline_kafka_*), and no document names a metric that
// does not exist.
func TestMetricsTable(t *testing.T) {
	d := describer{Registerer: prometheus.NewRegistry(), names: map[string]bool{}}
	metrics.New(d, "job")
	var exported []string
	for n := range d.names {
		if strings.HasPrefix(n, "pipeline_") && !strings.HasPrefix(n, "pipeline_kafka_") {
			exported = append(exported, n)
		}
	}
	if len(exported) < 30 {
		t.Fatalf("only %d metrics registered: the capture is broken", len(exported))
	}
	ops := read(t, "docs/operations.md")
	i := strings.Index(ops, "\n## Metrics\n")
	if i < 0 {
		t.Fatal("docs/operations.md has no ## Metrics section")
	}
	section := ops[i+1:]
	if j := strings.Index(section[1:], "\n## "); j >= 0 {
		section = section[:j+1]
	}
	for _, n := range exported {
		if !strings.Contains(section, "`"+n+"`") {
			t.Errorf("docs/operations.md's metrics table does not list `%s`", n)
		}
	}
	for _, doc := range documents(t) {
		for _, n := range metricName.FindAllString(read(t, doc), -1) {
			base := n
			for _, suffix := range []string{"_count", "_sum", "_bucket"} {
				if b, ok := strings.CutSuffix(n, suffix); ok && d.names[b] {
					base = b
				}
			}
			if !d.names[base] && n != "pipeline_kafka" && !strings.HasPrefix(n, "pipeline_kafka_") {
				t.Errorf("%s names %s, which the pipeline does not export", doc, n)
			}
		}
	}
}
