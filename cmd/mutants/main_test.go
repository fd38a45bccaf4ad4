package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Every mutant in the list has its branch in the code, and every branch
// in the code is in the list: a name misspelt on either side would be a
// mutant that can never be on, which the suite would report as survived.
func TestEveryMutantIsInTheCode(t *testing.T) {
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	inCode, err := namesInCode(root)
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, m := range mutants {
		if listed[m.name] {
			t.Errorf("%s is listed twice", m.name)
		}
		listed[m.name] = true
		if !inCode[m.name] {
			t.Errorf("%s is listed, but no mutant.On(%q) is in the code", m.name, m.name)
		}
		if m.breaks == "" || len(m.pkgs()) == 0 {
			t.Errorf("%s: say what it breaks and which packages catch it", m.name)
		}
		for _, p := range m.pkgs() {
			if _, err := os.Stat(filepath.Join(root, p)); !strings.HasPrefix(p, "./") || err != nil {
				t.Errorf("%s: package %q is no directory of the module (./path)", m.name, p)
			}
		}
	}
	for name := range inCode {
		if !listed[name] {
			t.Errorf("mutant.On(%q) is in the code but not in the list", name)
		}
	}
}

// docs/testing.md names every mutant.
func TestTheDocsNameEveryMutant(t *testing.T) {
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join(root, "docs", "testing.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range mutants {
		if !strings.Contains(string(doc), "`"+m.name+"`") {
			t.Errorf("docs/testing.md does not name mutant %s", m.name)
		}
	}
}

// go test -json's events: a failing subtest counts as its top-level test,
// a package that fails without a failing test (a panic, a timeout) as
// caught outside a test, and a package that did not build catches
// nothing.
func TestParseEvents(t *testing.T) {
	for _, tc := range []struct {
		name, events string
		passed       bool
		failed       []string
		caught       bool
		summary      string
	}{
		{"tests failed", `{"Action":"run","Package":"github.com/eoflow/pipeline/sink","Test":"TestA"}
{"Action":"output","Package":"github.com/eoflow/pipeline/sink","Test":"TestA/sub","Output":"boom\n"}
{"Action":"fail","Package":"github.com/eoflow/pipeline/sink","Test":"TestA/sub"}
{"Action":"fail","Package":"github.com/eoflow/pipeline/sink","Test":"TestA"}
{"Action":"fail","Package":"github.com/eoflow/pipeline/sink","Test":"TestB"}
{"Action":"fail","Package":"github.com/eoflow/pipeline/sink","Test":"TestC"}
{"Action":"fail","Package":"github.com/eoflow/pipeline/sink"}`,
			false, []string{"sink.TestA", "sink.TestB", "sink.TestC"}, true, "sink.TestA, sink.TestB (+1)"},
		{"survived", `{"Action":"pass","Package":"github.com/eoflow/pipeline/sink","Test":"TestA"}
{"Action":"pass","Package":"github.com/eoflow/pipeline/sink"}`,
			true, nil, false, "SURVIVED"},
		{"panic outside a test", `{"Action":"output","Package":"github.com/eoflow/pipeline/state","Output":"panic: test timed out after 2m0s\n"}
{"Action":"fail","Package":"github.com/eoflow/pipeline/state"}`,
			false, nil, true, "state failed outside a test"},
		{"no build", `{"Action":"fail","Package":"github.com/eoflow/pipeline/state","FailedBuild":"github.com/eoflow/pipeline/state [github.com/eoflow/pipeline/state.test]"}`,
			false, nil, false, "state did not build"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := parseEvents(strings.NewReader(tc.events))
			r.passed = tc.passed
			if !slices.Equal(r.failed, tc.failed) || r.caught() != tc.caught || r.summary() != tc.summary {
				t.Fatalf("failed %v, caught %v, summary %q; want %v, %v, %q", r.failed, r.caught(), r.summary(), tc.failed, tc.caught, tc.summary)
			}
		})
	}
}
