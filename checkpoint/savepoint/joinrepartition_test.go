package savepoint

import (
	"slices"
	"strings"
	"testing"

	"github.com/eoflow/pipeline/checkpoint"
)

// A group-mode job whose partitioned table is joined by a field reads the
// join's repartition topic as a source of its own
// (config.WithJoinRepartitions), and its savepoints hold that topic's
// offsets. DescribeConfig describes the job the engine runs, so the
// configuration as written takes such a savepoint back: the offsets of
// the repartition topic carry over, nothing is "read by no source". (It
// did not: `run --from-savepoint` refused every savepoint of such a job.)
func TestSavepointOfAJoinRepartitionRestores(t *testing.T) {
	yaml := strings.Replace(baseJob, "steps:\n", `tables:
  - {id: customers, topic: customers, mode: partitioned}
steps:
  - {id: enrich, join: {table: customers, key: n, as: c, how: left}}
`, 1) + "scale: {mode: group}\n"
	cfg := parseConfig(t, yaml)
	d := DescribeConfig(cfg)
	const topic = "parity-sum-enrich-repartition"
	var read bool
	for _, op := range d.Operators {
		read = read || op.Kind == KindSource && slices.Equal(op.Topics, []string{topic})
	}
	if !read {
		t.Fatalf("the description reads no %s: %+v", topic, d.Operators)
	}

	m, _ := savepointAt(t, yaml, []checkpoint.SourceOffset{
		{Topic: "numbers", Partition: 0, Offset: 10}, {Topic: "more", Partition: 0, Offset: 20},
		{Topic: topic, Partition: 0, Offset: 7}, {Topic: topic, Partition: 1, Offset: 3},
	}, nil)

	plan, err := CheckRestore(m, DescribeConfig(parseConfig(t, yaml)), RestoreOptions{})
	if err != nil {
		t.Fatalf("the job refuses its own savepoint: %v", err)
	}
	want := []checkpoint.SourceOffset{{Topic: "more", Partition: 0, Offset: 20}, {Topic: "numbers", Partition: 0, Offset: 10},
		{Topic: topic, Partition: 0, Offset: 7}, {Topic: topic, Partition: 1, Offset: 3}}
	if !slices.Equal(plan.Offsets, want) {
		t.Errorf("offsets restored: %v, want %v", plan.Offsets, want)
	}
	// The same job with the table broadcast has no repartition topic:
	// what was in flight there would be lost, so it is refused.
	broadcast := strings.Replace(yaml, ", mode: partitioned}", "}", 1)
	if _, err := CheckRestore(m, DescribeConfig(parseConfig(t, broadcast)), RestoreOptions{}); err == nil || !strings.Contains(err.Error(), topic) {
		t.Errorf("restored into the broadcast job: %v", err)
	}
}
