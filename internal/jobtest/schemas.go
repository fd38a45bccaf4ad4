package jobtest

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"
	"go.yaml.in/yaml/v3"

	"github.com/eoflow/pipeline/config"
	"github.com/eoflow/pipeline/schema"
)

// The schema registry formats. A job that names a schema registry gets
// one of its own in every run, as it gets an in-memory cluster: franz-go's
// srfake, served over HTTP on a loopback port, with the case's schemas
// registered in the order the file gives them (so every run, a crash run
// too, gives them the same ids). Input values and keys given as YAML are
// written with their topic's schema by the schema package's own encoders,
// framed with the schema's id as a producer's serializer frames them;
// what the job writes in the wire format is read back, by the id in its
// framing, as JSON before it is compared.

// placeholderRegistry stands for the test's registry in a job that is
// only checked (bind): runs get a real one.
const placeholderRegistry = "http://schema-registry.invalid:8081"

// registration is one schema a run registers before it writes the input.
type registration struct {
	subject string
	schema  sr.Schema
}

// framedBytes is a value or key to write in the wire format: the schema
// (an index in bound.regs) and the bytes after its id.
type framedBytes struct {
	reg  int
	body []byte
}

// inputWrite is one input record as a run writes it.
type inputWrite struct {
	topic string
	rec   *InputRecord
	// value and key, when written with a schema; nil: rec's bytes.
	value, key *framedBytes
}

// version is one compiled schema of a topic, with its registration.
type version struct {
	spec *SchemaSpec
	w    *schema.Writer
	reg  int
}

// writerKey is a schema compiled for a format (a case's variables may
// change the format a topic is read in).
type writerKey struct {
	spec   *SchemaSpec
	format config.Format
}

type compiled struct {
	w   *schema.Writer
	err *config.Error
}

// writers compiles each schema of a test file once for all its cases.
type writers map[writerKey]compiled

// get is spec compiled as format, or the problem, at spec's place.
func (ws writers) get(file string, spec *SchemaSpec, format config.Format) (*schema.Writer, *config.Error) {
	k := writerKey{spec, format}
	if c, ok := ws[k]; ok {
		return c.w, c.err
	}
	text := spec.Text
	var c compiled
	if spec.File != "" {
		b, err := os.ReadFile(spec.File)
		if err != nil {
			var pe *fs.PathError
			if errors.As(err, &pe) {
				err = pe.Err
			}
			c.err = errorAt(file, spec.At, spec.Path, "cannot read the schema file %s: %v", spec.File, err)
			ws[k] = c
			return nil, c.err
		}
		text = string(b)
	}
	w, err := schema.NewWriter(format, text, spec.Message)
	if err != nil {
		c.err = errorAt(file, spec.At, spec.Path, "%s: %v", spec.label(), err)
	}
	c.w = w
	ws[k] = c
	return c.w, c.err
}

// label names a schema in messages.
func (s *SchemaSpec) label() string {
	if s.File != "" {
		return filepath.Base(s.File)
	}
	return fmt.Sprintf("the schema at line %d", s.At.Line)
}

// bindSchemas compiles the case's schemas, plans their registration and
// writes each input record's value and key with its topic's schema,
// reporting every problem through fail.
func (b *bound) bindSchemas(file string, cfg *config.Config, ws writers, fail func(*config.Error)) {
	b.registry = cfg.SchemaRegistry.Enabled()
	type sides struct{ value, key config.Format }
	read := map[string]sides{}
	var topics []string
	for _, s := range cfg.Sources {
		for _, t := range s.Topics {
			read[t] = sides{s.Format, s.KeyFormat}
			topics = append(topics, t)
		}
	}
	for _, t := range cfg.Tables {
		read[t.Topic] = sides{t.Format, t.KeyFormat}
		topics = append(topics, t.Topic)
	}
	written := map[string]config.Format{}
	for _, s := range cfg.Sinks {
		written[s.Topic] = s.Format
		topics = append(topics, s.Topic)
	}

	// The versions of each topic's schemas, registered in order.
	type topicVersions struct{ value, key []version }
	versions := map[string]*topicVersions{}
	for _, ts := range b.c.Schemas {
		formats, reads := read[ts.Topic]
		sinkFormat, writes := written[ts.Topic]
		switch {
		case !reads && !writes:
			fail(errorAt(file, ts.At, ts.Path, "the job reads or writes no topic %q%s", ts.Topic, config.Suggestion(ts.Topic, topics)))
			continue
		case !b.registry:
			fail(errorAt(file, ts.At, ts.Path, "the job names no schema registry (schema_registry:): no record it reads or writes carries a schema"))
			continue
		}
		if !reads {
			formats = sides{sinkFormat, ""}
		}
		tv := &topicVersions{}
		for _, side := range []struct {
			specs   []*SchemaSpec
			format  config.Format
			subject string
			out     *[]version
			what    string
		}{
			{ts.Value, formats.value, ts.Topic + "-value", &tv.value, "values"},
			{ts.Key, formats.key, ts.Topic + "-key", &tv.key, "keys"},
		} {
			for _, spec := range side.specs {
				format := spec.Format
				if format == "" {
					if !side.format.Registered() {
						how := "reads"
						if !reads {
							how = "writes"
						}
						fail(errorAt(file, spec.At, spec.Path, "the job %s the %s of %s as %s, which carries no schema: give format: (avro, protobuf or json_schema) to write them with one anyway",
							how, side.what, ts.Topic, formatName(side.format)))
						continue
					}
					format = side.format
				}
				w, err := ws.get(file, spec, format)
				if err != nil {
					fail(err)
					continue
				}
				*side.out = append(*side.out, version{spec: spec, w: w, reg: len(b.regs)})
				b.regs = append(b.regs, registration{subject: side.subject, schema: w.Schema()})
			}
		}
		versions[ts.Topic] = tv
	}

	for _, in := range b.c.Input {
		formats, ok := read[in.Topic]
		if !ok {
			continue // reported by bind
		}
		tv := versions[in.Topic]
		if tv == nil {
			tv = &topicVersions{}
		}
		schemaless := false // reported once per topic
		for i, r := range in.Records {
			iw := inputWrite{topic: in.Topic, rec: r}
			path := index(in.Path, i)
			good := true
			switch {
			case len(tv.value) > 0 && r.value.js != nil && !r.value.binary:
				v := tv.value[len(tv.value)-1]
				if r.SchemaVersion > len(tv.value) {
					fail(errorAt(file, r.SchemaVersionAt, path+".schema_version", "%s lists %s for the values of %s",
						versionsPath(b.c.Schemas, in.Topic), count(len(tv.value), "schema"), in.Topic))
					good = false
					break
				} else if r.SchemaVersion > 0 {
					v = tv.value[r.SchemaVersion-1]
				}
				iw.value, good = encodeWritten(file, r.value, v, fail)
			case r.SchemaVersion > 0:
				fail(errorAt(file, r.SchemaVersionAt, path+".schema_version", "no schema of %s's values to pick a version of: give them under schemas:", in.Topic))
				good = false
			case formats.value.Registered() && r.value.js != nil && !r.value.text && !r.value.binary && !schemaless:
				fail(errorAt(file, at(r.value.node), r.value.path, "the job reads %s as %s: give the schema its values are written with under schemas: ({%s: FILE}), or write the value as a string, which is its bytes",
					in.Topic, formats.value, in.Topic))
				schemaless, good = true, false
			}
			switch {
			case len(tv.key) > 0 && r.key.js != nil && !r.key.binary:
				var ok bool
				iw.key, ok = encodeWritten(file, r.key, tv.key[len(tv.key)-1], fail)
				good = good && ok
			case r.key.node != nil && r.key.node.Kind != yaml.ScalarNode:
				fail(errorAt(file, at(r.key.node), r.key.path, "want a key written as text, got %s: a key in another form needs a key schema (schemas: {%s: {key: ...}})", describe(r.key.node), in.Topic))
				good = false
			}
			if good {
				b.writes = append(b.writes, iw)
			}
		}
	}
}

// formatName names a format in messages; "" is the default, json.
func formatName(f config.Format) config.Format {
	if f == "" {
		return config.FormatJSON
	}
	return f
}

// versionsPath is where the test file gives topic's schemas.
func versionsPath(list []*TopicSchemas, topic string) string {
	for _, ts := range list {
		if ts.Topic == topic {
			return ts.Path
		}
	}
	return "schemas"
}

// encodeWritten writes w with schema v. A string the schema does not
// take is its bytes (nil, true): a record that is not in the wire
// format. Any other value that does not fit is a problem at the place
// in the value the schema names.
func encodeWritten(file string, w written, v version, fail func(*config.Error)) (*framedBytes, bool) {
	body, err := v.w.Encode(w.js)
	if err == nil {
		return &framedBytes{reg: v.reg, body: body}, true
	}
	if w.text {
		return nil, true
	}
	elems, msg := schema.ValuePath(err)
	node, path := w.node, w.path
	pos := at(node)
	for _, e := range elems {
		next, keyNode := child(node, e)
		if node.Kind == yaml.SequenceNode {
			path = path + "[" + e + "]"
		} else {
			path = join(path, e)
		}
		if next == nil {
			break // a field missing: at the object that lacks it
		}
		node, pos = next, at(next)
		if keyNode != nil {
			pos = at(keyNode)
		}
	}
	fail(errorAt(file, pos, path, "%s (%s)", msg, v.spec.label()))
	return nil, false
}

// child is the node at elem in n (a mapping's entry, with its key, or a
// list's item), aliases followed; nil when n has none.
func child(n *yaml.Node, elem string) (value, key *yaml.Node) {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if n == nil {
		return nil, nil
	}
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			if k := n.Content[i]; k.Kind == yaml.ScalarNode && k.Value == elem {
				v := n.Content[i+1]
				for v.Kind == yaml.AliasNode && v.Alias != nil {
					v = v.Alias
				}
				return v, k
			}
		}
	case yaml.SequenceNode:
		if i, err := strconv.Atoi(elem); err == nil && i >= 0 && i < len(n.Content) {
			return n.Content[i], nil
		}
	}
	return nil, nil
}

// fakeRegistry is a run's schema registry: srfake served over HTTP on a
// loopback port.
type fakeRegistry struct {
	reg  *srfake.Registry
	srv  *http.Server
	url  string
	done chan struct{}
}

// startRegistry serves a new registry holding regs, registered in order,
// and returns it with their ids.
func startRegistry(regs []registration) (*fakeRegistry, []int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, fmt.Errorf("serving the test's schema registry: %w", err)
	}
	r := &fakeRegistry{reg: srfake.NewRegistry(), url: "http://" + ln.Addr().String(), done: make(chan struct{})}
	r.srv = &http.Server{Handler: r.reg.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		defer close(r.done)
		_ = r.srv.Serve(ln) // ErrServerClosed once Close is called
	}()
	ids := make([]int, len(regs))
	for i, g := range regs {
		if ids[i], _, err = r.reg.RegisterSchema(g.subject, g.schema); err != nil {
			r.Close()
			return nil, nil, fmt.Errorf("registering the schema of %s: %w", g.subject, err)
		}
	}
	return r, ids, nil
}

// Close stops serving and waits for the server to end.
func (r *fakeRegistry) Close() {
	_ = r.srv.Close()
	<-r.done
}

// readFramed replaces the values and keys of recs that are in the wire
// format, with an id the registry has, by what they read as: a string
// its text, anything else its JSON.
func readFramed(ctx context.Context, url string, recs map[string][]Record) error {
	reg, err := schema.NewRegistry(config.SchemaRegistry{URL: []string{url}, Timeout: 10 * time.Second}, slog.New(slog.DiscardHandler), nil)
	if err != nil {
		return err
	}
	read := func(b []byte) ([]byte, int, error) {
		if len(b) < 5 || b[0] != 0 {
			return b, 0, nil
		}
		js, v, ok, err := reg.JSON(ctx, b)
		if err != nil || !ok {
			return b, 0, err
		}
		id, _, _ := (&sr.ConfluentHeader{}).DecodeID(b)
		if s, isString := v.(string); isString {
			return []byte(s), id, nil
		}
		return js, id, nil
	}
	for _, list := range recs {
		for i := range list {
			r := &list[i]
			if r.Value, r.ValueSchema, err = read(r.Value); err != nil {
				return err
			}
			if r.Key, r.KeySchema, err = read(r.Key); err != nil {
				return err
			}
		}
	}
	return nil
}
