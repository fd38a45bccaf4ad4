package state

import "errors"

// Errors that callers branch on. Every error returned by this package
// wraps one of them (or a Codec's error) with the details.
var (
	// ErrUnknownFormat: a changelog key was written in a format version
	// this build does not read (written by a newer version, or not a
	// changelog key at all).
	ErrUnknownFormat = errors.New("state: unknown changelog format version")
	// ErrCorrupt: a changelog key is truncated or malformed.
	ErrCorrupt = errors.New("state: corrupt changelog key")
	// ErrKeyGroupCount: a changelog record does not fit the job's
	// key-group count, i.e. the count was changed under existing state.
	ErrKeyGroupCount = errors.New("state: the key-group count must not change for the life of a job's state")
	// ErrPieces: the records of a value written in pieces do not make one
	// value (see Restorer.Finish): the state topic is damaged.
	ErrPieces = errors.New("state: the pieces of a value larger than a record do not fit together")
)
