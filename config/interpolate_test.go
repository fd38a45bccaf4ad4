package config

import (
	"slices"
	"strings"
	"testing"
)

func TestInterpolate(t *testing.T) {
	vars := env(map[string]string{
		"SET":    "value",
		"EMPTY":  "",
		"LIST":   "a:1,b:2",
		"DOLLAR": "p$$w",
		"UNI":    "héllo",
	})
	tests := []struct {
		in, want string
	}{
		{"x: ${SET}", "x: value"},
		{"x: ${UNSET}", "x: "},
		{"x: ${UNSET:-fallback}", "x: fallback"},
		{"x: ${EMPTY:-fallback}", "x: fallback"}, // empty counts as unset, as in compose
		{"x: ${SET:-fallback}", "x: value"},
		{"x: ${UNSET:-}", "x: "},
		{"x: ${UNSET:-a b:c}", "x: a b:c"},
		{"x: ${UNSET:-$x}", "x: $x"}, // a default is literal
		{"x: $$", "x: $"},
		{"x: $${SET}", "x: ${SET}"},
		{"x: $$$$", "x: $$"},
		{"x: $SET $ 5$", "x: $SET $ 5$"}, // other $ are kept
		{"x: ${DOLLAR}", "x: p$$w"},      // values are not interpolated again
		{"x: ${LIST}", "x: a:1,b:2"},
		{"x: ${SET}${SET}\ny: ${UNI}", "x: valuevalue\ny: héllo"},
		{"x: 1\r\ny: ${SET}\r\n", "x: 1\r\ny: value\r\n"},
	}
	for _, tt := range tests {
		got, _, errs, _ := interpolate([]byte(tt.in), vars)
		if len(errs) > 0 || string(got) != tt.want {
			t.Errorf("interpolate(%q) = %q, %v; want %q", tt.in, got, errs, tt.want)
		}
	}
}

func TestInterpolateErrors(t *testing.T) {
	vars := env(map[string]string{"NL": "a\nb", "CR": "a\rb", "CTL": "a\x00b", "LS": "a\u2028b"})
	tests := []struct {
		in   string
		want []string
	}{
		{"x: ${OPEN", []string{"1:4: unterminated ${: missing } on the same line (write $$ for a literal $)"}},
		{"x: ${OPEN\n}", []string{"1:4: unterminated ${: missing } on the same line (write $$ for a literal $)"}},
		{"x: ${}", []string{"1:4: bad variable reference ${}: the name must be letters, digits and _, not starting with a digit; the forms are ${VAR} and ${VAR:-default}"}},
		{"x: ${A-B}", []string{"1:4: bad variable reference ${A-B}: the name must be letters, digits and _, not starting with a digit; the forms are ${VAR} and ${VAR:-default}"}},
		{"x: ${NL}", []string{"1:4: the value of NL contains a line break; values must fit on one line"}},
		{"x: ${CR}", []string{"1:4: the value of CR contains a line break; values must fit on one line"}},
		{"x: ${LS}", []string{"1:4: the value of LS contains a line break; values must fit on one line"}},
		{"x: ${CTL}", []string{"1:4: the value of CTL contains U+0000, which YAML does not allow"}},
		{"a: \x00\x01\xff\nb: \xfe", []string{ // the first bad character of each line
			"1:4: character U+0000 is not allowed in YAML",
			"2:4: invalid UTF-8 (the file must be UTF-8 text)",
		}},
		{"a: é${X\nb: ${Y:-${Z}}", []string{
			"1:5: unterminated ${: missing } on the same line (write $$ for a literal $)",
			"2:4: bad variable reference ${Y:-${Z}: a default cannot contain ${",
		}},
	}
	for _, tt := range tests {
		_, _, errs, _ := interpolate([]byte(tt.in), vars)
		var got []string
		for _, e := range errs {
			got = append(got, e.Error())
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("interpolate(%q) problems:\n%s\nwant:\n%s", tt.in, strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
		}
	}
}

// TestInterpolateColumns checks that columns of the interpolated text map
// back to the file as written.
func TestInterpolateColumns(t *testing.T) {
	in := "k: ${A} x ${LONGER_NAME:-d} $$ y\nz: ${A}"
	//     1234567890123456789012345678901234
	out, cols, errs, _ := interpolate([]byte(in), env(map[string]string{"A": "abcdefgh"}))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if want := "k: abcdefgh x d $ y\nz: abcdefgh"; string(out) != want {
		t.Fatalf("out = %q, want %q", out, want)
	}
	tests := []struct{ line, col, want int }{
		{1, 1, 1},   // before any substitution
		{1, 4, 4},   // first character of A's value: the ${
		{1, 11, 4},  // last character of A's value
		{1, 13, 9},  // x
		{1, 15, 11}, // the default d: its ${
		{1, 17, 29}, // the $ of $$
		{1, 19, 32}, // y
		{2, 6, 4},   // another line has its own substitutions
	}
	for _, tt := range tests {
		if got := cols.orig(tt.line, tt.col); got != tt.want {
			t.Errorf("orig(%d, %d) = %d, want %d", tt.line, tt.col, got, tt.want)
		}
	}
}

// TestParseInterpolation runs the rules through Parse, as a user meets them.
func TestParseInterpolation(t *testing.T) {
	text := `name: ${JOB:-parity}
guarantee: ${GUARANTEE}
kafka:
  brokers: ${KAFKA_BROKERS:-127.0.0.1:9092}
sources:
  - topics: ${TOPICS}
sinks:
  - topic: out
checkpoint:
  interval: ${INTERVAL:-2s}
admin:
  token: pa$$word
`
	tests := []struct {
		name    string
		vars    map[string]string
		check   func(c *Config) bool
		explain string
	}{
		{"defaults", map[string]string{"TOPICS": "in"}, func(c *Config) bool {
			return c.Name == "parity" && c.Guarantee == ExactlyOnce && slices.Equal(c.Kafka.Brokers, []string{"127.0.0.1:9092"}) &&
				c.Admin.Token == "pa$word" && c.Checkpoint.Interval.String() == "2s"
		}, "defaults used, unset guarantee takes the schema default"},
		{"set", map[string]string{"JOB": "j", "GUARANTEE": "at_least_once", "KAFKA_BROKERS": "a:1, b:2,", "TOPICS": "x,y", "INTERVAL": "5s"}, func(c *Config) bool {
			return c.Name == "j" && c.Guarantee == AtLeastOnce && slices.Equal(c.Kafka.Brokers, []string{"a:1", "b:2"}) &&
				slices.Equal(c.Sources[0].Topics, []string{"x", "y"}) && c.Checkpoint.Interval.String() == "5s"
		}, "comma lists split and trimmed, empty items dropped"},
		{"empty with default", map[string]string{"JOB": "", "KAFKA_BROKERS": "", "TOPICS": "in"}, func(c *Config) bool {
			return c.Name == "parity" && slices.Equal(c.Kafka.Brokers, []string{"127.0.0.1:9092"})
		}, "empty values take the default"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := mustParse(t, text, tt.vars)
			if !tt.check(c) {
				t.Errorf("%s: got %+v", tt.explain, public(c))
			}
		})
	}

	_, err := Parse("c.yaml", []byte(text), env(nil))
	if want := "c.yaml:6:5: sources[0].topics: at least one topic is required"; err == nil || err.Error() != want {
		t.Errorf("unset TOPICS: %v, want %s", err, want)
	}
}
