package jobtest

import (
	"errors"
	"strings"
	"testing"

	"github.com/eoflow/pipeline/config"
)

func readJob(t *testing.T, path string) *Job {
	t.Helper()
	j, err := ReadJob(path)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// A case names topics the job reads and writes; every problem is reported
// at once, at its place in the test file.
func TestPrepareChecksTopics(t *testing.T) {
	f := mustParse(t, `
cases:
  - name: a
    input:
      numbers-t: [1]
      numbers-ts: [{value: 1, partition: 3}]
    expect:
      parity-window: []
      late: []
      parity-windows-late: []
      dead_letters: [{value: 1, code: decode}]
      parity-windows: [{value: 1, code: decode}]
  - name: b
    expect:
      parity-windows-dead-letter: []
      dead_letters: []
`)
	_, err := Prepare(f, readJob(t, "../../examples/parity-windows/config.yaml"), true)
	want := []string{
		`t.yaml:5:7: cases[0].input.numbers-t: the job reads no topic "numbers-t"; did you mean numbers-ts?`,
		`t.yaml:8:7: cases[0].expect.parity-window: the job writes no topic "parity-window"; did you mean parity-windows?`,
		`t.yaml:10:7: cases[0].expect.parity-windows-late: topic parity-windows-late is listed already, as late: list it once`,
		`t.yaml:12:35: cases[0].expect.parity-windows[0].code: code is the error code of a dead letter; parity-windows is not a dead-letter topic`,
		`t.yaml:16:7: cases[1].expect.dead_letters: topic parity-windows-dead-letter is listed already, as parity-windows-dead-letter: list it once`,
	}
	if err == nil || err.Error() != strings.Join(want, "\n") {
		t.Fatalf("got:\n%v\nwant:\n%s", err, strings.Join(want, "\n"))
	}
}

func TestPrepare(t *testing.T) {
	f := mustParse(t, `
cases:
  - name: a
    input:
      numbers-ts: [{value: 1, partition: 3}, {value: 1, partition: 1}]
    expect:
      parity-windows: []
      parity-windows-dead-letter: []
`)
	s, err := Prepare(f, readJob(t, "../../examples/parity-windows/config.yaml"), false)
	if err != nil {
		t.Fatal(err)
	}
	b := s.cases[0]
	if b.inputs["numbers-ts"] != 4 || len(b.inputs) != 1 {
		t.Errorf("inputs %v: the largest partition named, +1", b.inputs)
	}
	if strings.Join(b.outputs, ",") != "parity-windows,parity-windows-dead-letter,parity-windows-late" {
		t.Errorf("outputs %v", b.outputs)
	}
	var checks []string
	for _, c := range b.checks {
		checks = append(checks, c.name+"="+strings.Join(c.topics, "+")+map[bool]string{true: "", false: " (unlisted)"}[c.listed])
	}
	// The late records are not listed, and still checked: none expected.
	if got := strings.Join(checks, ", "); got != "parity-windows=parity-windows, parity-windows-dead-letter=parity-windows-dead-letter, late=parity-windows-late (unlisted)" {
		t.Errorf("checks %s", got)
	}
}

// --crashes needs exactly_once; a job file that does not load with a
// case's variables is the job's problem, at the job file's lines.
func TestPrepareRefusals(t *testing.T) {
	f := mustParse(t, `
cases:
  - name: at least once
    env: {GUARANTEE: at_least_once}
  - name: bad interval
    env: {CHECKPOINT_INTERVAL: soon}
`)
	job := readJob(t, "../../examples/parity-sum/config.yaml")
	_, err := Prepare(&File{Path: "t.yaml", Cases: f.Cases[:1]}, job, true)
	want := `t.yaml:3:5: cases[0]: --crashes needs guarantee: exactly_once, and the job in ../../examples/parity-sum/config.yaml runs at_least_once, which may repeat outputs after a crash by definition`
	if err == nil || err.Error() != want {
		t.Fatalf("got %v\nwant %s", err, want)
	}
	if _, err := Prepare(&File{Path: "t.yaml", Cases: f.Cases[:1]}, job, false); err != nil {
		t.Fatalf("without --crashes: %v", err)
	}
	_, err = Prepare(f, job, false)
	var je *JobError
	var problems config.Errors
	if !errors.As(err, &je) || je.Case != "bad interval" || !errors.As(err, &problems) || len(problems) != 1 ||
		!strings.HasPrefix(problems[0].Error(), "../../examples/parity-sum/config.yaml:15:13: checkpoint.interval:") {
		t.Fatalf("got %v", err)
	}
}
