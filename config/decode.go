package config

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// The decoder walks the YAML node tree itself rather than calling
// yaml.Unmarshal, so that it can report every problem at once, each at its
// line and column with the path of the field, and remember where each
// field was written. It checks shape only (is this a mapping, a number, a
// duration, a known key); whether the values make a sensible job is
// validate's concern.
//
// Struct fields are found by their yaml tags, so the schema in config.go is
// the one source of truth for key names. Types with a special written form
// (durations, start positions, string lists, ordered name: value mappings)
// have their own decoders.

// nodeBudget caps the nodes one file may make the decoder visit. A small
// file can reference a large anchored list many times over; without a cap
// that is a cheap way to make validation take hours. Real jobs visit a few
// hundred nodes.
const nodeBudget = 100_000

type decoder struct {
	file string
	cols colMap
	errs Errors
	at   positions
	// set holds the paths given a non-empty value; defaults fill the rest.
	set map[string]bool
	// bad holds the paths whose value had the wrong shape, so that
	// validation does not pile consequences on top of the real problem.
	bad    map[string]bool
	budget int
}

func newDecoder(file string, cols colMap) *decoder {
	return &decoder{
		file:   file,
		cols:   cols,
		at:     newPositions(),
		set:    map[string]bool{},
		bad:    map[string]bool{},
		budget: nodeBudget,
	}
}

var (
	durationType  = reflect.TypeFor[time.Duration]()
	startType     = reflect.TypeFor[StartPosition]()
	stringsType   = reflect.TypeFor[[]string]()
	fieldsType    = reflect.TypeFor[[]Field]()
	aggValuesType = reflect.TypeFor[[]AggregateValue]()
)

// where is the position of n in the file as written.
func (d *decoder) where(n *yaml.Node) pos {
	return pos{n.Line, d.cols.orig(n.Line, n.Column)}
}

func (d *decoder) failAt(at pos, path, format string, args ...any) {
	d.errs = append(d.errs, &Error{File: d.file, Line: at.line, Col: at.col, Path: path, Msg: fmt.Sprintf(format, args...)})
}

// fail reports a value of the wrong shape at n.
func (d *decoder) fail(n *yaml.Node, path, format string, args ...any) {
	d.bad[path] = true
	d.failAt(d.where(n), path, format, args...)
}

// resolve follows aliases to the node they name, spending budget. It
// returns nil once the budget is spent.
func (d *decoder) resolve(n *yaml.Node) *yaml.Node {
	if d.overBudget() {
		return nil
	}
	d.budget--
	if d.overBudget() {
		// What was decoded so far is a fragment: its problems would only
		// bury this one.
		d.errs = Errors{{File: d.file, Line: n.Line, Col: d.cols.orig(n.Line, n.Column),
			Msg: fmt.Sprintf("the document expands (through aliases) to more than %d nodes; write it out without aliases", nodeBudget)}}
		d.bad[""] = true
		return nil
	}
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	return n
}

func (d *decoder) overBudget() bool { return d.budget < 0 }

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// document decodes the root of the file into c. An empty file decodes to
// nothing; validation then names what is missing.
func (d *decoder) document(root *yaml.Node, c *Config) {
	if root == nil {
		return
	}
	if root.Kind == yaml.DocumentNode {
		if len(root.Content) == 0 {
			return
		}
		root = root.Content[0]
	}
	d.value(root, "", reflect.ValueOf(c).Elem())
}

// value decodes n, written at path, into v.
func (d *decoder) value(n *yaml.Node, path string, v reflect.Value) {
	written := n
	if n = d.resolve(n); n == nil {
		return
	}
	if isNull(n) {
		// Null is "not set": the default applies, and a required field
		// is reported missing at its key. Only an aggregate's presence
		// matters even when empty, so pointers are allocated.
		if v.Kind() == reflect.Pointer && v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		return
	}
	if path != "" {
		at := d.where(written)
		if k, ok := d.at.key[path]; ok && n.Kind != yaml.ScalarNode {
			// A problem with a whole section or list ("at least one
			// topic is required") reads best at the key that names it.
			at = k
		}
		d.at.value[path] = at
	}
	switch v.Type() {
	case durationType:
		d.duration(n, path, v)
	case startType:
		d.start(n, path, v)
	case stringsType:
		d.stringList(n, path, v)
	case fieldsType:
		d.fields(n, path, v)
	case aggValuesType:
		d.aggregateValues(n, path, v)
	default:
		d.byKind(n, path, v)
	}
}

func (d *decoder) byKind(n *yaml.Node, path string, v reflect.Value) {
	switch v.Kind() {
	case reflect.String:
		if s, ok := d.scalar(n, path, "a string"); ok {
			v.SetString(s)
			d.set[path] = s != ""
		}
	case reflect.Int:
		d.integer(n, path, v)
	case reflect.Bool:
		d.boolean(n, path, v)
	case reflect.Pointer:
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		d.byKind(n, path, v.Elem())
	case reflect.Struct:
		d.structure(n, path, v)
	case reflect.Slice:
		d.sequence(n, path, v)
	default:
		// Only reachable if config.go gains a field of a kind this file
		// does not know; the tests decode every field.
		panic(fmt.Sprintf("config: no decoder for %s (%s)", v.Type(), path))
	}
}

// scalar returns the text of a scalar node, or reports that n is not one.
func (d *decoder) scalar(n *yaml.Node, path, want string) (string, bool) {
	if n.Kind != yaml.ScalarNode {
		d.fail(n, path, "want %s, got %s", want, describe(n))
		return "", false
	}
	return n.Value, true
}

// structure decodes a mapping into the fields of struct v named by their
// yaml tags.
func (d *decoder) structure(n *yaml.Node, path string, v reflect.Value) {
	keys, index := yamlFields(v.Type())
	d.mapping(n, path, keys, func(key string, val *yaml.Node) {
		d.value(val, join(path, key), v.Field(index[key]))
	})
}

// yamlFields lists the yaml keys of struct type t in declaration order,
// with the index of the field each names.
func yamlFields(t reflect.Type) ([]string, map[string]int) {
	var keys []string
	index := map[string]int{}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if !f.IsExported() || name == "" || name == "-" {
			continue
		}
		keys = append(keys, name)
		index[name] = i
	}
	return keys, index
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// mapping checks that n is a mapping with string keys, each written once
// and (when allowed is not nil) each one of allowed, and calls each for
// every good key in written order.
func (d *decoder) mapping(n *yaml.Node, path string, allowed []string, each func(key string, val *yaml.Node)) {
	if n.Kind != yaml.MappingNode {
		d.fail(n, path, "want a mapping, got %s", describe(n))
		return
	}
	first := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := d.resolve(n.Content[i])
		if k == nil {
			return
		}
		if k.Kind != yaml.ScalarNode {
			d.failAt(d.where(n.Content[i]), path, "a key must be a string, got %s", describe(k))
			continue
		}
		key, kpath, at := k.Value, join(path, k.Value), d.where(n.Content[i])
		switch line, dup := first[key]; {
		case k.ShortTag() == "!!merge":
			d.failAt(at, path, "merge keys (<<) are not supported; write the settings out")
			continue
		case dup:
			d.failAt(at, kpath, "written twice (first at line %d); keep one", line)
			continue
		case allowed != nil && !slices.Contains(allowed, key):
			d.failAt(at, kpath, "unknown field%s", suggestion(key, allowed))
			continue
		}
		first[key] = at.line
		d.at.key[kpath] = at
		each(key, n.Content[i+1])
	}
}

// Suggestion is the end of an "unknown ..." message: "; did you mean X?"
// with the closest allowed word when one is close, otherwise "; allowed:"
// and the whole list. Other files read with the same manners (the test
// files of `pipeline test`) use it too.
func Suggestion(got string, allowed []string) string { return suggestion(got, allowed) }

// suggestion is the end of an "unknown ..." message: the closest allowed
// word when one is close, otherwise the whole list.
func suggestion(got string, allowed []string) string {
	if best, ok := closest(got, allowed); ok {
		return fmt.Sprintf("; did you mean %s?", best)
	}
	return "; allowed: " + strings.Join(allowed, ", ")
}

// closest is the allowed word nearest to got, if it is near enough to be
// what a typo of it meant: at most one edit per three characters of got,
// and one for any word (a swap of two neighbours is one edit: strat,
// jsno). Case is ignored.
func closest(got string, allowed []string) (string, bool) {
	limit := max(1, utf8.RuneCountInString(got)/3)
	best, bestDist := "", limit+1
	for _, a := range allowed {
		if abs(len(got)-len(a)) >= bestDist {
			continue // too far apart to be a typo; skips long garbage cheaply
		}
		if dist := editDistance(strings.ToLower(got), strings.ToLower(a)); dist < bestDist {
			best, bestDist = a, dist
		}
	}
	return best, best != ""
}

func abs(x int) int { return max(x, -x) }

// editDistance is the optimal string alignment distance between a and b,
// in bytes (keys and enum values are ASCII): the Levenshtein distance
// with a swap of two adjacent characters counted as one edit, the
// commonest typo.
func editDistance(a, b string) int {
	// Rows i-2, i-1 and i of the table.
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}

// sequence decodes a list into slice v, item by item.
func (d *decoder) sequence(n *yaml.Node, path string, v reflect.Value) {
	if n.Kind != yaml.SequenceNode {
		d.fail(n, path, "want a list, got %s", describe(n))
		return
	}
	s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
	for i, item := range n.Content {
		d.value(item, fmt.Sprintf("%s[%d]", path, i), s.Index(i))
	}
	v.Set(s)
}

func (d *decoder) integer(n *yaml.Node, path string, v reflect.Value) {
	s, ok := d.scalar(n, path, "a whole number")
	if !ok {
		return
	}
	var i int
	var err error
	switch n.ShortTag() {
	case "!!int":
		err = n.Decode(&i)
	case "!!str":
		// A quoted number, e.g. "${WORKERS}": the intent is clear.
		if strings.TrimSpace(s) == "" {
			return
		}
		i, err = strconv.Atoi(strings.TrimSpace(s))
	default:
		d.fail(n, path, "want a whole number, got %s", describe(n))
		return
	}
	if err != nil {
		d.fail(n, path, "want a whole number, got %s", describe(n))
		return
	}
	v.SetInt(int64(i))
	d.set[path] = true
}

func (d *decoder) boolean(n *yaml.Node, path string, v reflect.Value) {
	s, ok := d.scalar(n, path, "true or false")
	if !ok {
		return
	}
	var b bool
	switch {
	case strings.TrimSpace(s) == "":
		return
	case n.ShortTag() == "!!bool" && n.Decode(&b) == nil:
	case s == "true" || s == "false":
		// A quoted boolean, e.g. "${TLS}".
		b = s == "true"
	default:
		d.fail(n, path, "want true or false, got %s", describe(n))
		return
	}
	v.SetBool(b)
	d.set[path] = true
}

// duration reads Go duration syntax. A bare number is refused: is 1000
// milliseconds or seconds? The reader of the file should not have to know.
func (d *decoder) duration(n *yaml.Node, path string, v reflect.Value) {
	s, ok := d.scalar(n, path, "a duration such as 1s or 250ms")
	if !ok {
		return
	}
	s = strings.TrimSpace(s)
	if s == "" {
		return
	}
	if _, err := strconv.ParseFloat(s, 64); err == nil {
		d.fail(n, path, "duration needs a unit, e.g. 1s (got %s)", s)
		return
	}
	dur, err := parseDuration(s)
	switch {
	case errors.Is(err, errDurationNegative) || err == nil && dur < 0:
		d.fail(n, path, "duration %s is negative", s)
		return
	case errors.Is(err, errDurationTooLarge):
		d.fail(n, path, "duration %s is too large: at most %dd (about 292 years)", s, maxDurationDays)
		return
	case err != nil:
		d.fail(n, path, "invalid duration %q: want a number with a unit (ns, us, ms, s, m, h, d), e.g. 250ms, 1s, 1m30s, 7d", s)
		return
	}
	v.SetInt(int64(dur))
	d.set[path] = true
}

func (d *decoder) start(n *yaml.Node, path string, v reflect.Value) {
	s, ok := d.scalar(n, path, "earliest, latest or an RFC 3339 timestamp")
	if !ok {
		return
	}
	var sp StartPosition
	switch s = strings.TrimSpace(s); s {
	case "":
		return
	case string(StartEarliest):
		sp.Kind = StartEarliest
	case string(StartLatest):
		sp.Kind = StartLatest
	default:
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			const want = "earliest, latest or an RFC 3339 timestamp such as 2024-05-01T00:00:00Z"
			if best, ok := closest(s, []string{string(StartEarliest), string(StartLatest)}); ok {
				d.fail(n, path, "unknown start %q; did you mean %s? (want %s)", s, best, want)
				return
			}
			d.fail(n, path, "want %s, got %q", want, s)
			return
		}
		sp = StartPosition{Kind: StartAtTimestamp, At: t}
	}
	v.Set(reflect.ValueOf(sp))
	d.set[path] = true
}

// stringList reads a list of strings, or one string of comma-separated
// items so that a whole list can come from one environment variable
// (brokers: ${KAFKA_BROKERS}). Empty items of a comma list are dropped.
func (d *decoder) stringList(n *yaml.Node, path string, v reflect.Value) {
	switch n.Kind {
	case yaml.SequenceNode:
		d.sequence(n, path, v)
		return
	case yaml.ScalarNode:
	default:
		d.fail(n, path, "want a list of strings or one comma-separated string, got %s", describe(n))
		return
	}
	var items []string
	col := n.Column
	for part := range strings.SplitSeq(n.Value, ",") {
		item := strings.TrimSpace(part)
		if item != "" {
			p := fmt.Sprintf("%s[%d]", path, len(items))
			items = append(items, item)
			at := d.where(n)
			if n.Style == 0 && n.Line > 0 && !strings.ContainsAny(n.Value, "\n") {
				// A plain scalar is written as it reads: point at the item.
				lead := utf8.RuneCountInString(part) - utf8.RuneCountInString(strings.TrimLeft(part, " \t"))
				at.col = d.cols.orig(n.Line, col+lead)
			}
			d.at.value[p] = at
		}
		col += utf8.RuneCountInString(part) + 1
	}
	v.Set(reflect.ValueOf(items))
	d.set[path] = len(items) > 0
}

// fields reads a mapping of name: expression into []Field, keeping the
// written order (it is the order of the output fields).
func (d *decoder) fields(n *yaml.Node, path string, v reflect.Value) {
	fields := []Field{}
	d.mapping(n, path, nil, func(name string, val *yaml.Node) {
		fpath := path + "." + name
		f := Field{Name: name}
		if val = d.resolve(val); val == nil {
			return
		}
		if !isNull(val) {
			d.at.value[fpath] = d.where(val)
			f.Expr, _ = d.scalar(val, fpath, "an expression (a string)")
		}
		fields = append(fields, f)
	})
	v.Set(reflect.ValueOf(fields))
}

// aggregateValues reads a mapping of name: "func(arg)" into
// []AggregateValue, in written order.
func (d *decoder) aggregateValues(n *yaml.Node, path string, v reflect.Value) {
	values := []AggregateValue{}
	d.mapping(n, path, nil, func(name string, val *yaml.Node) {
		vpath := path + "." + name
		av := AggregateValue{Name: name}
		defer func() { values = append(values, av) }()
		if val = d.resolve(val); val == nil {
			return
		}
		if isNull(val) {
			d.failAt(d.at.key[vpath], vpath, "want an aggregate such as count() or sum(amount)")
			d.bad[vpath] = true
			return
		}
		d.at.value[vpath] = d.where(val)
		s, ok := d.scalar(val, vpath, "an aggregate such as count() or sum(amount)")
		if !ok {
			return
		}
		fn, arg, msg := parseAggregate(s)
		if msg != "" {
			d.fail(val, vpath, "%s", msg)
			return
		}
		av.Func, av.Arg = fn, arg
	})
	v.Set(reflect.ValueOf(values))
}

// aggregateFuncs in the order the docs list them.
var aggregateFuncs = []string{"count", "sum", "min", "max", "avg", "first", "last"}

// parseAggregate splits "sum(n)" into sum and n, or says what is wrong.
func parseAggregate(s string) (fn AggregateFunc, arg, msg string) {
	s = strings.TrimSpace(s)
	open := strings.IndexByte(s, '(')
	if open < 0 || !strings.HasSuffix(s, ")") {
		return "", "", fmt.Sprintf("want function(expression), e.g. sum(amount) or count(); got %q", s)
	}
	name := strings.TrimSpace(s[:open])
	arg = strings.TrimSpace(s[open+1 : len(s)-1])
	if !slices.Contains(aggregateFuncs, name) {
		return "", "", fmt.Sprintf("unknown aggregate function %q%s", name, suggestion(name, aggregateFuncs))
	}
	fn = AggregateFunc(name)
	switch {
	case fn == AggCount && arg != "":
		return "", "", fmt.Sprintf("count() takes no argument; got count(%s)", arg)
	case fn != AggCount && arg == "":
		return "", "", fmt.Sprintf("%s() needs an argument, e.g. %s(amount)", fn, fn)
	}
	return fn, arg, ""
}

// describe names what a node is, for "want X, got Y" messages.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
	default:
		return "nothing"
	}
	v := n.Value
	if utf8.RuneCountInString(v) > 40 {
		v = string([]rune(v)[:37]) + "..."
	}
	switch n.ShortTag() {
	case "!!str":
		return fmt.Sprintf("the string %q", v)
	case "!!int", "!!float":
		return "the number " + v
	case "!!bool":
		return v
	case "!!null":
		return "nothing"
	case "!!timestamp":
		return "the timestamp " + v
	}
	return fmt.Sprintf("%q", v)
}

// Why parseDuration refused a duration that is well formed.
var (
	errDurationNegative = errors.New("negative")
	errDurationTooLarge = errors.New("too large")
)

// maxDurationDays is the whole days a time.Duration holds (about 292
// years).
const maxDurationDays = math.MaxInt64 / int64(24*time.Hour)

// durationSyntax is what time.ParseDuration reads, unsigned: numbers
// with units.
var durationSyntax = regexp.MustCompile(`^(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+$`)

// parseDuration is time.ParseDuration plus days: a leading whole number
// of days ("7d", "1d12h"), since state TTLs are written in days. A well
// formed duration below zero is errDurationNegative, one beyond what a
// time.Duration holds errDurationTooLarge; anything else is a syntax
// error.
func parseDuration(s string) (time.Duration, error) {
	if rest, ok := strings.CutPrefix(s, "-"); ok {
		if d, err := parseDuration(rest); err == nil && d == 0 {
			return 0, nil // -0s
		} else if err == nil || errors.Is(err, errDurationTooLarge) {
			return 0, errDurationNegative
		}
		return 0, fmt.Errorf("invalid duration %q", s)
	}
	days, rest, ok := strings.Cut(s, "d")
	if !ok {
		d, err := time.ParseDuration(s)
		if err != nil && durationSyntax.MatchString(strings.TrimPrefix(s, "+")) {
			return 0, errDurationTooLarge // well formed: it overflowed
		}
		return d, err
	}
	if days == "" || strings.TrimLeft(days, "0123456789") != "" || (rest != "" && !durationSyntax.MatchString(rest)) {
		return 0, fmt.Errorf("invalid duration %q", s)
	}
	n, err := strconv.ParseInt(days, 10, 64)
	if err != nil || n > maxDurationDays {
		return 0, errDurationTooLarge
	}
	d := time.Duration(n) * 24 * time.Hour
	if rest == "" {
		return d, nil
	}
	r, err := time.ParseDuration(rest)
	if err != nil || r > math.MaxInt64-d {
		return 0, errDurationTooLarge
	}
	return d + r, nil
}
