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
type GroupReader struct {
	cl *kgo.Client
}

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

// Poll waits for up to max records and commits their offsets before
// returning them; if the commit fails, the records are not returned.
func (r *GroupReader) Poll(ctx context.Context, max int) ([]*kgo.Record, error) {
	fs := r.cl.PollRecords(ctx, max)
	if fs.IsClientClosed() {
		return nil, kgo.ErrClientClosed
	}
	if err := fetchErrors(fs); err != nil {
		return nil, err
	}
	// Records the client handed over are consumed: never drop them here
	// because ctx ended meanwhile.
	recs := fs.Records()
	if len(recs) == 0 {
		return nil, ctx.Err()
	}
	if err := r.cl.CommitRecords(ctx, recs...); err != nil {
		return nil, fmt.Errorf("committing offsets before processing: %w", err)
	}
	return recs, nil
}

// Advance does nothing: the group's committed offsets are the position.
func (r *GroupReader) Advance(*kgo.Record) {}

// Positions is empty: an at_most_once job takes no checkpoints.
func (r *GroupReader) Positions() []Position { return nil }

// Close leaves the group.
func (r *GroupReader) Close() { r.cl.Close() }
