package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Load reads the job file at path and parses it with the process
// environment (see Parse). A file that cannot be read is an error naming
// the path; problems in its content are Errors.
func Load(path string, opts ...Option) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err // it would name the path a second time
		}
		return nil, fmt.Errorf("read config %s: %w", path, err)
	}
	return Parse(path, data, os.LookupEnv, opts...)
}

// An Option adds to what Load and Parse check.
type Option func(*options)

type options struct {
	check func(*Config) Errors
	// brokers, when set, replace the file's connection (WithBrokers).
	brokers []string
	// registry, when set, replaces the file's schema registry
	// (WithSchemaRegistry).
	registry string
}

// WithBrokers has the job connect to brokers, with neither TLS nor SASL,
// whatever its kafka.brokers, kafka.tls and kafka.sasl say: they are
// replaced before the job is validated (only a value of the wrong shape
// there is still reported). For
// `pipeline test`, which runs a job on an in-memory cluster of its own:
// a job file whose brokers or password come from a variable the test does
// not set still loads.
func WithBrokers(brokers []string) Option {
	return func(o *options) { o.brokers = slices.Clone(brokers) }
}

// WithSchemaRegistry has a job that names a schema registry
// (schema_registry: in its file) reach the one at url instead, with
// neither credentials nor TLS, whatever its schema_registry.url,
// username, password, token and tls say (its timeout stays); they are
// replaced before the job is validated, as WithBrokers replaces the
// brokers. A job without schema_registry: stays without one, so a job
// that needs one and names none is still refused. For `pipeline test`,
// which serves a registry of its own beside its in-memory cluster.
func WithSchemaRegistry(url string) Option {
	return func(o *options) { o.registry = url }
}

// WithCheck has check judge what this package cannot, the expressions
// (compiled by the operator package): it is given the decoded Config,
// defaults applied, even when the file has other problems, and returns the
// problems it finds, made with Config.Errorf. They are reported with all
// the others, so a user sees every problem of the file at once; a problem
// at a field already reported, or inside a value of the wrong shape, is a
// consequence and left out.
func WithCheck(check func(*Config) Errors) Option {
	return func(o *options) { o.check = check }
}

// Parse turns the content of a job file into a complete, validated Config:
// it interpolates ${VAR} references with lookupEnv (nil: no variable is
// set), parses the YAML, decodes it strictly, applies defaults and
// validates the job, then runs the checks opts add (WithCheck). filename
// only labels positions. On any problem it returns nil and Errors holding
// every problem found, sorted by position.
func Parse(filename string, data []byte, lookupEnv func(string) (string, bool), opts ...Option) (*Config, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	if lookupEnv == nil {
		lookupEnv = func(string) (string, bool) { return "", false }
	}
	// A UTF-8 byte order mark is not part of the text; dropping it keeps
	// the columns of line 1 the ones an editor shows.
	data = bytes.TrimPrefix(data, []byte("\ufeff"))

	text, cols, errs, readable := interpolate(data, lookupEnv)
	if !readable {
		// Not UTF-8 YAML text: parsing it would only report consequences.
		return nil, finish(filename, errs)
	}
	// A bad reference stays as written: everything on its line is a
	// consequence of it, everything elsewhere is worth reporting with it.
	refLines := map[int]bool{}
	for _, e := range errs {
		refLines[e.Line] = true
	}
	c, later := parseText(filename, text, cols, o)
	for _, e := range later {
		if !refLines[e.Line] {
			errs = append(errs, e)
		}
	}
	if len(errs) > 0 {
		return nil, finish(filename, errs)
	}
	return c, nil
}

// parseText parses, decodes, defaults and validates interpolated text. It
// returns the Config even when there are problems, for Parse to drop.
func parseText(filename string, text []byte, cols colMap, o options) (*Config, Errors) {
	root, perr := parseYAML(text)
	if perr != nil {
		return nil, Errors{perr}
	}
	d := newDecoder(filename, cols)
	c := &Config{}
	d.document(root, c)
	if o.brokers != nil {
		c.Kafka.Brokers, c.Kafka.TLS, c.Kafka.SASL = slices.Clone(o.brokers), TLS{}, SASL{}
	}
	if _, named := d.at.key["schema_registry"]; named && o.registry != "" {
		r := &c.SchemaRegistry
		r.URL, r.Username, r.Password, r.Token, r.TLS = []string{o.registry}, "", "", "", TLS{}
	}
	applyDefaults(c, func(path string) bool { return d.set[path] })
	errs := append(d.errs, validate(c, d)...)
	c.file, c.where = filename, d.at
	if o.check != nil {
		for _, e := range o.check(c) {
			if !consequence(e, errs, d.bad) {
				errs = append(errs, e)
			}
		}
	}
	return c, errs
}

// consequence reports whether a problem the check found follows from one
// found already: at the same field, at a field containing one reported
// (a step with "no kind" whose filter had the wrong shape), or inside a
// value of the wrong shape (not decoded, so the check saw a zero value).
func consequence(e *Error, found Errors, bad map[string]bool) bool {
	for _, f := range found {
		if isWithin(f.Path, e.Path) {
			return true
		}
	}
	for p := e.Path; ; p = parent(p) {
		if bad[p] {
			return true
		}
		if p == "" {
			return false
		}
	}
}

// finish labels every problem with the file name and sorts them.
func finish(filename string, errs Errors) Errors {
	for _, e := range errs {
		e.File = filename
	}
	errs.Sort()
	return errs
}

// ParseDocument parses text, the one YAML document of a file read with a
// job file's manners (the test files of `pipeline test` are): nil for an
// empty file; a syntax error, or a second document, is an *Error at its
// line in filename.
func ParseDocument(filename string, text []byte) (*yaml.Node, error) {
	doc, err := parseYAML(bytes.TrimPrefix(text, []byte("\ufeff")))
	if err != nil {
		err.File = filename
		return nil, err
	}
	return doc, nil
}

// parseYAML parses the single YAML document in text; nil for an empty one.
func parseYAML(text []byte) (*yaml.Node, *Error) {
	doc, second, err := decodeDocuments(text)
	switch {
	case err != nil:
		return nil, syntaxError(text, err)
	case second != nil:
		return nil, &Error{Line: second.Line, Col: 1, Msg: "the file holds one YAML document; a second one starts here"}
	}
	return doc, nil
}

// decodeDocuments parses the first document of text and, if there is one,
// the second (only to refuse it).
func decodeDocuments(text []byte) (doc, second *yaml.Node, err error) {
	defer func() {
		// The parser turns its own failures into errors, but it is
		// third-party code: a job file must never crash the process.
		if r := recover(); r != nil {
			doc, second, err = nil, nil, fmt.Errorf("yaml: the parser failed: %v", r)
		}
	}()
	dec := yaml.NewDecoder(bytes.NewReader(text))
	doc = &yaml.Node{}
	if err := dec.Decode(doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil, nil
		}
		return nil, nil, err
	}
	second = &yaml.Node{}
	if err := dec.Decode(second); err != nil {
		if errors.Is(err, io.EOF) {
			return doc, nil, nil
		}
		return nil, nil, err
	}
	return doc, second, nil
}

var yamlLine = regexp.MustCompile(`^line (\d+): `)

// parserProblems are the messages of yaml/v3's parser (as opposed to its
// scanner). For these it prints the 0-based line where the construct
// began; for scanner problems the 1-based line. Either way it prints no
// line for problems on the first line.
var parserProblems = []string{
	"did not find expected <stream-start>",
	"did not find expected <document start>",
	"did not find expected node content",
	"did not find expected '-' indicator",
	"did not find expected key",
	"did not find expected ',' or ']'",
	"did not find expected ',' or '}'",
	"found undefined tag handle",
	"found duplicate %YAML directive",
	"found incompatible YAML document",
	"found duplicate %TAG directive",
}

// syntaxError turns a parser error for text into an Error at the line
// where the bad construct began. yaml/v3 gives no column (column 1 keeps
// the FILE:LINE:COL form editors understand) and omits line 1; parsing
// the text again one line lower makes every line show, and the 0-based
// lines of parser problems are corrected. Problems found outside the
// parser proper (an unknown anchor) carry no line.
func syntaxError(text []byte, err error) *Error {
	if _, _, lowered := decodeDocuments(append([]byte("\n"), text...)); lowered != nil {
		err = lowered
	}
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	e := &Error{}
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		msg = msg[len(m[0]):]
		if n, convErr := strconv.Atoi(m[1]); convErr == nil {
			if !slices.Contains(parserProblems, msg) {
				n-- // a 1-based line of the lowered text
			}
			// At the end of the stream the parser may name the line
			// after the last.
			n = min(n, bytes.Count(text, []byte("\n"))+1)
			if n >= 1 {
				e.Line, e.Col = n, 1
			}
		}
	}
	e.Msg = "invalid YAML: " + msg
	return e
}
