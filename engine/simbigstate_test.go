package engine

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/checkpoint"
	"github.com/eoflow/pipeline/checkpoint/kstore"
	"github.com/eoflow/pipeline/config"
	"github.com/eoflow/pipeline/state"
)

// The simulation of a key whose state outgrows a record (issue 31, item
// 15): session-windows with its state and checkpoint topics at the
// smallest max.message.bytes a producer takes (512 bytes), and one input
// partition silent until the last inputs, so that the watermark stays
// back and every key's sessions stay open: each key's value grows to many
// records' worth, and the checkpoint record past one record too. The
// model refuses any record over the limit, as the brokers do
// (MESSAGE_TOO_LARGE), so a job that wrote one would fail every attempt
// at that checkpoint and never end. Every invariant of the windowed
// simulation must hold, with crashes, restarts and savepoints.

const (
	// simSmallRecord is the state and checkpoint topics' max.message.bytes.
	simSmallRecord = 512
	// simSilentUntil is how many inputs are left when the silent partition
	// gets its first.
	simSilentUntil = 8
)

// simPieces counts the pieces a run produced.
type simPieces struct{ state, checkpoint int }

func (p *simPieces) count(r *kgo.Record) {
	switch {
	case state.IsPiece(r.Key):
		p.state++
	case strings.HasPrefix(string(r.Key), "#piece/"):
		p.checkpoint++
	}
}

// growState makes r's keys outgrow a record: small topics, a silent
// partition, and more inputs.
func (r *simRun) growState() {
	r.silent = true
	r.w.maxBytes = map[string]int32{
		kstore.StateTopic(r.job.name):    simSmallRecord,
		checkpoint.TopicName(r.job.name): simSmallRecord,
	}
	r.w.pieces = &simPieces{}
	for n := int64(len(r.pending)); n < 200; n++ {
		r.pending = append(r.pending, simInput{n: n + 1, bad: r.w.rng.IntN(40) == 0})
	}
	r.drawEventTimes()
}

// TestSimulationSplitsLargeState runs big-state session windows; the
// state topic and the checkpoint topic must have held pieces in some of
// the runs, or the test proves nothing. Five more values per window make
// the values, and the checkpoint record's description of the operator,
// larger.
func TestSimulationSplitsLargeState(t *testing.T) {
	job := sessionWindowsJob
	job.bigState = true
	job.config = strings.Replace(job.config, "        sum: sum(n)\n",
		"        sum: sum(n)\n        smallest: min(n)\n        largest: max(n)\n        mean: avg(n)\n        first_n: first(n)\n        last_n: last(n)\n", 1)
	if job.config == sessionWindowsJob.config {
		t.Fatal("the job's values are not where this test adds to them")
	}
	seeds := simDefaultSeeds(100)
	dir := simTempDir(t)
	for _, g := range []config.Guarantee{config.ExactlyOnce, config.AtLeastOnce} {
		t.Run(string(g), func(t *testing.T) {
			statePieces, checkpointPieces := 0, 0
			for seed := uint64(1); seed <= uint64(seeds); seed++ {
				if *simSeed != 0 && seed != *simSeed {
					continue
				}
				r, err := simulate(t, seed, job, g, noPlantedBug, dir+"/"+string(g))
				if *simSeed != 0 {
					for _, line := range r.w.trace {
						t.Log(line)
					}
				}
				if err != nil {
					t.Fatalf("seed %d (%d steps, %d crashes, %d restarts): %v\nreplay: go test ./engine -run 'TestSimulationSplitsLargeState/%s' -sim.seed=%d -v",
						seed, r.steps, r.crashes, r.restarts, err, g, seed)
				}
				if r.w.pieces.state > 0 {
					statePieces++
				}
				if r.w.pieces.checkpoint > 0 {
					checkpointPieces++
				}
			}
			if *simSeed == 0 && (statePieces == 0 || checkpointPieces == 0) {
				t.Fatalf("of %d runs, %d wrote a value in pieces and %d a checkpoint record: the simulation does not grow them", seeds, statePieces, checkpointPieces)
			}
			t.Logf("of %d runs, %d wrote a value in pieces and %d a checkpoint record", seeds, statePieces, checkpointPieces)
		})
	}
}
