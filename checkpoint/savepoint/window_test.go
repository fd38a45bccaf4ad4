package savepoint

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/eoflow/pipeline/checkpoint"
	"github.com/eoflow/pipeline/config"
)

const windowJob = `name: w
kafka: {brokers: ["x:1"]}
sources:
  - id: numbers
    topics: [in]
    event_time: {timestamp: ts}
steps:
  - key_by: k
  - id: counts
    window:
      SHAPE
      allowed_lateness: LATENESS
      values: {n: count()}
sinks: [{topic: out}]
`

func describeWindow(t *testing.T, shape, lateness string) *Descriptor {
	t.Helper()
	y := strings.NewReplacer("SHAPE", shape, "LATENESS", lateness).Replace(windowJob)
	cfg, err := config.Parse("c.yaml", []byte(y), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	return DescribeConfig(cfg)
}

// A restart into a changed window shape is refused with the fix; a
// changed allowed_lateness is not.
func TestRestartWithChangedWindow(t *testing.T) {
	was := describeWindow(t, "tumbling: 10s", "0s")
	rec := &checkpoint.Record{ID: 7, Job: "w", KeyGroups: was.KeyGroups, Guarantee: was.Guarantee,
		Offsets:   []checkpoint.SourceOffset{{Topic: "in", Partition: 0, Offset: 5}},
		Operators: was.Checkpointed(),
		EventTime: &checkpoint.EventTime{Watermark: 1000, Partitions: []checkpoint.PartitionTime{{Topic: "in", Partition: 0, MaxEventTime: 3000}}},
	}
	if _, err := CheckRestart(rec, describeWindow(t, "tumbling: 10s", "5s")); err != nil {
		t.Fatalf("a changed lateness was refused: %v", err)
	}
	for shape, want := range map[string]string{
		"tumbling: 5s":                      `operator "counts": window was tumbling 10s, the config has tumbling 5s (its open windows are stored by their start and end)`,
		"hopping: {size: 10s, advance: 5s}": `window was tumbling 10s, the config has hopping 10s every 5s`,
		"session: {gap: 10s}":               `window was tumbling 10s, the config has session gap 10s`,
	} {
		_, err := CheckRestart(rec, describeWindow(t, shape, "0s"))
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "put back the window the checkpoint was taken with") {
			t.Errorf("%s: %v", shape, err)
		}
	}
	m := manifestOf(rec)
	if op := m.Operator("counts"); op == nil || op.Kind != KindWindow || op.Aggregate.Window.String() != "tumbling 10s" {
		t.Fatalf("manifest of the record: %+v", op)
	}
	b, err := json.Marshal(m.EventTime)
	if err != nil || string(b) != `{"watermark":1000,"partitions":[{"topic":"in","partition":0,"max_event_time":3000}]}` {
		t.Fatalf("event time JSON: %s %v", b, err)
	}
	none := EventTimeOf(&checkpoint.EventTime{Watermark: checkpoint.NoEventTime, Partitions: []checkpoint.PartitionTime{{Topic: "in", MaxEventTime: checkpoint.NoEventTime}}})
	if b, _ := json.Marshal(none); string(b) != `{"watermark":null,"partitions":[{"topic":"in","partition":0,"max_event_time":null}]}` {
		t.Fatalf("none yet: %s", b)
	}
	if back := none.Checkpoint(); back.Watermark != checkpoint.NoEventTime || back.Partitions[0].MaxEventTime != checkpoint.NoEventTime {
		t.Fatalf("round trip of none: %+v", back)
	}
}
