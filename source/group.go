package source

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/config"
)

// GroupReader reads topics as a member of a consumer group and commits
// each polled batch's offsets before handing the records out: the
// at_most_once guarantee. After a crash the group resumes after the last
// commit, so records polled but not yet written are lost, never repeated.
//
// A commit is a round trip to the group coordinator, and the records wait
// for it: one commit covers everything the client has buffered (up to
// commitSpan polls' worth), handed out in batches of the size asked for.
type GroupReader struct {
	cl *kgo.Client
	// committed are records whose offsets are committed, not yet handed
	// out.
	committed []*kgo.Record
}

// commitSpan is how many polls' worth of records one commit covers at
// most: it bounds what a crash loses beyond the batch in hand.
const commitSpan = 16

// NewGroupReader joins group for topics. start applies when the group has
// no committed offset for a partition.
func NewGroupReader(conn []kgo.Opt, group string, topics []string, start config.StartPosition, extra ...kgo.Opt) (*GroupReader, error) {
	reset := kgo.NewOffset().AtStart()
	switch start.Kind {
	case config.StartLatest:
		reset = kgo.NewOffset().AtEnd()
	case config.StartAtTimestamp:
		reset = kgo.NewOffset().AfterMilli(start.At.UnixMilli())
	}
	opts := append(append([]kgo.Opt{}, conn...),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topics...),
		kgo.DisableAutoCommit(),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(reset),
	)
	cl, err := kgo.NewClient(append(opts, extra...)...)
	if err != nil {
		return nil, err
	}
	return &GroupReader{cl: cl}, nil
}

// Poll returns up to max records whose offsets are committed. When none
// are left from the last commit it waits for records, commits all it got
// (up to commitSpan x max) and hands out the first max; if the commit
// fails, nothing is handed out.
func (r *GroupReader) Poll(ctx context.Context, max int) ([]*kgo.Record, error) {
	if len(r.committed) == 0 {
		fs := r.cl.PollRecords(ctx, commitSpan*max)
		if fs.IsClientClosed() {
			return nil, kgo.ErrClientClosed
		}
		if err := fetchErrors(fs); err != nil {
			return nil, err
		}
		// Records the client handed over are consumed: never drop them
		// here because ctx ended meanwhile.
		recs := fs.Records()
		if len(recs) == 0 {
			return nil, ctx.Err()
		}
		if err := r.cl.CommitRecords(ctx, recs...); err != nil {
			return nil, fmt.Errorf("committing offsets before processing: %w", err)
		}
		r.committed = recs
	}
	n := min(max, len(r.committed))
	out := r.committed[:n:n]
	r.committed = r.committed[n:]
	return out, nil
}

// Advance does nothing: the group's committed offsets are the position.
func (r *GroupReader) Advance(*kgo.Record) {}

// Positions is empty: an at_most_once job takes no checkpoints.
func (r *GroupReader) Positions() []Position { return nil }

// Close leaves the group.
func (r *GroupReader) Close() { r.cl.Close() }
