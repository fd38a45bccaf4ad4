package savepoint

import (
	"bufio"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"iter"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/eoflow/pipeline/checkpoint"
	"github.com/eoflow/pipeline/state"
)

// Meta is what a savepoint says about the job it was taken from.
type Meta struct {
	Job          string
	CheckpointID checkpoint.ID // the completed checkpoint it holds
	Created      time.Time     // stored in UTC
	// ConfigFingerprint is config.Config.Fingerprint.
	ConfigFingerprint string
	KeyGroups         int
	Guarantee         string
}

// Options tune a Writer. The zero value is ready to use.
type Options struct {
	// Progress, if set, is called with the running totals each time they
	// pass another ProgressEntries entries or ProgressBytes bytes, and once
	// more by Commit. Calls never overlap (the Writer holds its lock, so
	// Progress must not call the Writer), but they come from whichever
	// goroutine wrote the block: keep it short, log a line, set a gauge.
	Progress func(Progress)
	// ProgressEntries is the entry step between Progress calls.
	// Default 1,000,000.
	ProgressEntries int64
	// ProgressBytes is the step in key and value bytes. Default 256 MiB.
	ProgressBytes int64
}

// Progress is how far a Writer (or Reader.Verify) has got.
type Progress struct {
	Entries int64 // keys written (read) so far, all operators
	Bytes   int64 // their key and value bytes
	Files   int   // data files completed
}

func (p Progress) String() string {
	return fmt.Sprintf("savepoint: %d keys, %s, %d data files complete", p.Entries, humanBytes(p.Bytes), p.Files)
}

// Writer writes one savepoint directory atomically: everything goes to a
// temporary sibling DIR.tmp-* until Commit renames it to DIR, so DIR
// either does not exist or holds a complete savepoint. Declare the sources
// (Source) and aggregates (Aggregate); write each aggregate's state as one
// or more parts, one per key-group range (OperatorWriter.Part), possibly
// from several goroutines at once; then Commit, or Abort.
//
// The methods of Writer and OperatorWriter are safe for concurrent use;
// each PartWriter belongs to one goroutine.
type Writer struct {
	dir, tmp string
	meta     Meta
	opts     Options
	// blockSize is the data block target (a field so tests can make
	// files of many blocks from few entries).
	blockSize int

	mu struct {
		sync.Mutex
		ops map[string]*opState
		// eventTime is the checkpoint's (SetEventTime), nil: none.
		eventTime *EventTime
		// tables are the checkpoint's (SetTables), nil: none.
		tables []Table
		// held are the checkpoint's held records (SetHeld), nil: none.
		held     *Held
		open     int   // parts created, not closed
		failed   error // the first part that failed; Commit refuses
		done     bool  // committed or aborted
		progress Progress
		// next* are the totals at which Progress is called next.
		nextEntries, nextBytes int64
	}
}

// opState is one declared operator.
type opState struct {
	kind    Kind
	offsets []Offset
	agg     AggregateDesc
	files   []File
	ranges  []state.Range // of the parts created, to refuse overlaps
}

// Create starts a savepoint that Commit will place at dir. dir must not
// exist, or be an empty directory; its parent is created if needed.
func Create(dir string, meta Meta, opts Options) (*Writer, error) {
	dir = filepath.Clean(dir)
	var errs []error
	if meta.Job == "" {
		errs = append(errs, errors.New("job: required"))
	}
	if meta.CheckpointID == 0 {
		errs = append(errs, errors.New("checkpoint id: must not be 0 (a savepoint holds a completed checkpoint)"))
	}
	if meta.Created.IsZero() {
		errs = append(errs, errors.New("created: required"))
	}
	if err := state.CheckKeyGroups(meta.KeyGroups); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("create savepoint %s: %w", dir, err)
	}
	if err := CheckTarget(dir); err != nil {
		return nil, err
	}
	parent := filepath.Dir(dir)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return nil, fmt.Errorf("create savepoint %s: %w", dir, err)
	}
	// MkdirTemp makes the directory 0700: a savepoint holds the job's
	// state, which may be private; its owner can widen it.
	tmp, err := os.MkdirTemp(parent, filepath.Base(dir)+".tmp-")
	if err != nil {
		return nil, fmt.Errorf("create savepoint %s: %w", dir, err)
	}
	meta.Created = meta.Created.UTC()
	w := &Writer{dir: dir, tmp: tmp, meta: meta, opts: opts, blockSize: defaultBlockSize}
	if w.opts.ProgressEntries <= 0 {
		w.opts.ProgressEntries = 1_000_000
	}
	if w.opts.ProgressBytes <= 0 {
		w.opts.ProgressBytes = 256 << 20
	}
	w.mu.ops = map[string]*opState{}
	w.mu.nextEntries, w.mu.nextBytes = w.opts.ProgressEntries, w.opts.ProgressBytes
	return w, nil
}

// CheckTarget reports whether a savepoint can be created at dir: it must
// not exist, or be an empty directory (else ErrExists). Create checks it
// too; `run --stop-with-savepoint DIR` should check it at start, not
// after hours of running.
func CheckTarget(dir string) error {
	dir = filepath.Clean(dir)
	f, err := os.Open(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("create savepoint %s: %w", dir, err)
	}
	defer f.Close()
	names, err := f.Readdirnames(1)
	if err == io.EOF {
		return nil // an empty directory
	}
	if err != nil {
		return fmt.Errorf("%w: %s is not a directory that can take a savepoint: %v", ErrExists, dir, err)
	}
	return fmt.Errorf("%w: %s holds %q: choose a new path (savepoints are never overwritten)", ErrExists, dir, names[0])
}

// Dir is where Commit places the savepoint.
func (w *Writer) Dir() string { return w.dir }

// Source records the offsets of the source operator id: the next offset
// of every partition of its topics, as checkpoint CheckpointID recorded
// them (Descriptor.SourceOffsets groups a checkpoint's offsets by
// source). Every partition 0..n-1 of each topic must be there.
func (w *Writer) Source(id string, offsets []checkpoint.SourceOffset) error {
	offs := slices.Clone(offsets)
	slices.SortFunc(offs, checkpoint.CompareOffsets)
	if err := errors.Join(validateOffsets(fmt.Sprintf("source %q", id), id, offs, map[string]string{})...); err != nil {
		return fmt.Errorf("savepoint %s: %w", w.dir, err)
	}
	return w.declare(id, &opState{kind: KindSource, offsets: offs})
}

// Aggregate declares the aggregate id, whose state means desc (see
// DescribeConfig), and returns the writer of its parts. A desc with a
// Window declares a window operator (KindWindow): its state is written
// the same way.
func (w *Writer) Aggregate(id string, desc AggregateDesc) (*OperatorWriter, error) {
	desc.Values = slices.Clone(desc.Values)
	kind, errs := KindAggregate, validateAggregate(fmt.Sprintf("aggregate %q", id), &desc)
	if desc.Window != nil {
		kind = KindWindow
		win := *desc.Window
		desc.Window = &win
		errs = append(errs, validateWindow(fmt.Sprintf("window %q", id), desc.Window)...)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("savepoint %s: %w", w.dir, err)
	}
	if err := w.declare(id, &opState{kind: kind, agg: desc}); err != nil {
		return nil, err
	}
	return &OperatorWriter{w: w, id: id}, nil
}

func (w *Writer) declare(id string, op *opState) error {
	if id == "" {
		return fmt.Errorf("savepoint %s: empty operator id", w.dir)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.mu.done {
		return fmt.Errorf("savepoint %s: already committed or aborted", w.dir)
	}
	if _, dup := w.mu.ops[id]; dup {
		return fmt.Errorf("savepoint %s: operator %q declared twice", w.dir, id)
	}
	w.mu.ops[id] = op
	return nil
}

// OperatorWriter writes the state of one aggregate.
type OperatorWriter struct {
	w  *Writer
	id string
}

// Part starts the data file of the key groups rng: typically one worker's
// state.Store.Range, exported with Store.All at the savepoint's barrier.
// The parts of an operator must not overlap and, by Commit, must cover
// every key group. Parts may be written concurrently, each by one
// goroutine. An empty rng (more workers than key groups) gives a part
// that accepts no entries and writes no file.
func (o *OperatorWriter) Part(rng state.Range) (*PartWriter, error) {
	w := o.w
	if rng.Start > rng.End || int(rng.End) > w.meta.KeyGroups {
		return nil, fmt.Errorf("savepoint %s: operator %q: key-group range %v does not fit %d key groups", w.dir, o.id, rng, w.meta.KeyGroups)
	}
	p := &PartWriter{w: w, op: o.id, rng: rng}
	if rng.Len() == 0 {
		p.closed = true
		return p, nil
	}
	name := dataFileName(o.id, rng)
	if err := w.startPart(o.id, rng); err != nil {
		return nil, err
	}

	f, err := os.OpenFile(filepath.Join(w.tmp, name), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		err = p.fail(err)
		w.partDone(p, File{}, err)
		return nil, err
	}
	p.f, p.name, p.hash = f, name, sha256.New()
	p.bw = bufio.NewWriterSize(io.MultiWriter(f, p.hash, &p.size), 256<<10)
	enc, err := newDataEncoder(p.bw, dataHeader{Operator: o.id, KeyGroups: w.meta.KeyGroups, Range: rng}, w.blockSize)
	if err != nil {
		f.Close()
		err = p.fail(err)
		w.partDone(p, File{}, err)
		return nil, err
	}
	enc.onBlock = func(n int, b uint64) { w.progress(int64(n), int64(b), 0) }
	p.enc = enc
	return p, nil
}

// startPart registers the part rng of operator id, refusing overlaps.
func (w *Writer) startPart(id string, rng state.Range) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.mu.done {
		return fmt.Errorf("savepoint %s: already committed or aborted", w.dir)
	}
	op := w.mu.ops[id]
	for _, r := range op.ranges {
		if r.Start < rng.End && rng.Start < r.End {
			return fmt.Errorf("savepoint %s: operator %q: part %v overlaps part %v", w.dir, id, rng, r)
		}
	}
	op.ranges = append(op.ranges, rng)
	w.mu.open++
	return nil
}

// WriteAll writes entries (e.g. store.All()) as the part rng: Part, Add
// of each entry, Close.
func (o *OperatorWriter) WriteAll(rng state.Range, entries iter.Seq[state.Entry]) error {
	p, err := o.Part(rng)
	if err != nil {
		return err
	}
	if err := p.AddAll(entries); err != nil {
		p.Close()
		return err
	}
	return p.Close()
}

// PartWriter streams one key-group range of an aggregate's state into its
// data file. Entries are copied into a block buffer: the caller may reuse
// their slices at once, and only a block (~64 KiB) is held at a time.
type PartWriter struct {
	w    *Writer
	op   string
	rng  state.Range
	name string

	f    *os.File
	hash hash.Hash
	size countWriter
	bw   *bufio.Writer
	enc  *dataEncoder

	err    error
	closed bool
}

// Add writes one entry. Entries must come in key-group then key order,
// each key once, in the part's range and in the key group its key hashes
// to, with a non-nil value: exactly what state.Store.All yields. An
// invalid entry (ErrInvalidEntry) or a write error fails the part, and
// Commit will refuse the savepoint.
func (p *PartWriter) Add(e state.Entry) error {
	if p.err != nil {
		return p.err
	}
	if p.closed {
		if p.rng.Len() == 0 {
			return fmt.Errorf("%w: operator %q: key group %d is not in the empty part %v", ErrInvalidEntry, p.op, e.Group, p.rng)
		}
		return fmt.Errorf("operator %q part %v: Add after Close", p.op, p.rng)
	}
	if e.Deleted {
		return p.fail(fmt.Errorf("%w: operator %q, key %q: a tombstone; a savepoint holds live values only", ErrInvalidEntry, p.op, e.Key))
	}
	if err := p.enc.add(e.Group, e.Key, e.Value); err != nil {
		return p.fail(err)
	}
	return nil
}

// AddAll adds every entry of seq, stopping at the first error.
func (p *PartWriter) AddAll(seq iter.Seq[state.Entry]) error {
	for e := range seq {
		if err := p.Add(e); err != nil {
			return err
		}
	}
	return nil
}

// fail records err as the part's (and the savepoint's) failure.
func (p *PartWriter) fail(err error) error {
	p.err = fmt.Errorf("operator %q part %v: %w", p.op, p.rng, err)
	return p.err
}

// Close finishes the data file (trailer, flush, fsync) and records it for
// the manifest. It must be called, after an error too: Commit waits for
// every part to be closed.
func (p *PartWriter) Close() error {
	if p.closed {
		return p.err
	}
	p.closed = true
	if p.err == nil {
		if err := p.enc.finish(); err != nil {
			p.fail(err)
		} else if err := p.bw.Flush(); err != nil {
			p.fail(err)
		} else if err := p.f.Sync(); err != nil {
			p.fail(err)
		}
	}
	if err := p.f.Close(); err != nil && p.err == nil {
		p.fail(err)
	}
	file := File{
		Name: p.name, KeyGroupStart: int(p.rng.Start), KeyGroupEnd: int(p.rng.End),
		Keys: p.enc.entries, Bytes: p.enc.bytes, Size: int64(p.size),
		SHA256: hex.EncodeToString(p.hash.Sum(nil)),
	}
	if err := p.w.partDone(p, file, p.err); err != nil && p.err == nil {
		p.err = err
	}
	return p.err
}

// partDone records a closed part (or its failure).
func (w *Writer) partDone(p *PartWriter, f File, failed error) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.mu.open--
	switch {
	case w.mu.done:
		return fmt.Errorf("operator %q part %v: the savepoint %s was aborted", p.op, p.rng, w.dir)
	case failed != nil:
		if w.mu.failed == nil {
			w.mu.failed = failed
		}
		return nil
	}
	op := w.mu.ops[p.op]
	op.files = append(op.files, f)
	w.progressLocked(0, 0, 1)
	return nil
}

func (w *Writer) progress(entries, bytes int64, files int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.progressLocked(entries, bytes, files)
}

func (w *Writer) progressLocked(entries, bytes int64, files int) {
	p := &w.mu.progress
	p.Entries += entries
	p.Bytes += bytes
	p.Files += files
	if p.Entries < w.mu.nextEntries && p.Bytes < w.mu.nextBytes {
		return
	}
	for w.mu.nextEntries <= p.Entries {
		w.mu.nextEntries += w.opts.ProgressEntries
	}
	for w.mu.nextBytes <= p.Bytes {
		w.mu.nextBytes += w.opts.ProgressBytes
	}
	if w.opts.Progress != nil {
		w.opts.Progress(*p)
	}
}

// Commit writes the manifest and makes the savepoint visible at Dir, all
// or nothing: the manifest, its checksum and every data file are fsynced,
// then the temporary directory is renamed to Dir and the parent fsynced.
// It refuses if a part failed or is still open, or if an aggregate's parts
// do not cover every key group (a worker's export is missing). It returns
// the manifest written. After an error, call Abort.
func (w *Writer) Commit() (*Manifest, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case w.mu.done:
		return nil, fmt.Errorf("savepoint %s: already committed or aborted", w.dir)
	case w.mu.failed != nil:
		return nil, fmt.Errorf("savepoint %s not written: %w", w.dir, w.mu.failed)
	case w.mu.open > 0:
		return nil, fmt.Errorf("savepoint %s not written: %d data files are still open: close every part first", w.dir, w.mu.open)
	}
	m := w.manifestLocked()
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("savepoint %s not written: %w", w.dir, err)
	}
	b, err := encodeManifest(m)
	if err != nil {
		return nil, fmt.Errorf("savepoint %s: %w", w.dir, err)
	}
	if err := writeSynced(filepath.Join(w.tmp, ManifestFile), b); err != nil {
		return nil, fmt.Errorf("savepoint %s: %w", w.dir, err)
	}
	if err := writeSynced(filepath.Join(w.tmp, ChecksumFile), checksumLine(b)); err != nil {
		return nil, fmt.Errorf("savepoint %s: %w", w.dir, err)
	}
	if err := syncDir(w.tmp); err != nil {
		return nil, fmt.Errorf("savepoint %s: %w", w.dir, err)
	}
	if err := w.place(); err != nil {
		return nil, err
	}
	w.mu.done = true
	if w.opts.Progress != nil {
		w.opts.Progress(w.mu.progress)
	}
	return m, nil
}

// place renames the temporary directory to Dir.
func (w *Writer) place() error {
	// rename(2) may replace an empty directory, but not everywhere
	// (Windows); removing it first behaves the same on every system, and
	// os.Remove refuses a directory that is not empty (any more).
	if err := os.Remove(w.dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		if err := CheckTarget(w.dir); err != nil {
			return err
		}
		return fmt.Errorf("savepoint %s: %w", w.dir, err)
	}
	if err := os.Rename(w.tmp, w.dir); err != nil {
		if err := CheckTarget(w.dir); err != nil {
			return err
		}
		return fmt.Errorf("savepoint %s: %w", w.dir, err)
	}
	if err := syncDir(filepath.Dir(w.dir)); err != nil {
		// The savepoint is complete at Dir but may not survive a power
		// loss: say so rather than report success.
		return fmt.Errorf("savepoint %s written, but its directory entry is not durable: %w", w.dir, err)
	}
	return nil
}

// manifestLocked builds the manifest of everything declared and written.
func (w *Writer) manifestLocked() *Manifest {
	m := &Manifest{
		Format: FormatName, Version: 1,
		Job: w.meta.Job, Created: w.meta.Created, CheckpointID: w.meta.CheckpointID,
		ConfigFingerprint: w.meta.ConfigFingerprint, KeyGroups: w.meta.KeyGroups, Guarantee: w.meta.Guarantee,
		Operators: []Operator{}, EventTime: w.mu.eventTime, Tables: w.mu.tables,
	}
	if w.mu.held != nil {
		m.Version, m.Held = 2, w.mu.held
	}
	for id, st := range w.mu.ops {
		op := Operator{ID: id, Kind: st.kind}
		switch st.kind {
		case KindSource:
			op.Offsets = st.offsets
		case KindAggregate, KindWindow:
			agg := st.agg
			op.Aggregate = &agg
			op.Files = slices.SortedFunc(slices.Values(st.files), func(a, b File) int { return cmp.Compare(a.KeyGroupStart, b.KeyGroupStart) })
			for _, f := range op.Files {
				op.Keys += f.Keys
				op.Bytes += f.Bytes
			}
		}
		m.Operators = append(m.Operators, op)
	}
	slices.SortFunc(m.Operators, func(a, b Operator) int { return cmp.Compare(a.ID, b.ID) })
	return m
}

// Abort discards the savepoint: it removes the temporary directory. It is
// safe to call at any time and more than once, and does nothing after a
// successful Commit, so `defer w.Abort()` is the usual pattern.
func (w *Writer) Abort() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.mu.done {
		return nil
	}
	w.mu.done = true
	if err := os.RemoveAll(w.tmp); err != nil {
		return fmt.Errorf("savepoint %s: removing %s: %w", w.dir, w.tmp, err)
	}
	return nil
}

// dataFileName names the data file of operator id's key groups rng:
// "<id, filename-safe>-<8 hex of SHA-256(id)>.g<first>-<last>.state". The
// hash keeps two ids that look alike once made safe (or differ only in
// case, on a case-insensitive file system) apart; the readable part is for
// people listing the directory. Readers take names from the manifest and
// never parse them.
func dataFileName(id string, rng state.Range) string {
	var b strings.Builder
	for _, r := range id {
		if b.Len() >= 40 {
			break
		}
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_':
			b.WriteRune(r)
		case r == '.' && b.Len() > 0:
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	sum := sha256.Sum256([]byte(id))
	return b.String() + "-" + hex.EncodeToString(sum[:4]) +
		".g" + strconv.Itoa(int(rng.Start)) + "-" + strconv.Itoa(int(rng.End)-1) + ".state"
}

// writeSynced creates name (which must not exist) with data, fsynced.
func writeSynced(name string, data []byte) error {
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// syncDir fsyncs a directory, so the entries created or renamed in it
// survive a crash. Windows cannot sync a directory (and needs not).
func syncDir(dir string) error {
	if runtime.GOOS == "windows" {
		return nil
	}
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// countWriter counts the bytes written through it.
type countWriter int64

func (c *countWriter) Write(b []byte) (int, error) {
	*c += countWriter(len(b))
	return len(b), nil
}

// humanBytes renders n as people read sizes: "812 B", "96.3 MiB".
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 4; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTP"[exp])
}
