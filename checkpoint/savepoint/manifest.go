package savepoint

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/eoflow/pipeline/checkpoint"
	"github.com/eoflow/pipeline/state"
)

// Version is the newest savepoint format this build writes; it reads
// every version from 1 to it. A reader must keep reading every version
// ever written (testdata/v1 pins version 1, testdata/v2-held version 2).
// Version 2 is version 1 plus "held" (held.go), written only by a job
// whose joins as of event time held records at the checkpoint: every
// other savepoint is still version 1.
const Version = 2

// FormatName is the "format" field of every manifest: it tells a
// savepoint.json apart from any other JSON file.
const FormatName = "eoflow-pipeline-savepoint"

// The fixed file names of a savepoint directory.
const (
	// ManifestFile describes the savepoint (see Manifest).
	ManifestFile = "savepoint.json"
	// ChecksumFile holds the SHA-256 of ManifestFile in sha256sum's format,
	// so a flipped bit in an offset cannot go unnoticed and `sha256sum -c`
	// checks it too.
	ChecksumFile = ManifestFile + ".sha256"
)

// maxManifestSize bounds what Open reads into memory. A manifest grows
// with partitions and workers, by about a hundred bytes each.
const maxManifestSize = 64 << 20

// Kind is what an operator is. Only sources, aggregates and windows
// (KindWindow) have state; Descriptor also uses the step kinds of the
// configuration ("filter", "map", "key_by") to name what became of an id.
type Kind string

const (
	// KindSource: its state is the next offset of every partition it reads.
	KindSource Kind = "source"
	// KindAggregate: its state is one encoded AggregateState per group key,
	// split into key groups.
	KindAggregate Kind = "aggregate"
)

// Manifest is the content of savepoint.json: everything about a savepoint
// except the state entries themselves. Operators are sorted by id.
type Manifest struct {
	Format  string `json:"format"`  // FormatName
	Version int    `json:"version"` // Version
	Job     string `json:"job"`     // config name of the job it was taken from
	// Created is when the savepoint was taken (UTC). Informational.
	Created time.Time `json:"created"`
	// CheckpointID is the completed checkpoint whose state and offsets
	// the savepoint holds.
	CheckpointID checkpoint.ID `json:"checkpoint_id"`
	// ConfigFingerprint is config.Config.Fingerprint of the job then. A
	// different fingerprint alone does not stop a restore.
	ConfigFingerprint string `json:"config_fingerprint"`
	// KeyGroups is the job's key-group count; a restore needs the same.
	KeyGroups int `json:"key_groups"`
	// Guarantee is the job's delivery guarantee then. Informational.
	Guarantee string     `json:"guarantee"`
	Operators []Operator `json:"operators"`
	// EventTime (jobs with event time only) is where event time stood at
	// the checkpoint: the restore continues the watermarks from it.
	EventTime *EventTime `json:"event_time,omitempty"`
	// Tables (jobs with tables only) are where each table stood at the
	// checkpoint, sorted by id (tables.go).
	Tables []Table `json:"tables,omitempty"`
	// Held (version 2 only) are the stream records joins as of event time
	// held at the checkpoint: their file and how many each source
	// partition holds (held.go).
	Held *Held `json:"held,omitempty"`
}

// Operator is one stateful operator of the savepoint.
type Operator struct {
	ID   string `json:"id"`
	Kind Kind   `json:"kind"`
	// Offsets (sources only) are the next offsets to read, sorted by
	// topic then partition; each topic lists partitions 0..n-1.
	Offsets []Offset `json:"offsets,omitempty"`
	// Aggregate (aggregates only) says what the state means; a restore
	// compares it with the configuration.
	Aggregate *AggregateDesc `json:"aggregate,omitempty"`
	// Keys and Bytes (aggregates only) total the entries of Files: the
	// number of keys and the sum of their key and value lengths.
	Keys  uint64 `json:"keys,omitempty"`
	Bytes uint64 `json:"bytes,omitempty"`
	// Files (aggregates only) hold the entries, one per exported key-group
	// range, sorted by range; together the ranges cover every key group.
	Files []File `json:"files,omitempty"`
}

// Offset is the next offset to read from one partition, as the manifest
// holds it.
type Offset = checkpoint.SourceOffset

// AggregateDesc is what an aggregate's state means: a restore into an
// aggregate whose description differs is refused, because its state would
// be read as something it is not.
type AggregateDesc struct {
	// KeyBy is the text of the key_by expression that made the group keys.
	KeyBy string `json:"key_by"`
	// Window (windows only) is the shape of the windows the state holds.
	Window *WindowDesc `json:"window,omitempty"`
	// Values are the aggregate's values in configured order.
	Values []Value `json:"values"`
}

// Value is one named aggregate value, e.g. sum: sum(n).
type Value struct {
	Name string `json:"name"`
	Func string `json:"func"`
	Arg  string `json:"arg,omitempty"` // empty for count()
}

// String renders v as the config writes it: "sum(n)".
func (v Value) String() string { return v.Func + "(" + v.Arg + ")" }

// File is one data file of an aggregate: the entries of the key groups
// [KeyGroupStart, KeyGroupEnd), as one worker exported them.
type File struct {
	Name          string `json:"name"`
	KeyGroupStart int    `json:"key_group_start"`
	KeyGroupEnd   int    `json:"key_group_end"`
	Keys          uint64 `json:"keys"`
	Bytes         uint64 `json:"bytes"`
	Size          int64  `json:"size"`   // of the file, in bytes
	SHA256        string `json:"sha256"` // of the whole file, lowercase hex
}

// Range is the file's key-group range.
func (f File) Range() state.Range {
	return state.Range{Start: state.KeyGroup(f.KeyGroupStart), End: state.KeyGroup(f.KeyGroupEnd)}
}

// Operator returns the operator with id, or nil.
func (m *Manifest) Operator(id string) *Operator {
	i, ok := slices.BinarySearchFunc(m.Operators, id, func(o Operator, id string) int { return cmp.Compare(o.ID, id) })
	if !ok {
		return nil
	}
	return &m.Operators[i]
}

// Offsets returns the offsets of every source, sorted by topic then
// partition.
func (m *Manifest) Offsets() []checkpoint.SourceOffset {
	var out []checkpoint.SourceOffset
	for _, op := range m.Operators {
		out = append(out, op.Offsets...)
	}
	slices.SortFunc(out, checkpoint.CompareOffsets)
	return out
}

// Validate reports every way m is not a complete, well-formed manifest
// of its version.
// Open applies it to what it reads, Commit to what it writes.
func (m *Manifest) Validate() error {
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if m.Format != FormatName {
		fail("format %q: want %q", m.Format, FormatName)
	}
	if m.Version < 1 || m.Version > Version {
		fail("version %d: want 1 to %d", m.Version, Version)
	}
	if m.Job == "" {
		fail("job: required")
	}
	if m.Created.IsZero() {
		fail("created: required")
	}
	if m.CheckpointID == 0 {
		fail("checkpoint_id: must not be 0")
	}
	if err := state.CheckKeyGroups(m.KeyGroups); err != nil {
		fail("key_groups %d: must be in 1..%d", m.KeyGroups, state.MaxKeyGroups)
	}
	topics := map[string]string{} // topic -> source id
	files := map[string]string{}  // file name -> operator id
	for i, op := range m.Operators {
		at := fmt.Sprintf("operators[%d] %q", i, op.ID)
		if op.ID == "" {
			fail("operators[%d]: empty id", i)
		}
		if i > 0 && m.Operators[i-1].ID >= op.ID {
			fail("%s: not after %q (sorted by id, no duplicates)", at, m.Operators[i-1].ID)
		}
		switch op.Kind {
		case KindSource:
			if op.Aggregate != nil || op.Keys != 0 || op.Bytes != 0 || len(op.Files) > 0 {
				fail("%s: a source has offsets only, no aggregate, keys, bytes or files", at)
			}
			errs = append(errs, validateOffsets(at, op.ID, op.Offsets, topics)...)
		case KindAggregate, KindWindow:
			if len(op.Offsets) > 0 {
				fail("%s: %s has no offsets", at, kindPhrase(op.Kind))
			}
			errs = append(errs, validateAggregate(at, op.Aggregate)...)
			switch {
			case op.Kind == KindWindow && op.Aggregate != nil:
				errs = append(errs, validateWindow(at, op.Aggregate.Window)...)
			case op.Aggregate != nil && op.Aggregate.Window != nil:
				fail("%s: an aggregate has no window", at)
			}
			errs = append(errs, validateFiles(at, op, m.KeyGroups, files)...)
		default:
			fail("%s: unknown kind %q (this build knows %q, %q and %q)", at, op.Kind, KindSource, KindAggregate, KindWindow)
		}
	}
	errs = append(errs, validateEventTime(m.EventTime, m.Offsets())...)
	errs = append(errs, validateTables(m.Tables)...)
	errs = append(errs, validateHeld(m.Version, m.Held, m.Offsets())...)
	if m.Held != nil {
		if other, dup := files[m.Held.File]; dup {
			fail("held.file %q: name also used by operator %q", m.Held.File, other)
		}
	}
	return errors.Join(errs...)
}

func validateOffsets(at, id string, offsets []Offset, topics map[string]string) []error {
	var errs []error
	for j, o := range offsets {
		oat := fmt.Sprintf("%s: offsets[%d] %s/%d", at, j, o.Topic, o.Partition)
		if o.Topic == "" {
			errs = append(errs, fmt.Errorf("%s: empty topic", oat))
			continue
		}
		var prev *Offset
		if j > 0 {
			prev = &offsets[j-1]
		}
		if prev != nil && prev.Topic > o.Topic {
			errs = append(errs, fmt.Errorf("%s: not after topic %q (sorted by topic, then partition)", oat, prev.Topic))
			continue
		}
		// Partitions 0..n-1, in order: a gap would be a partition whose
		// position is lost, so a restore would re-read or skip it.
		want := int32(0)
		if prev != nil && prev.Topic == o.Topic {
			want = prev.Partition + 1
		} else {
			if other, dup := topics[o.Topic]; dup {
				errs = append(errs, fmt.Errorf("%s: topic listed again (also under source %q): each topic belongs to one source, once", oat, other))
			}
			topics[o.Topic] = id
		}
		if o.Partition != want {
			errs = append(errs, fmt.Errorf("%s: want partition %d (every partition 0..n-1 of a topic, in order)", oat, want))
		}
	}
	return errs
}

func validateAggregate(at string, a *AggregateDesc) []error {
	if a == nil {
		return []error{fmt.Errorf("%s: an aggregate needs its description (key_by, values)", at)}
	}
	var errs []error
	if a.KeyBy == "" {
		errs = append(errs, fmt.Errorf("%s: aggregate.key_by: required", at))
	}
	if len(a.Values) == 0 {
		errs = append(errs, fmt.Errorf("%s: aggregate.values: at least one is required", at))
	}
	seen := map[string]bool{}
	for k, v := range a.Values {
		if v.Name == "" || v.Func == "" {
			errs = append(errs, fmt.Errorf("%s: aggregate.values[%d]: name and func are required", at, k))
		}
		if seen[v.Name] {
			errs = append(errs, fmt.Errorf("%s: aggregate.values[%d]: name %q repeated", at, k, v.Name))
		}
		seen[v.Name] = true
	}
	return errs
}

func validateFiles(at string, op Operator, groups int, names map[string]string) []error {
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	var keys, size uint64
	next := 0 // the ranges must tile [0, groups) in order
	for j, f := range op.Files {
		fat := fmt.Sprintf("%s: files[%d] %q", at, j, f.Name)
		if err := checkFileName(f.Name); err != nil {
			fail("%s: %v", fat, err)
		} else if other, dup := names[f.Name]; dup {
			fail("%s: name also used by operator %q", fat, other)
		} else {
			names[f.Name] = op.ID
		}
		switch {
		case f.KeyGroupStart != next:
			fail("%s: key groups [%d,%d) do not start at %d (files must cover every key group once, in order)", fat, f.KeyGroupStart, f.KeyGroupEnd, next)
		case f.KeyGroupEnd <= f.KeyGroupStart || f.KeyGroupEnd > groups:
			fail("%s: key groups [%d,%d) empty or beyond %d", fat, f.KeyGroupStart, f.KeyGroupEnd, groups)
		default:
			next = f.KeyGroupEnd
		}
		if f.Size < int64(minDataFileSize) {
			fail("%s: size %d is smaller than an empty data file", fat, f.Size)
		}
		if b, err := hex.DecodeString(f.SHA256); err != nil || len(b) != sha256.Size || strings.ToLower(f.SHA256) != f.SHA256 {
			fail("%s: sha256 %q is not 64 lowercase hex digits", fat, f.SHA256)
		}
		keys += f.Keys
		size += f.Bytes
	}
	if next != groups && len(errs) == 0 {
		fail("%s: files cover key groups [0,%d), not all %d: a worker's export is missing", at, next, groups)
	}
	if keys != op.Keys || size != op.Bytes {
		fail("%s: %d keys, %d bytes, but its files add up to %d keys, %d bytes", at, op.Keys, op.Bytes, keys, size)
	}
	return errs
}

// checkFileName accepts a plain file name: a manifest must not point
// outside its directory, whoever wrote it.
func checkFileName(name string) error {
	switch {
	case name == "":
		return errors.New("empty file name")
	case !filepath.IsLocal(name), strings.ContainsAny(name, `/\:`), strings.HasPrefix(name, "."):
		return errors.New("not a plain file name inside the savepoint directory")
	case name == ManifestFile, name == ChecksumFile:
		return errors.New("reserved file name")
	}
	return nil
}

// encodeManifest is the exact savepoint.json bytes for m: indented JSON
// (people read it) with a final newline, and without HTML escaping, so a
// key_by of `a > 1 && b` reads as written. encoding/json writes struct
// fields in declaration order, so one manifest has one encoding.
func encodeManifest(m *Manifest) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(m); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// checksumLine is savepoint.json.sha256: "<hex>  savepoint.json\n", the
// line sha256sum prints.
func checksumLine(manifest []byte) []byte {
	sum := sha256.Sum256(manifest)
	return []byte(hex.EncodeToString(sum[:]) + "  " + ManifestFile + "\n")
}

// decodeManifest parses savepoint.json of dir, after its checksum was
// verified.
// It reads the version first, so a newer format gets ErrUnknownVersion
// instead of an error about some field it added.
func decodeManifest(b []byte, dir string) (*Manifest, error) {
	var head struct {
		Format  string `json:"format"`
		Version int    `json:"version"`
	}
	if err := json.Unmarshal(b, &head); err != nil {
		return nil, corruptf("%s: %v", ManifestFile, err)
	}
	if head.Format != FormatName {
		return nil, fmt.Errorf("%w: %s has format %q, want %q", ErrNotSavepoint, filepath.Join(dir, ManifestFile), head.Format, FormatName)
	}
	if head.Version < 1 || head.Version > Version {
		return nil, fmt.Errorf("%w %d: this build reads versions 1 to %d; the savepoint was written by a newer pipeline", ErrUnknownVersion, head.Version, Version)
	}
	// Strict: an unknown field is damage, not an extension (extensions
	// bump the version).
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	m := &Manifest{}
	if err := dec.Decode(m); err != nil {
		return nil, corruptf("%s: %v", ManifestFile, err)
	}
	if rest := bytes.TrimSpace(b[dec.InputOffset():]); len(rest) > 0 {
		return nil, corruptf("%s: %d bytes after the manifest object", ManifestFile, len(rest))
	}
	if err := m.Validate(); err != nil {
		return nil, corruptf("%s: %v", ManifestFile, err)
	}
	return m, nil
}
