package savepoint

import (
	"fmt"
	"strings"

	"github.com/eoflow/pipeline/config"
)

// IntervalJoinFunc is the func of the one value an interval join is
// described by: its state is keyed (by the join key) as an aggregate's
// is, and checkpoint records and manifests carry it as an aggregate whose
// key_by is "key | other_key" and whose one value names the join
// (`as: interval_join(<stream> within -before..+after <how>)`), so a
// restart or restore that changes what its buffers mean is refused as a
// changed aggregate is, with no new kind in the record format.
const IntervalJoinFunc = "interval_join"

// intervalJoinDesc describes interval join j.
func intervalJoinDesc(j *config.Join) *AggregateDesc {
	var before, after string
	if w := j.Within; w != nil {
		before, after = w.Before.String(), w.After.String()
	}
	return &AggregateDesc{
		KeyBy: strings.TrimSpace(j.Key) + " | " + strings.TrimSpace(j.OtherKey),
		Values: []Value{{Name: j.As, Func: IntervalJoinFunc,
			Arg: fmt.Sprintf("%s within -%s..+%s %s", j.Stream, before, after, j.How)}},
	}
}
