package engine

import "github.com/twmb/franz-go/pkg/kgo"

// route1 routes rec as a source task does and returns what every worker
// got, and the worker of the first message (else the worker its dead
// letters would go to) (tests of jobs whose records
// each go to one worker).
func (r *router) route1(rec *kgo.Record) ([]message, int) {
	out := make([][]message, r.workers)
	r.route(rec, out)
	r.flushShuffle(out)
	var all []message
	first := -1
	for w, msgs := range out {
		if len(msgs) > 0 && first < 0 {
			first = w
		}
		all = append(all, msgs...)
	}
	if first < 0 {
		// Nothing sent: where the record's dead letters would go.
		first = r.deadLetterWorker(rec)
	}
	return all, first
}
