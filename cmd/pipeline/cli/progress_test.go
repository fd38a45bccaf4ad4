package cli

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/eoflow/pipeline/config"
	"github.com/eoflow/pipeline/engine"
	"github.com/eoflow/pipeline/metrics"
)

func TestProgressLine(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	prev := progress{at: t0, in: 1000, out: 900, deadLetters: 1}
	tests := []struct {
		name string
		p    progress
		want string
	}{
		{
			name: "running",
			p: progress{at: t0.Add(5 * time.Second), state: engine.StateRunning, guarantee: "exactly_once",
				in: 3000, out: 2900, deadLetters: 3, lag: 42, lagKnown: true,
				checkpoint: 57, checkpointAt: t0.Add(4700 * time.Millisecond)},
			want: "progress: running  in 3000 (400/s)  out 2900 (400/s)  lag 42  checkpoint 57 (300ms ago)  dead letters 3",
		},
		{
			name: "before the first checkpoint and poll",
			p:    progress{at: t0.Add(2 * time.Second), state: engine.StateStarting, guarantee: "exactly_once", in: 1000, out: 900, deadLetters: 1},
			want: "progress: starting  in 1000 (0/s)  out 900 (0/s)  lag ?  checkpoint 0 (none yet)  dead letters 1",
		},
		{
			name: "restored checkpoint, not taken by this process",
			p:    progress{at: t0.Add(time.Second), state: engine.StateRunning, guarantee: "at_least_once", in: 1000, out: 900, checkpoint: 9, lagKnown: true},
			want: "progress: running  in 1000 (0/s)  out 900 (0/s)  lag 0  checkpoint 9  dead letters 0",
		},
		{
			name: "at_most_once",
			p:    progress{at: t0.Add(500 * time.Millisecond), state: engine.StateRunning, guarantee: "at_most_once", in: 1500, out: 1300, lagKnown: true},
			want: "progress: running  in 1500 (1000/s)  out 1300 (800/s)  lag 0  no checkpoints (at_most_once)  dead letters 0",
		},
		{
			name: "a windowed job: late side outputs are not results",
			p: progress{at: t0.Add(5 * time.Second), state: engine.StateRunning, guarantee: "exactly_once",
				in: 3000, out: 1100, windowed: true, late: 250, lagKnown: true,
				checkpoint: 57, checkpointAt: t0.Add(4700 * time.Millisecond)},
			want: "progress: running  in 3000 (400/s)  out 1100 (40/s)  late 250  lag 0  checkpoint 57 (300ms ago)  dead letters 0",
		},
		{
			name: "a minute since the last checkpoint",
			p: progress{at: t0.Add(90 * time.Second), state: engine.StateRestarting, guarantee: "exactly_once", in: 1000, out: 900,
				checkpoint: 3, checkpointAt: t0.Add(30 * time.Second)},
			want: "progress: restarting  in 1000 (0/s)  out 900 (0/s)  lag ?  checkpoint 3 (1m0s ago)  dead letters 0",
		},
	}
	for _, tt := range tests {
		if got := tt.p.line(prev); got != tt.want {
			t.Errorf("%s:\n got %s\nwant %s", tt.name, got, tt.want)
		}
	}
}

// The progress line takes its numbers from the job's metrics: records in,
// records out to the sinks' topics (dead-letter topics are not output),
// lag summed over partitions, dead letters over codes.
func TestReadProgressFromMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := metrics.New(reg, "job")
	m.Input("in-a").Add(70, 700)
	m.Input("in-b").Add(30, 300)
	m.Output("out").Add(90, 900)
	m.Output("job-dead-letter").Add(4, 40)
	m.DeadLettered("decode")
	m.DeadLettered("decode")
	m.DeadLettered("eval")
	m.SetLag("in-a", 0, 5)
	m.SetLag("in-a", 1, 7)
	m.SetLag("", -1, 1000) // the client's pseudo-partition of a failed fetch
	at := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	st := engine.Status{State: engine.StateRunning, Guarantee: "exactly_once",
		Topology:   engine.Topology{Sinks: []engine.SinkInfo{{Topic: "out", DeadLetterTopic: "job-dead-letter"}}},
		Checkpoint: engine.CheckpointState{LastCompleted: 8, LastCompletedAt: at.Add(-time.Second)}}
	p, err := readProgress(reg, progressTopics{}, st, at)
	if err != nil {
		t.Fatal(err)
	}
	want := progress{at: at, state: engine.StateRunning, guarantee: "exactly_once", in: 100, out: 90, deadLetters: 3,
		lag: 12, lagKnown: true, checkpoint: 8, checkpointAt: at.Add(-time.Second)}
	if p != want {
		t.Fatalf("readProgress =\n%+v\nwant\n%+v", p, want)
	}
}

// A windowed job's late records are counted apart from its results: those
// written to the late topic once visible (side_output), and those dropped.
func TestReadProgressCountsLateRecordsApart(t *testing.T) {
	cfg, err := config.Parse("c.yaml", []byte(`name: job
kafka:
  brokers: [localhost:9092]
sources:
  - topics: [in]
    event_time: {}
steps:
  - key_by: _key
  - window:
      tumbling: 10s
      values:
        n: count()
sinks:
  - topic: out
`), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	m := metrics.New(reg, "job")
	m.Input("in").Add(100, 1000)
	m.Output("out").Add(20, 200)
	m.Output("job-late").Add(7, 70)
	m.Output("job-dead-letter").Add(1, 10)
	for range 7 {
		m.LateRecord("w", "side_output") // counted when read; the late topic's outputs when visible
	}
	m.LateRecord("w", "drop")
	m.LateRecord("w", "drop")
	at := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	st := engine.Status{State: engine.StateRunning, Guarantee: "exactly_once",
		Topology: engine.Topology{Sinks: []engine.SinkInfo{{Topic: "out", DeadLetterTopic: "job-dead-letter"}}}}
	p, err := readProgress(reg, newProgressTopics(cfg), st, at)
	if err != nil {
		t.Fatal(err)
	}
	if p.out != 20 || p.late != 9 || !p.windowed {
		t.Fatalf("out %v, late %v (windowed %v); want out 20, late 9 (7 written, 2 dropped)", p.out, p.late, p.windowed)
	}
}
