package jobtest

import (
	"os"
	"path/filepath"
	"slices"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/eoflow/pipeline/config"
)

// File is a test file: the cases to run against one job.
type File struct {
	// Path is the file's name as given (it labels every message).
	Path string
	// Job is the job file `job:` names, relative to the test file's
	// directory resolved against the working directory; "" when the file
	// names none (then -c must).
	Job string
	// Env holds the variables the job file's ${VAR}s read, before each
	// case's own.
	Env map[string]string
	// Schemas are the schemas records are written with, by topic, before
	// each case's own.
	Schemas []*TopicSchemas
	// Cases in the order written.
	Cases []*Case
}

// Case is one run of the job: the input it is given and what it must
// commit.
type Case struct {
	Name string
	At   Pos
	// Path is the case's place in the file, "cases[2]", for messages.
	Path string
	// Env is the file's variables with the case's over them.
	Env map[string]string
	// Schemas are the file's, with the case's over them (topic by
	// topic).
	Schemas []*TopicSchemas
	// Input is what is written to each source topic before the job
	// starts, topic by topic in the order written.
	Input []*TopicInput
	// Expect is what the job must have committed, per listed topic, in
	// the order written.
	Expect []*TopicExpect
	// Compare is the rule of every topic that CompareTopic does not name
	// (compare: RULE, or compare: {default: RULE, TOPIC: RULE, ...}).
	Compare      Rule
	CompareTopic map[string]Rule
	// CompareAt is where each topic of CompareTopic was named.
	CompareAt map[string]Pos
}

// RuleFor is the rule that compares topic (a sink topic, or
// dead_letters or late).
func (c *Case) RuleFor(topic string) Rule {
	if r, ok := c.CompareTopic[topic]; ok {
		return r
	}
	return c.Compare
}

// Pos is a 1-based line and column in a test file.
type Pos struct{ Line, Col int }

// TopicInput is the records of one input topic.
type TopicInput struct {
	Topic   string
	At      Pos
	Path    string
	Records []*InputRecord
}

// InputRecord is one record to write.
type InputRecord struct {
	At Pos
	// Key is nil for a record without a key.
	Key []byte
	// Value is nil for a null value (a tombstone).
	Value []byte
	// Partition is the partition to write to (0 unless given).
	Partition int32
	// Timestamp is zero when not given: the record then carries the time
	// it is written, as a producer would set it.
	Timestamp time.Time
	Headers   []Header
	// SchemaVersion picks the version of the topic's value schema the
	// value is written with: 1 is the first listed; 0, the last.
	SchemaVersion   int
	SchemaVersionAt Pos
	// value and key as written, for a topic whose values or keys are
	// written with a schema (then Value and Key are only what is written
	// where no schema applies).
	value, key written
}

// written is a record's value or key as the test file writes it.
type written struct {
	node *yaml.Node
	path string
	// js is its JSON (a string's included); nil for null.
	js []byte
	// text: written as a string, which is its bytes where the schema
	// does not take it; binary: !!binary, bytes as they are, never
	// encoded.
	text, binary bool
}

// TopicSchemas are the schemas of one topic's records: the versions of
// its values' schema, registered in order under <topic>-value (the i-th
// is version i), and of its keys', under <topic>-key. A topic the job
// writes may be given one too (for a sink that looks its schema up).
type TopicSchemas struct {
	Topic string
	At    Pos
	Path  string
	Value []*SchemaSpec
	Key   []*SchemaSpec
}

// SchemaSpec is one schema as the test file gives it: a file, or the
// text itself.
type SchemaSpec struct {
	At   Pos
	Path string
	// Format is avro, protobuf or json_schema; "" is the job's format
	// for the topic's values (or keys).
	Format config.Format
	// File is the schema's file (ReadFile resolves it against the test
	// file's directory); Text is the schema written inline.
	File, Text string
	// Message names the Protobuf message the records are ("": the
	// file's first).
	Message string
}

// Header is a record header; a nil Value is a null one.
type Header struct {
	Key   string
	Value []byte
}

// TopicExpect is what one listed topic must hold.
type TopicExpect struct {
	// Name is as written: a sink topic, dead_letters, late, or a
	// dead-letter or late topic by its name.
	Name    string
	At      Pos
	Path    string
	Records []*Expected
}

// Expected is one record a topic must hold. Key and Value are always
// compared; the rest only when given.
type Expected struct {
	// Where names it in a diff: "test.yaml:14:9", or for a crash run's
	// comparison, the crash-free run's record.
	Where string
	At    Pos
	// Key is nil for "no key".
	Key   []byte
	Value Value
	// Partition, Timestamp: compared when HasPartition, HasTimestamp.
	Partition    int32
	HasPartition bool
	Timestamp    time.Time
	HasTimestamp bool
	// Headers the record must carry, among others it may have.
	Headers []Header
	// CodeAt is where `code:` was written (Line 0: it was not); the code
	// itself is among Headers, as sink.HeaderCode.
	CodeAt Pos
}

// Rule is how a topic's written records are compared with the expected
// ones.
type Rule string

// The comparison rules.
const (
	// PerKey: for each record key, the records in the order written;
	// across keys any order (Kafka orders the records of one key: they
	// are in one partition). Records without a key are one sequence,
	// ordered only when the topic has one partition.
	PerKey Rule = "per_key"
	// Exact: one ordered list per partition (partition 0 unless an
	// expected record names another).
	Exact Rule = "exact"
	// Unordered: the same records, in any order.
	Unordered Rule = "unordered"
	// LastPerKey: a table: the last value written for each key.
	LastPerKey Rule = "last_per_key"
)

var rules = []string{string(PerKey), string(Exact), string(Unordered), string(LastPerKey)}

// ReadFile reads and parses the test file at path. Problems in its content
// are config.Errors, each at its line and column; a file that cannot be
// read is an error naming the path.
func ReadFile(path string) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	f, err := Parse(path, data)
	if err != nil {
		return nil, err
	}
	if f.Job != "" && !filepath.IsAbs(f.Job) {
		f.Job = filepath.Join(filepath.Dir(path), f.Job)
	}
	// A schema file is relative to the test file too; the cases share
	// the file's specs, so each is resolved once.
	resolved := map[*SchemaSpec]bool{}
	for _, list := range append([][]*TopicSchemas{f.Schemas}, caseSchemas(f)...) {
		for _, ts := range list {
			for _, spec := range append(slices.Clone(ts.Value), ts.Key...) {
				if !resolved[spec] && spec.File != "" && !filepath.IsAbs(spec.File) {
					spec.File = filepath.Join(filepath.Dir(path), spec.File)
				}
				resolved[spec] = true
			}
		}
	}
	return f, nil
}

func caseSchemas(f *File) [][]*TopicSchemas {
	var out [][]*TopicSchemas
	for _, c := range f.Cases {
		out = append(out, c.Schemas)
	}
	return out
}

// errorAt is a problem at p of file.
func errorAt(file string, p Pos, path, format string, args ...any) *config.Error {
	e := &config.Error{File: file, Line: p.Line, Col: p.Col, Path: path}
	e.Msg = sprintf(format, args...)
	return e
}
