package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/config"
	"github.com/eoflow/pipeline/metrics"
	"github.com/eoflow/pipeline/schema"
)

// The schema registry formats (package schema), wired in: the decoders go
// into the chain, the sinks' encoders into the plan, the sinks' schemas
// are prepared before the first attempt, and a source task fetches the
// schemas of what it polled before it routes it.

// useSchemas gives the plan the job's schema.Set, if it needs one.
func (p *plan) useSchemas(cfg *config.Config, log *slog.Logger, m *metrics.Metrics) error {
	set, err := schema.New(cfg, log, m)
	if err != nil || set == nil {
		return err
	}
	p.schemas = set
	p.graph.SetInputs(set.Inputs())
	for i := range p.sinks {
		p.sinks[i].Enc = set.Sink(i)
	}
	return nil
}

// prepareSchemas registers or looks up the sinks' schemas, waiting for
// the registry while it gives no answer. A refusal stops the job before
// it wrote anything.
func (j *Job) prepareSchemas(ctx context.Context) error {
	err := j.plan.schemas.Prepare(ctx)
	if errors.Is(err, schema.ErrRefused) {
		err = fmt.Errorf("%w: %w", ErrUnfit, err)
		j.status.set(StateFailed, err)
	}
	if err != nil {
		return err
	}
	// A keyed aggregate's one sink, in Avro, with no key expression of
	// its own: the integer path writes its outputs straight as that
	// sink's value (operator.IntOutput), instead of JSON the sink reads
	// back.
	p := j.plan
	if p.graph.Linear() != nil && p.keyed && p.targets[0].window == nil && len(p.sinks) == 1 && p.sinks[0].Enc != nil && p.sinks[0].Key == nil {
		agg := p.targets[0].agg
		if out := p.sinks[0].Enc.IntOutput(agg.Names(), agg.Funcs()); out != nil {
			agg.SetIntOutput(out)
		}
	}
	return nil
}

// awaitSchemas makes sure the schemas that recs name are fetched before
// they are routed (decoding reads only the cache). While the registry
// gives no answer the task waits, the records held, unread: it keeps
// injecting the barriers the coordinator asks for (the records belong to
// the epoch after them), so checkpoints go on completing and nothing is
// lost or dead-lettered for the outage.
func (s *sourceTask) awaitSchemas(ctx context.Context, recs []*kgo.Record, to links) error {
	set := s.router.p.schemas
	if set == nil {
		return nil
	}
	// A repartition record needs no schema: the source side decoded the
	// input (shufflecodec.go), and the repartition topic is no source's.
	backoff := 100 * time.Millisecond
	for {
		err := set.Prefetch(ctx, recs)
		if err == nil || !schema.Unavailable(err) {
			return err
		}
		s.mu.Lock()
		pending := s.mu.pending
		s.mu.pending = nil
		s.mu.Unlock()
		for _, id := range pending {
			if on, err := s.injectBarrier(ctx, id, to); !on || err != nil {
				return err
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}
