package savepoint

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/eoflow/pipeline/state"
)

// Reader reads a savepoint directory. Open verifies the manifest (its
// SHA-256, its structure) and that every data file is there with the size
// the manifest records; Scan, Restore and Verify verify each data file
// they read completely: header, every block's CRC-32C, the trailer, the
// totals and the file's SHA-256.
//
// A Reader holds no open files and is safe for concurrent use: each
// worker of a restoring job may Scan its own key groups at once.
type Reader struct {
	dir string
	id  string
	m   *Manifest
}

// Entry is one key of an aggregate's state in a savepoint. Key and Value
// are only valid during the callback that receives them; Value is never
// nil (a savepoint holds no tombstones) but may be empty.
type Entry struct {
	Operator string
	Group    state.KeyGroup
	Key      []byte
	Value    []byte
}

// ChangelogRecord returns the entry as a state-topic record, its key
// appended to buf (pass buf[:0] of the previous call to reuse it). The
// value is e.Value itself.
func (e Entry) ChangelogRecord(buf []byte) state.ChangelogRecord {
	return state.ChangelogRecord{
		Key:   state.ChangelogKey{Operator: e.Operator, Group: e.Group, Key: e.Key}.Append(buf),
		Value: e.Value,
	}
}

// RecordAdder takes state-topic records: *state.Restorer is one.
type RecordAdder interface {
	Add(state.ChangelogRecord) error
}

var _ RecordAdder = (*state.Restorer)(nil)

// Open reads and verifies the manifest of the savepoint at dir.
func Open(dir string) (*Reader, error) {
	dir = filepath.Clean(dir)
	r, err := open(dir)
	if err != nil {
		return nil, wrapErr(dir, err)
	}
	return r, nil
}

// wrapErr says which savepoint an error is about, and that it is corrupt
// when it is.
func wrapErr(dir string, err error) error {
	switch {
	case errors.Is(err, ErrNotSavepoint):
		return err // these name the directory already
	case errors.Is(err, ErrCorrupt):
		return fmt.Errorf("savepoint %s is corrupt: %w", dir, err)
	}
	return fmt.Errorf("savepoint %s: %w", dir, err)
}

func open(dir string) (*Reader, error) {
	info, err := os.Stat(dir)
	if err != nil {
		return nil, err
	}
	if !info.IsDir() {
		return nil, fmt.Errorf("%w: %s is a file; a savepoint is a directory holding %s", ErrNotSavepoint, dir, ManifestFile)
	}
	manifest, err := readLimited(filepath.Join(dir, ManifestFile), maxManifestSize)
	if errors.Is(err, os.ErrNotExist) {
		hint := ""
		if strings.Contains(filepath.Base(dir), ".tmp-") {
			hint = " (a .tmp- directory is a savepoint that was never committed; delete it)"
		}
		return nil, fmt.Errorf("%w: %s has no %s%s", ErrNotSavepoint, dir, ManifestFile, hint)
	}
	if err != nil {
		return nil, err
	}
	sum, err := readLimited(filepath.Join(dir, ChecksumFile), 4096)
	if errors.Is(err, os.ErrNotExist) {
		return nil, corruptf("%s is missing, so the manifest cannot be verified", ChecksumFile)
	}
	if err != nil {
		return nil, err
	}
	if want := checksumLine(manifest); !bytes.Equal(sum, want) {
		got := strings.TrimSpace(string(sum))
		if f := strings.Fields(got); len(f) == 2 && f[1] == ManifestFile && len(f[0]) == 2*sha256.Size {
			return nil, corruptf("SHA-256 of %s is %s, %s says %s: the manifest was changed or damaged",
				ManifestFile, want[:2*sha256.Size], ChecksumFile, f[0])
		}
		return nil, corruptf("%s is malformed: want %q", ChecksumFile, strings.TrimSpace(string(want)))
	}
	m, err := decodeManifest(manifest, dir)
	if err != nil {
		return nil, err
	}
	// Catch a missing or cut file now, before a restore has started.
	var errs []error
	for _, op := range m.Operators {
		for _, f := range op.Files {
			info, err := os.Stat(filepath.Join(dir, f.Name))
			switch {
			case errors.Is(err, os.ErrNotExist):
				errs = append(errs, corruptf("data file %s of operator %q (key groups %v) is missing", f.Name, op.ID, f.Range()))
			case err != nil:
				errs = append(errs, err)
			case !info.Mode().IsRegular():
				errs = append(errs, corruptf("data file %s of operator %q is not a regular file", f.Name, op.ID))
			case info.Size() != f.Size:
				errs = append(errs, corruptf("data file %s of operator %q is %d bytes, the manifest says %d: truncated or damaged", f.Name, op.ID, info.Size(), f.Size))
			}
		}
	}
	if h := m.Held; h != nil {
		info, err := os.Stat(filepath.Join(dir, h.File))
		switch {
		case errors.Is(err, os.ErrNotExist):
			errs = append(errs, corruptf("held records file %s is missing", h.File))
		case err != nil:
			errs = append(errs, err)
		case !info.Mode().IsRegular():
			errs = append(errs, corruptf("held records file %s is not a regular file", h.File))
		case info.Size() != h.Size:
			errs = append(errs, corruptf("held records file %s is %d bytes, the manifest says %d: truncated or damaged", h.File, info.Size(), h.Size))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	idSum := sha256.Sum256(manifest)
	return &Reader{dir: dir, id: hex.EncodeToString(idSum[:]), m: m}, nil
}

// readLimited reads a whole file of at most limit bytes.
func readLimited(name string, limit int64) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, corruptf("%s is larger than %d bytes", filepath.Base(name), limit)
	}
	return b, nil
}

// Dir is the savepoint's directory.
func (r *Reader) Dir() string { return r.dir }

// ID identifies the savepoint's content: the hex SHA-256 of its manifest,
// which covers every data file's SHA-256. Two copies of one savepoint
// have the same ID wherever they are, so a job can record the ID of the
// savepoint it was started from and recognise it on a restart.
func (r *Reader) ID() string { return r.id }

// Manifest is the verified manifest. It is shared: do not modify it.
func (r *Reader) Manifest() *Manifest { return r.m }

// Scan calls fn for every entry of the aggregate operator whose key group
// is in rng, in key-group then key order. It reads only the data files
// that hold key groups of rng, each to its end, so every file it touches
// is verified. It stops at fn's first error and returns it. An error may
// come after some entries were passed to fn: whatever was built from them
// must be discarded.
func (r *Reader) Scan(operator string, rng state.Range, fn func(Entry) error) error {
	op := r.m.Operator(operator)
	switch {
	case op == nil:
		return fmt.Errorf("savepoint %s: no operator %q", r.dir, operator)
	case !stateful(op.Kind):
		return fmt.Errorf("savepoint %s: operator %q is a %s: its state is offsets (Manifest.Offsets), not entries", r.dir, operator, op.Kind)
	}
	for _, f := range op.Files {
		fr := f.Range()
		if fr.Start >= rng.End || rng.Start >= fr.End {
			continue
		}
		err := r.scanFile(op, f, func(kg state.KeyGroup, key, value []byte) error {
			if !rng.Contains(kg) {
				return nil
			}
			return fn(Entry{Operator: op.ID, Group: kg, Key: key, Value: value})
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// Restore feeds every entry of the given aggregates (RestorePlan.Restore;
// none if empty) in the key groups rng to dst as state-topic records, and
// returns how many it fed. With a *state.Restorer for one worker's range,
// this fills the worker's stores exactly as the state topic would. Each
// record's bytes are only valid during Add (state.Restorer copies what it
// keeps); a RecordAdder that holds on to them, e.g. to produce them to
// Kafka, must copy them.
func (r *Reader) Restore(dst RecordAdder, rng state.Range, operators []string) (int, error) {
	n := 0
	var buf []byte
	for _, id := range operators {
		err := r.Scan(id, rng, func(e Entry) error {
			rec := e.ChangelogRecord(buf[:0])
			buf = rec.Key
			if err := dst.Add(rec); err != nil {
				return fmt.Errorf("savepoint %s: restore operator %q, key group %d, key %q: %w", r.dir, id, e.Group, e.Key, err)
			}
			n++
			return nil
		})
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// Verify reads every data file completely and checks everything Scan
// checks, and the held records' file as Held does. progress, if not nil,
// is called after each data file.
func (r *Reader) Verify(progress func(Progress)) error {
	if _, err := r.Held(); err != nil {
		return err
	}
	var p Progress
	for i := range r.m.Operators {
		op := &r.m.Operators[i]
		for _, f := range op.Files {
			err := r.scanFile(op, f, func(kg state.KeyGroup, key, value []byte) error {
				p.Entries++
				p.Bytes += int64(len(key) + len(value))
				return nil
			})
			if err != nil {
				return err
			}
			p.Files++
			if progress != nil {
				progress(p)
			}
		}
	}
	return nil
}

// scanFile decodes the data file f of op, checking it against the
// manifest, and passes every entry to fn. fn's own error comes back as
// it is; everything else names the savepoint.
func (r *Reader) scanFile(op *Operator, f File, fn func(kg state.KeyGroup, key, value []byte) error) error {
	var fnErr error
	err := r.decodeFile(op, f, func(kg state.KeyGroup, key, value []byte) error {
		fnErr = fn(kg, key, value)
		return fnErr
	})
	switch {
	case fnErr != nil:
		return fnErr
	case err != nil:
		return wrapErr(r.dir, err)
	}
	return nil
}

func (r *Reader) decodeFile(op *Operator, f File, fn func(kg state.KeyGroup, key, value []byte) error) error {
	file, err := os.Open(filepath.Join(r.dir, f.Name))
	if errors.Is(err, os.ErrNotExist) {
		return corruptf("data file %s of operator %q (key groups %v) is missing", f.Name, op.ID, f.Range())
	}
	if err != nil {
		return err
	}
	defer file.Close()
	h := sha256.New()
	var size countWriter
	d, err := newDataDecoder(io.TeeReader(file, io.MultiWriter(h, &size)), f.Name)
	if err != nil {
		return err
	}
	if want := (dataHeader{Operator: op.ID, KeyGroups: r.m.KeyGroups, Range: f.Range()}); d.hdr != want {
		return corruptf("data file %s holds operator %q, key groups %v of %d; the manifest says operator %q, key groups %v of %d",
			f.Name, d.hdr.Operator, d.hdr.Range, d.hdr.KeyGroups, op.ID, f.Range(), r.m.KeyGroups)
	}
	if err := d.each(fn); err != nil {
		return err
	}
	switch sum := hex.EncodeToString(h.Sum(nil)); {
	case int64(size) != f.Size:
		return corruptf("data file %s is %d bytes, the manifest says %d", f.Name, size, f.Size)
	case sum != f.SHA256:
		return corruptf("data file %s: SHA-256 is %s, the manifest says %s", f.Name, sum, f.SHA256)
	case d.entries != f.Keys || d.bytes != f.Bytes:
		return corruptf("data file %s holds %d keys of %d bytes, the manifest says %d keys of %d bytes",
			f.Name, d.entries, d.bytes, f.Keys, f.Bytes)
	}
	return nil
}
