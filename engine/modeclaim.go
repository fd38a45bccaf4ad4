package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/checkpoint"
	"github.com/eoflow/pipeline/checkpoint/kstore"
	"github.com/eoflow/pipeline/config"
	"github.com/eoflow/pipeline/internal/kread"
)

// A job runs in one mode, single or group, and the two must never run it
// at once: each would read every input and write every output. The
// checkpoint records of a mode show that it ran, but only after its first
// commit; two processes of a new job started together both find none.
// So the mode is decided once, in one atomic step, and kept in the job's
// checkpoint topic as its mode claim: the record keyed <job>#mode, whose
// value is the mode (the last such record counts, as compaction keeps
// it). Every attempt of either mode reads the topic before it writes
// anything (settleMode):
//
//  1. A claim of its own mode: it runs. A claim of the other mode: it is
//     refused, unless it starts from a savepoint (a job moves between
//     modes only through one), which rewrites the claim in steps 2 to 4.
//  2. No claim: it initializes the claims' own transactional id,
//     <job>#mode. The transaction coordinator fences every claimer that
//     initialized the id before.
//  3. It reads the topic again, to its last stable offset. A claim found
//     now decides, as in step 1.
//  4. Otherwise it writes its claim in a transaction and commits. A
//     claimer fenced meanwhile (its commit fails) goes back to step 2.
//
// Why only one mode wins: a claimer's commit succeeds only if no other
// claimer initialized the id between its own initialization and its
// commit, so the spans [initialize, commit] of the claims that commit never
// overlap, and the later one initialized after the earlier one committed.
// Its read (step 3) sees that claim: the coordinator writes a committed
// transaction's markers before it hands out the id's next epoch, and no
// transaction begun before the claim holds the last stable offset below
// it (every writer of the topic settles the mode first; pause records are
// written without a transaction). The claimer that comes second therefore
// adopts the first claim and writes none.
//
// The claim decides which mode may run; it does not stop a process of
// the other mode that was already running when a savepoint moved the job
// (stop every process before that). As a second line, a single-mode
// process whose offsets the job's consumer group refuses because the group
// has members stops (groupOffsets).

// modeKey is the key of the job's mode claim in its checkpoint topic. A
// job name cannot hold '#', so no checkpoint record's key is the same.
func modeKey(job string) string { return job + "#mode" }

// modeTransactionalID is the transactional id that serializes the claims
// of the job's mode (one instance id could never spell it: '#' is not
// allowed there, and a member's id is <job>-<instance>).
func modeTransactionalID(job string) string { return job + "#mode" }

// jobRecords is what the job's checkpoint topic says about who ran it.
type jobRecords struct {
	// claim is the job's mode claim ("": none).
	claim config.ScaleMode
	// single is the newest single-mode checkpoint (nil: none).
	single *checkpoint.Record
	// members are the newest checkpoint of each group member, by record
	// key (sink.MemberRecordKey), tombstoned ones left out.
	members map[string]*checkpoint.Record
}

// foldJobRecords returns a fold of the job's checkpoint topic, read in
// offset order, into recs.
func foldJobRecords(job string, recs *jobRecords) func(*kgo.Record) error {
	single := kstore.Newest{Job: job}
	prefix := job + "/"
	recs.members = map[string]*checkpoint.Record{}
	return func(r *kgo.Record) error {
		key := string(r.Key)
		switch {
		case key == modeKey(job):
			recs.claim = config.ScaleMode(r.Value)
		case strings.HasPrefix(key, prefix):
			if r.Value == nil {
				delete(recs.members, key)
				return nil
			}
			rec, err := checkpoint.DecodeRecord(r.Value)
			if err != nil {
				return fmt.Errorf("checkpoint record at %s/%d@%d: %w", r.Topic, r.Partition, r.Offset, err)
			}
			// A member reads the topic only up to its last stable offset
			// and may write an id again (kstore.Newest.Member): its
			// newest record is its last one, whatever its id.
			recs.members[key] = rec
		default:
			if err := single.Add(r); err != nil {
				return err
			}
			recs.single = single.Record
		}
		return nil
	}
}

// readJobRecords reads the job's checkpoint topic to its last stable
// offset.
func readJobRecords(ctx context.Context, conn []kgo.Opt, job string) (*jobRecords, error) {
	recs := &jobRecords{}
	if err := kread.All(ctx, conn, checkpoint.TopicName(job), foldJobRecords(job, recs)); err != nil {
		return nil, fmt.Errorf("reading the checkpoint topic: %w", err)
	}
	return recs, nil
}

// modeVerdict is what a job's records say to a process of mode want.
type modeVerdict uint8

const (
	// modeRun: the job is claimed for want.
	modeRun modeVerdict = 1 + iota
	// modeClaim: the job is not claimed for want, and may be: claim it.
	modeClaim
	// modeRefuse: another mode ran the job or holds it.
	modeRefuse
)

// judgeMode decides what recs allow a process of mode want, started from a
// savepoint or not, and for a refusal says why. A savepoint moves a job
// between modes: it may take the job from the other mode.
func judgeMode(job string, recs *jobRecords, want config.ScaleMode, fromSavepoint bool) (modeVerdict, error) {
	if recs.claim == want {
		return modeRun, nil
	}
	if fromSavepoint {
		return modeClaim, nil
	}
	other := config.ScaleSingle
	if want == config.ScaleSingle {
		other = config.ScaleGroup
	}
	// Without a claim (a job of an older build) its records tell: a
	// single-mode record refuses group mode (a savepoint's import in group
	// mode deletes it), and group members' records refuse single mode
	// unless a single-mode checkpoint came after them (a savepoint's
	// import in single mode).
	ranOther := recs.claim == other ||
		(want == config.ScaleGroup && recs.single != nil) ||
		(want == config.ScaleSingle && len(recs.members) > 0 && recs.single == nil)
	if !ranOther {
		return modeClaim, nil
	}
	how := fmt.Sprintf("run it with scale.mode: %s", other)
	switch {
	case recs.single != nil && want == config.ScaleGroup:
		return modeRefuse, incompatibleError{fmt.Errorf("job %s ran in single mode (its last checkpoint is %d): %s, or under a new name (a job moves between modes only through a savepoint, run --from-savepoint)",
			job, recs.single.ID, how)}
	case len(recs.members) > 0 && want == config.ScaleSingle:
		return modeRefuse, incompatibleError{fmt.Errorf("job %s ran in group mode (scale.mode: group; its members' checkpoint records are in %s): run it in group mode, or under a new name (a job moves between modes only through a savepoint)",
			job, checkpoint.TopicName(job))}
	}
	// Claimed, and nothing committed yet: a process of the other mode
	// started it first (maybe just now).
	return modeRefuse, incompatibleError{fmt.Errorf("job %s is claimed for %s mode (by a process of it that started first; the claim is in %s): %s, or under a new name (a job moves between modes only through a savepoint, run --from-savepoint)",
		job, other, checkpoint.TopicName(job), how)}
}

// settleMode makes sure the job is claimed for this process's mode before
// the process writes anything (steps 1 to 4 above), or refuses. The
// checkpoint topic must exist. It returns the records it read.
func (j *Job) settleMode(ctx context.Context) (*jobRecords, error) {
	want := j.cfg.Scale.Mode
	recs, err := readJobRecords(ctx, j.conn, j.cfg.Name)
	if err != nil {
		return nil, err
	}
	switch verdict, err := judgeMode(j.cfg.Name, recs, want, j.from != nil); verdict {
	case modeRun:
		return recs, nil
	case modeRefuse:
		return nil, err
	}
	won, err := claimMode(ctx, j.conn, j.cfg.Name, want, j.from != nil, j.cfg.Kafka.TransactionTimeout, j.jitter)
	if err != nil {
		return nil, err
	}
	if won != want {
		// Another process claimed it for the other mode first.
		_, err := judgeMode(j.cfg.Name, &jobRecords{claim: won}, want, false)
		return nil, err
	}
	if recs.claim == "" {
		j.log.Info("claimed the job for this mode: a process of the other mode is refused from now on", "mode", want)
	} else {
		j.log.Info("claimed the job for this mode, moving it from the other with a savepoint", "mode", want, "was", recs.claim)
	}
	return recs, nil
}

// claimMode claims job for mode want unless it is claimed already (steps 2
// to 4; with override, a claim of the other mode is replaced), and returns
// the mode the job is claimed for. wait spreads the retries of claimers
// that fenced each other.
func claimMode(ctx context.Context, conn []kgo.Opt, job string, want config.ScaleMode, override bool, timeout time.Duration, wait func(time.Duration) time.Duration) (config.ScaleMode, error) {
	backoff := 50 * time.Millisecond
	for {
		won, err := tryClaimMode(ctx, conn, job, want, override, timeout)
		if err == nil {
			return won, nil
		}
		if ctx.Err() != nil || !fencedClaim(err) {
			return "", fmt.Errorf("claiming job %s for %s mode: %w", job, want, err)
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(wait(backoff)):
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

// tryClaimMode is one pass of steps 2 to 4.
func tryClaimMode(ctx context.Context, conn []kgo.Opt, job string, want config.ScaleMode, override bool, timeout time.Duration) (config.ScaleMode, error) {
	cl, err := kgo.NewClient(append(append([]kgo.Opt{}, conn...),
		kgo.TransactionalID(modeTransactionalID(job)), kgo.TransactionTimeout(timeout))...)
	if err != nil {
		return "", err
	}
	defer cl.Close()
	if _, _, err := cl.ProducerID(ctx); err != nil {
		return "", fmt.Errorf("initializing transactional id %s: %w", modeTransactionalID(job), err)
	}
	recs, err := readJobRecords(ctx, conn, job)
	if err != nil {
		return "", err
	}
	if recs.claim != "" && (recs.claim == want || !override) {
		return recs.claim, nil
	}
	if err := cl.BeginTransaction(); err != nil {
		return "", err
	}
	rec := &kgo.Record{Topic: checkpoint.TopicName(job), Key: []byte(modeKey(job)), Value: []byte(want)}
	err = cl.ProduceSync(ctx, rec).FirstErr()
	if err == nil {
		if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
			if errors.Is(err, kerr.UnknownServerError) {
				// Kafka 4.1 answers a commit that races another
				// claimer's initialization of the transactional id this
				// way (IllegalStateException: PREPARE_COMMIT while
				// PREPARE_EPOCH_FENCE is pending); the fence aborts the
				// transaction. The next pass reads what was claimed.
				return "", fmt.Errorf("%w: %w", errClaimUnsettled, err)
			}
			return "", err
		}
		return want, nil
	}
	if aerr := cl.EndTransaction(context.WithoutCancel(ctx), kgo.TryAbort); aerr != nil && !fencedClaim(aerr) {
		err = errors.Join(err, aerr)
	}
	return "", err
}

// errClaimUnsettled: a claim's commit failed in a way that leaves its
// outcome to be read again.
var errClaimUnsettled = errors.New("the claim's commit raced another claimer")

// fencedClaim reports whether err is the brokers' answer to a claimer
// whose epoch another claimer's initialization ended.
func fencedClaim(err error) bool {
	return errors.Is(err, errClaimUnsettled) || errors.Is(err, kerr.ProducerFenced) || errors.Is(err, kerr.InvalidProducerEpoch) ||
		errors.Is(err, kerr.InvalidTxnState) || errors.Is(err, kerr.TransactionAbortable) || errors.Is(err, kgo.ErrAborting)
}
