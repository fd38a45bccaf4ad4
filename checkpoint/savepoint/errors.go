package savepoint

import (
	"errors"
	"fmt"
)

// Errors that callers branch on. Every error of this package that is about
// a savepoint's content (rather than a failing disk) wraps one of them.
var (
	// ErrNotSavepoint: the path is not a savepoint directory (no
	// savepoint.json). An unfinished one is named DIR.tmp-*.
	ErrNotSavepoint = errors.New("not a savepoint")
	// ErrUnknownVersion: the savepoint, or one of its data files, is in a
	// format version this build does not read (written by a newer
	// pipeline).
	ErrUnknownVersion = errors.New("unknown savepoint format version")
	// ErrCorrupt: a file is missing, truncated, fails a checksum, or does
	// not parse. The savepoint cannot be used; take another one.
	ErrCorrupt = errors.New("corrupt savepoint")
	// ErrExists: the target directory exists and is not empty. Savepoints
	// are never overwritten.
	ErrExists = errors.New("savepoint directory exists and is not empty")
	// ErrIncompatible: the job's configuration cannot be restored from the
	// savepoint. The error is an *IncompatibleError listing every problem.
	ErrIncompatible = errors.New("savepoint does not fit the job's configuration")
	// ErrInvalidEntry: the Writer was given an entry that cannot be part of
	// a savepoint (a tombstone, out of order, in the wrong key group). It
	// is a bug of the caller; the savepoint must be aborted.
	ErrInvalidEntry = errors.New("invalid savepoint entry")
)

// corruptError is damage found in a savepoint. Its text is only the
// detail ("data file X, byte N: ..."): the Reader's methods prefix
// "savepoint DIR is corrupt: ". It matches ErrCorrupt.
type corruptError struct{ msg string }

func (e *corruptError) Error() string        { return e.msg }
func (e *corruptError) Is(target error) bool { return target == ErrCorrupt }

func corruptf(format string, args ...any) error {
	return &corruptError{msg: fmt.Sprintf(format, args...)}
}
