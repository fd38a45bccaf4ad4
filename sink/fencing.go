package sink

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/eoflow/pipeline/internal/mutant"
	"github.com/eoflow/pipeline/twophase"
)

// Verdict is what a failure of the transactional producer means for the
// job: Classify gives it. The zero value is invalid.
type Verdict uint8

const (
	// Retry: not a fencing (a leader moved, a request timed out, a record
	// failed): restart from the last checkpoint, as after any failure.
	Retry Verdict = 1 + iota
	// TimedOut: the transaction outlived kafka.transaction_timeout and the
	// transaction coordinator aborted it, bumping the producer epoch
	// (after a long GC pause, a stopped process, a host that slept).
	// Nobody else holds the transactional id: restart from the last
	// checkpoint; the restart's InitProducerId takes the id back.
	TimedOut
	// TakenOver: another instance of the job initialized the same
	// transactional id. Stop, and never fight back: a restart would fence
	// the successor, which would fence this one in turn.
	TakenOver
	// Unauthorized: the brokers refused an operation for want of an ACL;
	// restarting cannot help. The error names the ACL.
	Unauthorized
)

func (v Verdict) String() string {
	switch v {
	case Retry:
		return "retry"
	case TimedOut:
		return "transaction_timeout"
	case TakenOver:
		return "taken_over"
	case Unauthorized:
		return "unauthorized"
	}
	return fmt.Sprintf("Verdict(%d)", uint8(v))
}

// ErrFenced means another instance of the job took over its transactional
// id: this instance must stop and never make a later checkpoint visible.
// It is a twophase.ErrFenced, the commit protocol's "another instance owns
// the job".
var ErrFenced = fmt.Errorf("%w its transactional id", twophase.ErrFenced)

// ErrTransactionTimedOut means the transaction coordinator aborted this
// instance's open transaction because it outlived kafka.transaction_timeout.
// Nothing of that transaction became visible; the job restarts from its
// last checkpoint.
var ErrTransactionTimedOut = errors.New("the transaction outlived kafka.transaction_timeout and the transaction coordinator aborted it")

// ErrUnauthorized means the brokers refused the job an operation for want
// of an ACL, named in the error.
var ErrUnauthorized = errors.New("not authorized")

// Classify tells what err, from the transactional producer or anything
// that wraps its errors, means for the job.
//
// The brokers' codes alone cannot tell a transaction that timed out from a
// takeover: a produce gets INVALID_PRODUCER_EPOCH after either, and Kafka
// 4's coordinator answers a commit with INVALID_TXN_STATE after a timeout
// and also while it is aborting the transaction for a successor. Txn asks the coordinator which it was
// when it meets one (see probe) and marks the error with ErrFenced or
// ErrTransactionTimedOut. An epoch error that reached here unasked is read
// as a takeover: stopping is the safe reading.
func Classify(err error) Verdict {
	switch {
	case err == nil:
		return Retry
	case errors.Is(err, ErrFenced), errors.Is(err, twophase.ErrFenced):
		return TakenOver
	case errors.Is(err, ErrUnauthorized):
		return Unauthorized
	case errors.Is(err, ErrTransactionTimedOut):
		return TimedOut
	case missingACL(err) != "":
		return Unauthorized
	case errors.Is(err, kerr.ProducerFenced),
		errors.Is(err, kerr.InvalidProducerEpoch),
		errors.Is(err, kerr.InvalidTxnState):
		return TakenOver
	}
	return Retry
}

// IsFenced reports whether err means another instance took over the
// job's transactional id (Classify gives TakenOver): the commit protocol's
// Config.IsFenced.
func IsFenced(err error) bool { return Classify(err) == TakenOver }

// epochError reports whether err is one of the broker's answers to a
// producer whose epoch is no longer the transactional id's: after a
// takeover or after the coordinator aborted a timed-out transaction.
func epochError(err error) bool {
	return errors.Is(err, kerr.ProducerFenced) ||
		errors.Is(err, kerr.InvalidProducerEpoch) ||
		errors.Is(err, kerr.InvalidTxnState)
}

// missingACL names the ACL an authorization failure in err lacks, or "".
func missingACL(err error) string {
	switch {
	case errors.Is(err, kerr.TransactionalIDAuthorizationFailed):
		return "WRITE (and DESCRIBE) on the TransactionalId resource of the job's transactional id"
	case errors.Is(err, kerr.TopicAuthorizationFailed):
		return "WRITE (and DESCRIBE) on the job's output, dead-letter and internal topics, READ on its input topics"
	case errors.Is(err, kerr.GroupAuthorizationFailed):
		return "READ on the Group resource named after the job"
	case errors.Is(err, kerr.ClusterAuthorizationFailed):
		return "IDEMPOTENT_WRITE on the Cluster resource"
	}
	return ""
}

// WithMissingACL marks err with ErrUnauthorized and the ACL it lacks, if it
// is an authorization failure; otherwise it returns err unchanged.
func WithMissingACL(err error) error {
	if acl := missingACL(err); acl != "" && !errors.Is(err, ErrUnauthorized) {
		return fmt.Errorf("%w: the job's principal needs %s: %w", ErrUnauthorized, acl, err)
	}
	return err
}

// probe asks the transaction coordinator why the producer's epoch epoch of
// producer id id is no longer current, by ending that transaction with
// abort at that epoch.
//
// Measured on Kafka 4.1 (transaction.version 2): after another instance's
// InitProducerId, the coordinator answers PRODUCER_FENCED; after it
// aborted the transaction itself for outliving its timeout, it takes the
// abort as a retry of its own (no error) or answers INVALID_TXN_STATE.
// So it does while another instance's InitProducerId is still under way
// (the coordinator has aborted the transaction to fence it, and not yet
// handed out the successor's epoch): a TimedOut answer is only believed
// for a transaction older than its timeout (Txn.settle). Any other answer
// (the coordinator unreachable) says nothing: the caller keeps the error
// unclassified.
func probe(ctx context.Context, cl kmsg.Requestor, transactionalID string, id int64, epoch int16) (Verdict, error) {
	req := kmsg.NewPtrEndTxnRequest()
	req.TransactionalID = transactionalID
	req.ProducerID = id
	req.ProducerEpoch = epoch
	req.Commit = false
	resp, err := req.RequestWith(ctx, cl)
	if err == nil {
		err = kerr.ErrorForCode(resp.ErrorCode)
	}
	switch {
	case err == nil, errors.Is(err, kerr.InvalidTxnState):
		return TimedOut, nil
	case errors.Is(err, kerr.ProducerFenced):
		return TakenOver, nil
	}
	return 0, err
}

// believe is the verdict on a transaction of the given age (since Begin)
// that probe judged. The probe cannot tell a timeout from a takeover still
// under way: between the coordinator's fencing abort and the end of the
// successor's InitProducerId, the probe's abort looks like a retry of the
// coordinator's own (TestSecondInstanceFencesTheFirst caught a first
// instance restarting on it and fencing its successor). The coordinator
// starts a transaction's clock at its first write, after Begin, so one
// younger than its timeout here was not aborted for its age.
func believe(probed Verdict, age, timeout time.Duration) Verdict {
	if mutant.On("probe-believes-young-timeout") {
		// The bug: a takeover still under way is read as a timeout, and
		// the instance restarts and fences its successor.
		return probed
	}
	if probed == TimedOut && age < timeout {
		return TakenOver
	}
	return probed
}
