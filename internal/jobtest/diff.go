package jobtest

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/eoflow/pipeline/sink"
)

// Style is how a report is printed: Color adds ANSI colours (for a
// terminal only).
type Style struct{ Color bool }

func (s Style) paint(code, text string) string {
	if !s.Color || text == "" {
		return text
	}
	return "\x1b[" + code + "m" + text + "\x1b[0m"
}

// Red, Green, Bold and Dim colour text when the style has colour.
func (s Style) Red(t string) string   { return s.paint("31", t) }
func (s Style) Green(t string) string { return s.paint("32", t) }
func (s Style) Bold(t string) string  { return s.paint("1", t) }
func (s Style) Dim(t string) string   { return s.paint("2", t) }

// Sides names the two sides of a diff: what the test file expects and
// what the job wrote, or a crash-free run and a crash run.
type Sides struct{ Expected, Written string }

// Limits of a printed diff: a diff is read by a person, who needs the
// first differences, not every one.
const (
	cellWidth     = 48 // characters of a value in the side-by-side table
	tableRows     = 12 // rows of a group's table before it is cut around the difference
	moreGroups    = 10 // further differing groups, one line each
	listedRecords = 20 // missing or unexpected records listed
)

// WriteDiff prints how d differs, each line starting with indent.
func WriteDiff(w io.Writer, d Diff, sides Sides, indent string, st Style) {
	title := d.Name
	if len(d.Topics) > 0 && (len(d.Topics) != 1 || d.Topics[0] != d.Name) {
		title += " (" + strings.Join(d.Topics, ", ") + ")"
	}
	if d.Unlisted {
		fmt.Fprintf(w, "%s%s: %s written; none expected (the case does not list %s)\n", indent, st.Bold(title), count(d.Written, "record"), d.Name)
	} else {
		fmt.Fprintf(w, "%s%s, compare %s: %s expected, %d written\n", indent, st.Bold(title), d.Rule, count(d.Expected, "record"), d.Written)
	}
	in := indent + "  "
	for i, g := range d.Groups {
		if i == 0 {
			writeGroup(w, g, d.Rule, sides, in, st)
			continue
		}
		if i > moreGroups {
			fmt.Fprintf(w, "%s… and %d more\n", in, len(d.Groups)-i)
			break
		}
		if i == 1 {
			fmt.Fprintf(w, "%salso differ:\n", in)
		}
		fmt.Fprintf(w, "%s  %s: %s\n", in, g.Label, groupSummary(g))
	}
	writeList(w, "missing ("+sides.Expected+", not written)", "-", len(d.Missing), func(i int) string {
		e := d.Missing[i]
		return fmt.Sprintf("%s%s", expectedCell(e, true), st.Dim("   "+e.Where))
	}, in, st.Red)
	writeList(w, "unexpected (written, not "+sides.Expected+")", "+", len(d.Unexpected), func(i int) string {
		r := d.Unexpected[i]
		return fmt.Sprintf("%s%s", writtenCell(r, true), st.Dim("   "+r.where()+why(r)))
	}, in, st.Green)
}

func count(n int, what string) string {
	switch n {
	case 0:
		return "no " + what + "s"
	case 1:
		return "1 " + what
	}
	return strconv.Itoa(n) + " " + what + "s"
}

func groupSummary(g GroupDiff) string {
	switch {
	case len(g.Written) == 0:
		return fmt.Sprintf("%s expected, none written", count(len(g.Expected), "record"))
	case len(g.Expected) == 0:
		return fmt.Sprintf("%s written, none expected", count(len(g.Written), "record"))
	}
	return fmt.Sprintf("%d expected, %d written, differ from record %d", len(g.Expected), len(g.Written), g.First+1)
}

// writeGroup prints a group's expected and written sequences side by side,
// around the first difference, and then that difference in full.
func writeGroup(w io.Writer, g GroupDiff, rule Rule, sides Sides, indent string, st Style) {
	fmt.Fprintf(w, "%s%s: %s\n", indent, g.Label, groupSummary(g))
	showKey := rule == Exact
	n := max(len(g.Expected), len(g.Written))
	from, to := 0, n
	if n > tableRows {
		from = max(0, g.First-3)
		to = min(n, from+tableRows-3)
	}
	type row struct{ exp, got string }
	rows := make([]row, 0, to-from)
	width := utf8.RuneCountInString(sides.Expected)
	for i := from; i < to; i++ {
		var r row
		if i < len(g.Expected) {
			r.exp = expectedCell(g.Expected[i], showKey)
		}
		if i < len(g.Written) {
			r.got = writtenCell(g.Written[i], showKey)
		}
		rows = append(rows, r)
		width = max(width, min(cellWidth, utf8.RuneCountInString(r.exp)))
	}
	cut := false
	num := len(strconv.Itoa(n))
	fmt.Fprintf(w, "%s    %*s %s  %s\n", indent, num, "", pad(sides.Expected, width), sides.Written)
	if from > 0 {
		fmt.Fprintf(w, "%s    %*s …\n", indent, num, "")
	}
	for k, r := range rows {
		i := from + k
		exp, got := clip(r.exp, width, &cut), clip(r.got, cellWidth, &cut)
		if r.exp == "" {
			exp = "—"
		}
		if r.got == "" {
			got = "—"
		}
		mark := "  "
		if i >= g.First && (i == g.First || !sameRow(g, i)) {
			mark = st.Red("✗ ")
			exp, got = st.Red(pad(exp, width)), st.Green(got)
		} else {
			exp = pad(exp, width)
		}
		fmt.Fprintf(w, "%s  %s%*d %s  %s\n", indent, mark, num, i+1, exp, got)
	}
	if to < n {
		fmt.Fprintf(w, "%s    %*s … (%d more)\n", indent, num, "", n-to)
	}
	// The first difference in full: where each record is, and why they
	// differ.
	var parts []string
	if g.First < len(g.Expected) {
		parts = append(parts, sides.Expected+" at "+g.Expected[g.First].Where)
	}
	if g.First < len(g.Written) {
		parts = append(parts, "written at "+g.Written[g.First].where()+why(g.Written[g.First]))
	}
	line := fmt.Sprintf("record %d: %s", g.First+1, strings.Join(parts, "; "))
	if g.Why != "" {
		line = fmt.Sprintf("record %d differs in %s; %s", g.First+1, g.Why, strings.Join(parts, "; "))
	}
	fmt.Fprintf(w, "%s%s\n", indent, st.Dim(line))
	if cut && g.First < len(g.Expected) && g.First < len(g.Written) {
		fmt.Fprintf(w, "%s  %s %s\n", indent, pad(sides.Expected+":", len(sides.Expected)+1), st.Red(expectedCell(g.Expected[g.First], showKey)))
		fmt.Fprintf(w, "%s  %s %s\n", indent, pad("written:", len(sides.Expected)+1), st.Green(writtenCell(g.Written[g.First], showKey)))
	}
}

// sameRow reports whether row i of a group matches on both sides.
func sameRow(g GroupDiff, i int) bool {
	return i < len(g.Expected) && i < len(g.Written) && mismatch(g.Expected[i], g.Written[i]) == ""
}

func writeList(w io.Writer, title, mark string, n int, line func(int) string, indent string, colour func(string) string) {
	if n == 0 {
		return
	}
	fmt.Fprintf(w, "%s%s:\n", indent, title)
	for i := range min(n, listedRecords) {
		fmt.Fprintf(w, "%s  %s %s\n", indent, colour(mark), line(i))
	}
	if n > listedRecords {
		fmt.Fprintf(w, "%s  … and %d more\n", indent, n-listedRecords)
	}
}

func expectedCell(e *Expected, showKey bool) string {
	if showKey && e.Key != nil {
		return strconv.Quote(string(e.Key)) + " → " + e.Value.String()
	}
	return e.Value.String()
}

func writtenCell(r Record, showKey bool) string {
	if showKey && r.Key != nil {
		return strconv.Quote(string(r.Key)) + " → " + showBytes(r.Value)
	}
	return showBytes(r.Value)
}

// why is what a written record's headers say about it: a dead letter's
// code and reason, a late record's window.
func why(r Record) string {
	if code, ok := r.header(sink.HeaderCode); ok {
		reason, _ := r.header(sink.HeaderReason)
		return fmt.Sprintf(", code %s: %s", code, reason)
	}
	if end, ok := r.header(headerLateWindowEnd); ok {
		wm, _ := r.header(headerLateWatermark)
		return fmt.Sprintf(", late for the window ending %s (watermark %s)", end, wm)
	}
	return ""
}

// clip cuts s to width characters, noting in cut that it did.
func clip(s string, width int, cut *bool) string {
	if utf8.RuneCountInString(s) <= width {
		return s
	}
	*cut = true
	r := []rune(s)
	return string(r[:width-1]) + "…"
}

func pad(s string, width int) string {
	if n := utf8.RuneCountInString(s); n < width {
		return s + strings.Repeat(" ", width-n)
	}
	return s
}
