package checkpoint

import (
	"errors"
	"fmt"
	"slices"
)

// ErrIncompatible: the job's configuration cannot restore the checkpoint.
var ErrIncompatible = errors.New("checkpoint does not fit the job's configuration")

// Compatible reports whether a job configured with keyGroups and the
// stateful operators operatorIDs can restore rec, naming both sides of every
// mismatch, all at once. The rules:
//
//   - key groups must be equal: keyed state is partitioned by hash mod G,
//     so a different G puts every key in the wrong group;
//   - every operator with state in the checkpoint must still exist, or its
//     state would be dropped without a word (Flink refuses the same way
//     unless told --allowNonRestoredState). New operators are fine: they
//     start empty.
//
// A changed fingerprint alone is allowed (a new filter expression still
// maps onto the same state); it is named in the error when something else
// does not fit, because it is usually why.
func Compatible(rec *Record, fingerprint string, keyGroups int, operatorIDs []string) error {
	if rec == nil {
		return fmt.Errorf("%w: no checkpoint record", ErrIncompatible)
	}
	var errs []error
	if rec.KeyGroups != keyGroups {
		errs = append(errs, fmt.Errorf("checkpoint %d was taken with %d key groups, the config has %d: key_groups cannot change for a job; restore from a savepoint or start a new job name",
			rec.ID, rec.KeyGroups, keyGroups))
	}
	var missing []string
	for _, op := range rec.OperatorIDs {
		if !slices.Contains(operatorIDs, op) {
			missing = append(missing, op)
		}
	}
	if len(missing) > 0 {
		errs = append(errs, fmt.Errorf("checkpoint %d holds state of operators %q that the config does not have (it has %q): operator ids must stay stable; put the ids back, restore from a savepoint that maps them, or start a new job name",
			rec.ID, missing, slices.Sorted(slices.Values(operatorIDs))))
	}
	if len(errs) == 0 {
		return nil
	}
	if rec.ConfigFingerprint != "" && fingerprint != "" && rec.ConfigFingerprint != fingerprint {
		errs = append(errs, fmt.Errorf("the config changed since checkpoint %d (fingerprint %s, now %s)", rec.ID, rec.ConfigFingerprint, fingerprint))
	}
	return fmt.Errorf("%w: %w", ErrIncompatible, errors.Join(errs...))
}
