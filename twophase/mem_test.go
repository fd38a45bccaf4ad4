package twophase

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/eoflow/pipeline/checkpoint"
)

// An in-memory participant for the tests. Its store is the durable side
// (what a database or a Kafka cluster keeps across a crash of the job); a
// handle is one incarnation's connection to it, lost when that incarnation
// crashes. The store checks the protocol from the resource's point of view
// and reports every violation to violation.

var errInjected = errors.New("injected failure")

// faultMode says how the next call fails.
type faultMode int

const (
	noFault faultMode = iota
	// failBefore: the call fails and changes nothing.
	failBefore
	// failAfter: the call takes effect, then reports an error (a lost
	// reply), the case that makes a decision log's commit in doubt.
	failAfter
)

type commitRec struct {
	epoch   Epoch
	attempt int // the incarnation that prepared it
}

type store struct {
	name string
	// decisionLog is the decision log's store, nil for the decision log
	// itself: a commit anywhere else must follow the decision.
	decisionLog *store
	// owner is the incarnation allowed to call; every other one is fenced.
	// Incarnations are numbered in start order, so a newer one can fence
	// an older one and never the reverse.
	owner int
	// begun holds the epochs opened and neither committed nor aborted, by
	// the attempt that opened them. It is volatile (an open transaction):
	// Recover drops whatever is not prepared.
	begun     map[Epoch]int
	maxOpen   int           // how many epochs may be begun at once (0: no check)
	prepared  map[Epoch]int // epoch -> attempt, durable
	committed []commitRec   // in commit order
	// For the decision log, the job's outputs end to end: the input
	// records each prepared epoch holds ([from, to)), how far the
	// committed output reaches, and the source offset each committed
	// checkpoint recorded. Committed outputs must be the input records
	// 0..outputEnd-1, each exactly once.
	spans     map[Epoch][2]int
	outputEnd int
	offsets   map[Epoch]int
	// fault, when set, decides how each call fails.
	fault     func(op string, e Epoch) faultMode
	violation func(format string, args ...any)
	calls     []string // every call, for transcripts
}

func newStore(name string, decisionLog *store, violation func(string, ...any)) *store {
	return &store{name: name, decisionLog: decisionLog, begun: map[Epoch]int{}, prepared: map[Epoch]int{},
		spans: map[Epoch][2]int{}, offsets: map[Epoch]int{}, violation: violation}
}

func (s *store) lastCommitted() Epoch {
	if len(s.committed) == 0 {
		return 0
	}
	return s.committed[len(s.committed)-1].epoch
}

// committedAttempt returns the attempt that committed e, if any.
func (s *store) committedAttempt(e Epoch) (int, bool) {
	for _, c := range s.committed {
		if c.epoch == e {
			return c.attempt, true
		}
	}
	return 0, false
}

func (s *store) inDoubt() []Epoch {
	return slices.Sorted(func(yield func(Epoch) bool) {
		for e := range s.prepared {
			if !yield(e) {
				return
			}
		}
	})
}

func (s *store) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s owner=%d committed=[", s.name, s.owner)
	for i, c := range s.committed {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%d@%d", c.epoch, c.attempt)
	}
	b.WriteString("] prepared=[")
	for i, e := range s.inDoubt() {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%d@%d", e, s.prepared[e])
	}
	b.WriteString("]")
	return b.String()
}

// handle is one incarnation's participant.
type handle struct {
	s   *store
	inc int
	// span, if set, says which input records epoch e holds: what Prepare
	// makes durable (the decision log's outputs).
	span func(e Epoch) [2]int
}

var _ DecisionLog = (*handle)(nil)

func (h *handle) Name() string { return h.s.name }

// enter checks fencing and the injected fault before a call takes effect.
func (h *handle) enter(op string, e Epoch) (faultMode, error) {
	h.s.calls = append(h.s.calls, fmt.Sprintf("%s %d by %d", op, e, h.inc))
	if h.s.owner != h.inc {
		return noFault, fmt.Errorf("%s %s %d: %w (owner %d, caller %d)", h.s.name, op, e, ErrFenced, h.s.owner, h.inc)
	}
	mode := noFault
	if h.s.fault != nil {
		mode = h.s.fault(op, e)
	}
	if mode == failBefore {
		return mode, fmt.Errorf("%s %s %d: %w", h.s.name, op, e, errInjected)
	}
	return mode, nil
}

func (h *handle) exit(mode faultMode, op string, e Epoch) error {
	if mode == failAfter {
		return fmt.Errorf("%s %s %d (after it took effect): %w", h.s.name, op, e, errInjected)
	}
	return nil
}

func (h *handle) Begin(_ context.Context, e Epoch) error {
	mode, err := h.enter("begin", e)
	if err != nil {
		return err
	}
	s := h.s
	if _, ok := s.committedAttempt(e); ok {
		s.violation("%s: begin of epoch %d, already committed", s.name, e)
	}
	if a, ok := s.prepared[e]; ok {
		s.violation("%s: attempt %d begins epoch %d while attempt %d of it is still in doubt (not settled by recovery)", s.name, h.inc, e, a)
	}
	if a, ok := s.begun[e]; ok && a == h.inc {
		s.violation("%s: attempt %d begins epoch %d twice", s.name, h.inc, e)
	}
	s.begun[e] = h.inc
	if s.maxOpen > 0 && len(s.begun) > s.maxOpen {
		s.violation("%s: %d epochs begun and neither committed nor aborted (%v), max in flight %d", s.name, len(s.begun), slices.Sorted(maps.Keys(s.begun)), s.maxOpen)
	}
	return h.exit(mode, "begin", e)
}

func (h *handle) Prepare(_ context.Context, e Epoch) error {
	mode, err := h.enter("prepare", e)
	if err != nil {
		return err
	}
	s := h.s
	if a, ok := s.begun[e]; !ok || a != h.inc {
		s.violation("%s: attempt %d prepares epoch %d, which it did not begin", s.name, h.inc, e)
	}
	if _, ok := s.committedAttempt(e); ok {
		s.violation("%s: prepare of epoch %d, already committed", s.name, e)
	}
	if a, ok := s.prepared[e]; ok && a != h.inc {
		s.violation("%s: attempt %d prepares epoch %d while attempt %d of it is still in doubt (not settled by recovery)", s.name, h.inc, e, a)
	}
	s.prepared[e] = h.inc
	if h.span != nil {
		s.spans[e] = h.span(e)
	}
	return h.exit(mode, "prepare", e)
}

func (h *handle) Commit(_ context.Context, e Epoch) error {
	mode, err := h.enter("commit", e)
	if err != nil {
		return err
	}
	s := h.s
	if _, ok := s.committedAttempt(e); ok {
		return h.exit(mode, "commit", e) // idempotent
	}
	a, ok := s.prepared[e]
	if !ok {
		s.violation("%s: commit of epoch %d, which is not prepared", s.name, e)
	}
	if last := s.lastCommitted(); e <= last {
		s.violation("%s: commit of epoch %d after epoch %d: out of order", s.name, e, last)
	}
	if s.decisionLog == nil {
		if last := s.lastCommitted(); e != last+1 {
			s.violation("%s: decision of epoch %d after epoch %d: a gap", s.name, e, last)
		}
	} else if da, ok := s.decisionLog.committedAttempt(e); !ok {
		s.violation("%s: commit of epoch %d before the decision log committed it", s.name, e)
	} else if da != a {
		s.violation("%s: commit of attempt %d of epoch %d, but the decision log committed attempt %d", s.name, a, e, da)
	}
	if sp, ok := s.spans[e]; ok {
		if sp[0] != s.outputEnd {
			s.violation("%s: exactly-once broken: epoch %d holds input records %d..%d, the committed output ends at %d", s.name, e, sp[0], sp[1], s.outputEnd)
		}
		s.outputEnd = sp[1]
		s.offsets[e] = sp[1]
		delete(s.spans, e)
	}
	delete(s.prepared, e)
	delete(s.begun, e)
	s.committed = append(s.committed, commitRec{e, a})
	return h.exit(mode, "commit", e)
}

func (h *handle) Abort(_ context.Context, e Epoch) error {
	mode, err := h.enter("abort", e)
	if err != nil {
		return err
	}
	s := h.s
	if _, ok := s.committedAttempt(e); ok {
		s.violation("%s: abort of epoch %d, which committed", s.name, e)
	}
	delete(s.prepared, e)
	delete(s.spans, e)
	delete(s.begun, e)
	return h.exit(mode, "abort", e)
}

func (h *handle) Recover(_ context.Context) ([]Epoch, error) {
	s := h.s
	s.calls = append(s.calls, fmt.Sprintf("recover by %d", h.inc))
	if s.owner > h.inc {
		return nil, fmt.Errorf("%s recover: %w (owner %d, caller %d)", s.name, ErrFenced, s.owner, h.inc)
	}
	mode := noFault
	if s.fault != nil {
		mode = s.fault("recover", 0)
	}
	if mode == failBefore {
		return nil, fmt.Errorf("%s recover: %w", s.name, errInjected)
	}
	s.owner = h.inc
	// The fence rolls back every open transaction of a predecessor: what
	// was begun and not prepared is gone.
	for e := range s.begun {
		if _, ok := s.prepared[e]; !ok {
			delete(s.begun, e)
		}
	}
	if mode == failAfter {
		return nil, fmt.Errorf("%s recover (after fencing): %w", s.name, errInjected)
	}
	return s.inDoubt(), nil
}

// LastDecided reads without owning, like a read_committed consumer of the
// checkpoint topic: only the order of calls (after Recover fenced the
// predecessors) makes what it reads final.
func (h *handle) LastDecided(_ context.Context) (*checkpoint.Record, error) {
	s := h.s
	s.calls = append(s.calls, fmt.Sprintf("last_decided by %d", h.inc))
	if s.decisionLog != nil {
		return nil, fmt.Errorf("%s is not the decision log", s.name)
	}
	if s.fault != nil && s.fault("last_decided", 0) != noFault {
		return nil, fmt.Errorf("%s last decided: %w", s.name, errInjected)
	}
	if len(s.committed) == 0 {
		return nil, nil
	}
	return &checkpoint.Record{ID: s.lastCommitted()}, nil
}
