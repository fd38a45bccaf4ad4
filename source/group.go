package source

import (
	"context"
	"fmt"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/config"
)

// GroupReader reads topics as a member of a consumer group and commits
// each polled span's offsets before handing its records out: the
// at_most_once guarantee. After a crash the group resumes after the last
// commit, so records polled but not yet written are lost, never repeated.
//
// A commit is a round trip to the group coordinator, and records must not
// be handed out before theirs. So one commit covers a span of up to
// commitSpan polls' worth, handed out in batches of the size asked for,
// and the next span is fetched and committed by a goroutine of the reader
// while the job processes the current one: the job waits for a commit only
// when it outruns the coordinator. A crash loses at most the span in hand
// and the one committed ahead.
type GroupReader struct {
	cl GroupClient
	// committed are records of the span in hand, not yet handed out.
	committed []*kgo.Record
	// spans carries the records of committed spans from the goroutine
	// that commits ahead (unbuffered: it holds at most one span while the
	// reader hands out the previous one); closed when it stops, after
	// setting err if reading or committing failed.
	spans chan []*kgo.Record
	err   error
	start sync.Once
	// stop ends the goroutine, wg waits for it.
	stop context.CancelFunc
	ctx  context.Context
	wg   sync.WaitGroup
}

// commitSpan is how many polls' worth of records one commit covers at
// most. With one span committed ahead, a crash loses at most two spans
// beyond what was written.
const commitSpan = 8

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
	opts := append(append(append([]kgo.Opt{}, conn...), FetchOpts()...),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topics...),
		kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(reset),
	)
	cl, err := kgo.NewClient(append(opts, extra...)...)
	if err != nil {
		return nil, err
	}
	return NewGroupReaderOn(cl), nil
}

// NewGroupReaderOn is NewGroupReader on a client made by the caller: a
// member of the group consuming its topics with FetchOpts' settings and
// auto-commit off. The GroupReader owns cl.
func NewGroupReaderOn(cl GroupClient) *GroupReader {
	ctx, stop := context.WithCancel(context.Background())
	return &GroupReader{cl: cl, spans: make(chan []*kgo.Record), ctx: ctx, stop: stop}
}

// Poll returns up to max records whose offsets are committed. When the
// span in hand is used up it takes the next one, waiting for it if it is
// not committed yet; if reading or committing failed, nothing more is
// handed out. The first Poll starts committing ahead, spans of up to
// commitSpan x max records.
func (r *GroupReader) Poll(ctx context.Context, max int) ([]*kgo.Record, error) {
	if len(r.committed) == 0 {
		r.start.Do(func() {
			r.wg.Add(1)
			go r.commitAhead(commitSpan * max)
		})
		select {
		case recs, ok := <-r.spans:
			switch {
			case !ok && r.err != nil:
				return nil, r.err
			case !ok:
				return nil, kgo.ErrClientClosed
			}
			r.committed = recs
		case <-ctx.Done():
			// A span committed meanwhile stays for the next Poll.
			return nil, ctx.Err()
		}
	}
	n := min(max, len(r.committed))
	out := r.committed[:n:n]
	r.committed = r.committed[n:]
	return out, nil
}

// commitAhead polls up to n records at a time, commits their offsets and
// hands them to Poll, until the reader is closed or a fetch or a commit
// fails (the error is Poll's, and nothing after it is handed out).
func (r *GroupReader) commitAhead(n int) {
	defer r.wg.Done()
	defer close(r.spans)
	for {
		fs := r.cl.PollRecords(r.ctx, n)
		if fs.IsClientClosed() || r.ctx.Err() != nil {
			return
		}
		if err := fetchErrors(fs); err != nil {
			r.err = err
			return
		}
		recs := fs.Records()
		if len(recs) == 0 {
			continue
		}
		if err := r.cl.CommitRecords(r.ctx, recs...); err != nil {
			r.err = fmt.Errorf("committing offsets before processing: %w", err)
			return
		}
		select {
		case r.spans <- recs:
		case <-r.ctx.Done():
			return
		}
	}
}

// Advance does nothing: the group's committed offsets are the position.
func (r *GroupReader) Advance(*kgo.Record) {}

// Positions is empty: an at_most_once job takes no checkpoints.
func (r *GroupReader) Positions() []Position { return nil }

// Close stops committing ahead and leaves the group.
func (r *GroupReader) Close() {
	r.stop()
	r.cl.Close()
	r.wg.Wait()
}
