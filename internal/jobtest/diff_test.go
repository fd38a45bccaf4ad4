package jobtest

import (
	"strconv"
	"strings"
	"testing"

	"github.com/eoflow/pipeline/sink"
)

var sides = Sides{Expected: "expected", Written: "written"}

func render(d Diff, st Style) string {
	var b strings.Builder
	WriteDiff(&b, d, sides, "  ", st)
	return b.String()
}

// The first key whose sequence differs is shown side by side, with why
// its records differ; the other keys in a line each.
func TestWriteDiffPerKey(t *testing.T) {
	exp := expectations(t, `
        - {key: odd, value: {count: 1, sum: 1}}
        - {key: odd, value: {count: 2, sum: 4}}
        - {key: even, value: {count: 1, sum: 2}}
`)
	written := []Record{
		rec(0, 0, "odd", `{"count":1,"sum":1}`),
		rec(0, 1, "even", `{"count":1,"sum":4}`),
		rec(0, 2, "odd", `{"count":2,"sum":8}`),
		rec(0, 3, "odd", `{"count":3,"sum":9}`),
	}
	d := Compare(PerKey, exp, written, 1)
	d.Name, d.Topics = "parity-sums", []string{"parity-sums"}
	want := `  parity-sums, compare per_key: 3 records expected, 4 written
    key "odd": 2 expected, 3 written, differ from record 2
          expected             written
        1 {"count":1,"sum":1}  {"count":1,"sum":1}
      ✗ 2 {"count":2,"sum":4}  {"count":2,"sum":8}
      ✗ 3 —                    {"count":3,"sum":9}
    record 2 differs in the value: sum is 8, expected 4; expected at t.yaml:7:11; written at t/0@2
    also differ:
      key "even": 1 expected, 1 written, differ from record 1
`
	if got := render(d, Style{}); got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
}

// Long values are cut in the table and shown whole below it.
func TestWriteDiffLongValues(t *testing.T) {
	long := `{"key":"odd","window_start":"2026-12-04T10:00:00Z","window_end":"2026-12-04T10:00:10Z","count":2,"sum":4}`
	exp := expectations(t, "        - {key: odd, value: '"+long+"'}\n")
	d := Compare(PerKey, exp, []Record{rec(0, 0, "odd", strings.Replace(long, `"sum":4`, `"sum":5`, 1))}, 1)
	d.Name = "windows"
	got := render(d, Style{})
	for _, line := range []string{
		`      ✗ 1 {"key":"odd","window_start":"2026-12-04T10:00:0…  {"key":"odd","window_start":"2026-12-04T10:00:0…`,
		"      expected: " + long,
		"      written:  " + strings.Replace(long, `"sum":4`, `"sum":5`, 1),
	} {
		if !strings.Contains(got, line+"\n") {
			t.Errorf("no line %q in:\n%s", line, got)
		}
	}
}

// Unlisted dead letters are listed, with their code and reason.
func TestWriteDiffUnlistedDeadLetters(t *testing.T) {
	dl := rec(0, 0, "", `oops`)
	dl.Topic = "job-dead-letter"
	dl.Headers = []Header{{sink.HeaderCode, []byte("decode")}, {sink.HeaderReason, []byte("invalid character 'o'")}}
	d := Compare(Unordered, nil, []Record{dl}, 1)
	d.Name, d.Topics, d.Unlisted = DeadLetters, []string{"job-dead-letter"}, true
	want := `  dead_letters (job-dead-letter): 1 record written; none expected (the case does not list dead_letters)
    unexpected (written, not expected):
      + oops   job-dead-letter/0@0, code decode: invalid character 'o'
`
	if got := render(d, Style{}); got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
}

// Unordered lists what is missing and what is not expected, with where
// each is; a value that is not text is quoted.
func TestWriteDiffUnordered(t *testing.T) {
	exp := expectations(t, "        - 1\n        - {key: k, value: 2}\n")
	d := Compare(Unordered, exp, []Record{rec(0, 0, "", "1"), rec(0, 1, "", "\x00\xff")}, 1)
	d.Name = "out"
	want := `  out, compare unordered: 2 records expected, 2 written
    missing (expected, not written):
      - "k" → 2   t.yaml:6:11
    unexpected (written, not expected):
      + "\x00\xff"   t/0@1
`
	if got := render(d, Style{}); got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
}

// Colour only when asked for: the differing rows red and green.
func TestWriteDiffColour(t *testing.T) {
	exp := expectations(t, "        - 1\n")
	d := Compare(PerKey, exp, []Record{rec(0, 0, "", "2")}, 1)
	d.Name = "out"
	if got := render(d, Style{}); strings.Contains(got, "\x1b[") {
		t.Errorf("colour without a terminal:\n%q", got)
	}
	got := render(d, Style{Color: true})
	for _, s := range []string{"\x1b[31m1       \x1b[0m", "\x1b[32m2\x1b[0m", "\x1b[1mout\x1b[0m"} {
		if !strings.Contains(got, s) {
			t.Errorf("no %q in %q", s, got)
		}
	}
}

// A long sequence is shown around its first difference.
func TestWriteDiffCutsLongSequences(t *testing.T) {
	var list strings.Builder
	var written []Record
	for i := range 30 {
		list.WriteString("        - " + strconv.Itoa(i) + "\n")
		v := strconv.Itoa(i)
		if i == 20 {
			v = "x"
		}
		written = append(written, rec(0, int64(i), "", v))
	}
	d := Compare(PerKey, expectations(t, list.String()), written, 1)
	d.Name = "out"
	got := render(d, Style{})
	for _, line := range []string{"           …\n", "       18 17        17\n", "     ✗ 21 20        x\n", "           … (4 more)\n"} {
		if !strings.Contains(got, line) {
			t.Errorf("no line %q in:\n%s", line, got)
		}
	}
	if strings.Contains(got, " 1 0 ") || strings.Contains(got, " 30 29") {
		t.Errorf("rows far from the difference shown:\n%s", got)
	}
}
