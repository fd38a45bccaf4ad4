package config

import (
	"fmt"
	"strings"
	"testing"
)

// threeBranches is the graph of the "a job is a graph" example: one input
// feeds a sum by parity, a sum by n mod 3 and a filter.
const threeBranches = `name: job
kafka:
  brokers: [localhost:9092]
sources:
  - id: numbers
    topics: [numbers]
steps:
  - id: by-parity
    from: numbers
    key_by: 'n % 2 == 0 ? "even" : "odd"'
  - id: parity-sums
    aggregate: {values: {count: count(), sum: sum(n)}}
  - id: by-mod3
    from: numbers
    key_by: 'string(n % 3)'
  - id: mod3-sums
    aggregate: {values: {count: count(), sum: sum(n)}}
  - id: tens
    from: numbers
    filter: 'n % 10 == 0'
sinks:
  - {from: parity-sums, topic: parity-sums}
  - {from: mod3-sums, topic: mod3-sums}
  - {from: tens, topic: tens}
`

func TestGraphOfThreeBranches(t *testing.T) {
	c, err := Parse("c.yaml", []byte(threeBranches), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	g := c.Graph()
	if g.Linear() {
		t.Error("Linear() = true for three branches")
	}
	want := `  numbers: source numbers
  by-parity: key_by n % 2 == 0 ? "even" : "odd"  <- numbers
  parity-sums: aggregate  <- by-parity
  by-mod3: key_by string(n % 3)  <- numbers
  mod3-sums: aggregate  <- by-mod3
  tens: filter n % 10 == 0  <- numbers
  sink parity-sums  <- parity-sums
  sink mod3-sums  <- mod3-sums
  sink tens  <- tens
`
	if got := g.Text(c); got != want {
		t.Errorf("Text:\n%s\nwant:\n%s", got, want)
	}
	numbers, _ := g.Lookup("numbers")
	if got := len(g.Nodes[numbers].Outputs); got != 3 {
		t.Errorf("numbers has %d readers, want 3", got)
	}
	mermaid := g.Mermaid(c)
	for _, line := range []string{"flowchart TD", `n0[("numbers: source numbers")]`, "n0 --> n1", "n0 --> n3", "n0 --> n5", "n2 --> n6", `n6[/"sink parity-sums"/]`, `#quot;even#quot;`} {
		if !strings.Contains(mermaid, line) {
			t.Errorf("Mermaid lacks %q:\n%s", line, mermaid)
		}
	}
	dot := g.DOT(c)
	for _, line := range []string{`digraph "job" {`, `n0 [shape=cylinder, label="numbers: source numbers"];`, "n4 -> n7;", "n5 -> n8;"} {
		if !strings.Contains(dot, line) {
			t.Errorf("DOT lacks %q:\n%s", line, dot)
		}
	}
}

// A file without from: is the linear chain it always was, and writing
// out the default from: changes neither the graph nor the fingerprint
// its checkpoints were written with.
func TestLinearGraphKeepsItsFingerprint(t *testing.T) {
	linear := minimal + "steps:\n  - key_by: user\n  - aggregate: {values: {n: count()}}\n"
	explicit := strings.Replace(minimal, "  - topics: [in]\n", "  - {id: src, topics: [in]}\n", 1) +
		"steps:\n  - {id: k, from: src, key_by: user}\n  - {from: k, aggregate: {values: {n: count()}}}\n"
	explicit = strings.Replace(explicit, "  - topic: out\n", "  - {from: aggregate-1, topic: out}\n", 1)
	implicit := strings.Replace(minimal, "  - topics: [in]\n", "  - {id: src, topics: [in]}\n", 1) +
		"steps:\n  - {id: k, key_by: user}\n  - aggregate: {values: {n: count()}}\n"
	a, err := Parse("c.yaml", []byte(linear), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if !a.Graph().Linear() {
		t.Error("a file without from: is not linear")
	}
	b, err := Parse("c.yaml", []byte(explicit), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	c, err := Parse("c.yaml", []byte(implicit), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if !b.Graph().Linear() {
		t.Error("the default from:, written out, is not linear")
	}
	if b.Fingerprint() != c.Fingerprint() {
		t.Error("writing out the default from: changed the fingerprint")
	}
	g, err := Parse("c.yaml", []byte(threeBranches), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	// The same steps, linked otherwise: another job.
	other := strings.Replace(threeBranches, "  - id: tens\n    from: numbers\n", "  - id: tens\n    from: by-mod3\n", 1)
	o, err := Parse("c.yaml", []byte(other), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if g.Fingerprint() == o.Fingerprint() {
		t.Error("another graph of the same steps has the same fingerprint")
	}
}

// TestGraphErrors asserts the exact text of the graph's problems: each at
// the line and column of the from: item (or the step) it is about.
func TestGraphErrors(t *testing.T) {
	for _, tc := range []struct {
		name     string
		old, new string
		want     []string
	}{
		{"unknown id", "    from: numbers\n    filter:", "    from: number\n    filter:", []string{
			`c.yaml:19:11: steps[4].from[0]: unknown id "number"; did you mean numbers?`}},
		{"a later step", "  - id: by-mod3\n    from: numbers\n", "  - id: by-mod3\n    from: tens\n", []string{
			`c.yaml:14:11: steps[2].from[0]: "tens" is steps[4], written after this step: a step reads only sources and the steps above it (move this step below it)`}},
		{"itself", "  - id: tens\n    from: numbers\n", "  - id: tens\n    from: [numbers, tens]\n", []string{
			`c.yaml:19:21: steps[4].from[1]: a step cannot read itself`}},
		{"named twice", "  - id: tens\n    from: numbers\n", "  - id: tens\n    from: [numbers, numbers]\n", []string{
			`c.yaml:19:21: steps[4].from[1]: "numbers" is named twice`}},
		{"a step nobody reads", "  - {from: tens, topic: tens}\n", "", []string{
			`c.yaml:20:13: steps[4].filter: nothing reads this step: name its id "tens" in the from: of a later step or a sink`}},
		{"a sink without input", "  - {from: tens, topic: tens}\n", "  - {from: tens, topic: tens}\n  - {from: [], topic: none}\n", []string{
			`c.yaml:25:6: sinks[3].from: names no input: give a source or step id, or a list of them, or leave from: out (the step before)`}},
		{"a sink reading an unknown id", "  - {from: tens, topic: tens}\n", "  - {from: tenss, topic: tens}\n", []string{
			`c.yaml:20:13: steps[4].filter: nothing reads this step: name its id "tens" in the from: of a later step or a sink`,
			`c.yaml:24:12: sinks[2].from[0]: unknown id "tenss"; did you mean tens?`}},
		{"a source nobody reads", "    topics: [numbers]\n", "    topics: [numbers]\n  - id: spare\n    topics: [spare]\n", []string{
			`c.yaml:8:5: sources[1].topics: nothing reads this source: name its id "spare" in the from: of a step or a sink`}},
		{"a step reading an aggregate", "  - id: tens\n    from: numbers\n", "  - id: tens\n    from: parity-sums\n", []string{
			`c.yaml:19:11: steps[4].from[0]: "parity-sums" is an aggregate: only a sink can read its output`}},
		{"an aggregate reading a merge of keyed and unkeyed input", "  - id: mod3-sums\n", "  - id: mod3-sums\n    from: [by-mod3, numbers]\n", []string{
			`c.yaml:18:5: steps[3].aggregate: needs a key_by step before it on every input: what it reads from source "numbers" is not keyed (for one global group: key_by: '"all"')`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			yaml := strings.Replace(threeBranches, tc.old, tc.new, 1)
			if yaml == threeBranches {
				t.Fatal("the case changes nothing")
			}
			_, err := Parse("c.yaml", []byte(yaml), env(nil))
			var got []string
			if err != nil {
				got = strings.Split(err.Error(), "\n")
			}
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

// A window on a branch needs event time on the sources that branch reads,
// not on every source of the job.
func TestWindowNeedsEventTimeOnItsOwnSources(t *testing.T) {
	job := `name: job
kafka:
  brokers: [localhost:9092]
sources:
  - {id: clicks, topics: [clicks], event_time: {}}
  - {id: orders, topics: [orders]}
steps:
  - {id: by-user, from: clicks, key_by: user}
  - {id: per-minute, window: {tumbling: 1m, values: {n: count()}}}
  - {id: by-customer, from: orders, key_by: customer}
  - {id: totals, aggregate: {values: {n: count()}}}
sinks:
  - {from: per-minute, topic: clicks-per-minute}
  - {from: totals, topic: order-counts}
`
	if _, err := Parse("c.yaml", []byte(job), env(nil)); err != nil {
		t.Fatal(err)
	}
	merged := strings.Replace(job, "from: clicks, key_by", "from: [clicks, orders], key_by", 1)
	_, err := Parse("c.yaml", []byte(merged), env(nil))
	want := `c.yaml:9:22: steps[1].window: a window needs event time: add "event_time: {}" to sources[1] (the Kafka record timestamp), or event_time: {timestamp: <field>}`
	if err == nil || err.Error() != want {
		t.Errorf("got %v\nwant %s", err, want)
	}
}

func TestTooManyPaths(t *testing.T) {
	// Each step merges the two before it: the paths to step i are the
	// i-th Fibonacci number, 89 at s10.
	var b strings.Builder
	b.WriteString(minimal + "steps:\n  - {id: s0, filter: 'true'}\n  - {id: s1, filter: 'true'}\n")
	for i := 2; i <= 10; i++ {
		fmt.Fprintf(&b, "  - {id: s%d, from: [s%d, s%d], filter: 'true'}\n", i, i-1, i-2)
	}
	_, err := Parse("c.yaml", []byte(b.String()), env(nil))
	want := "c.yaml:19:15: steps[10].from: reads its sources over more than 64 paths (merges of merges): each record would be evaluated once per path; merge fewer branches"
	if err == nil || err.Error() != want {
		t.Errorf("got %v\nwant %s", err, want)
	}
}
