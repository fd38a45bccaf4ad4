package cli

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/eoflow/pipeline/config"
	"github.com/eoflow/pipeline/engine"
)

// progressEvery is how often `run` prints its progress line.
const progressEvery = 5 * time.Second

// progress is what one progress line reports: totals at one instant, read
// from what the job exposes anyway (its metrics registry and its status),
// so reporting adds nothing to the hot path.
type progress struct {
	at           time.Time
	state        engine.State
	guarantee    string
	in, out      float64 // records read, and written to the sinks' topics
	windowed     bool    // the job has a window, so records can be late
	late         float64 // late records: written to the late topic, or dropped
	deadLetters  float64
	lag          float64
	lagKnown     bool // a source task has reported lag
	checkpoint   uint64
	checkpointAt time.Time
}

// progressTopics says what of the job's output is late records: a
// window's late topic (the status names the dead-letter topics).
type progressTopics struct {
	late     map[string]bool
	windowed bool
}

func newProgressTopics(cfg *config.Config) progressTopics {
	t := progressTopics{late: map[string]bool{}}
	for _, s := range cfg.Steps {
		if s.Window != nil {
			t.windowed = true
			if s.Window.LateTopic != "" {
				t.late[s.Window.LateTopic] = true
			}
		}
	}
	return t
}

// readProgress samples the job's metrics (gathered from g) and status.
// Records written to a late topic count as late (when they became
// visible, as outputs do), with the dropped ones; dead letters by code.
func readProgress(g prometheus.Gatherer, topics progressTopics, st engine.Status, now time.Time) (progress, error) {
	p := progress{at: now, state: st.State, guarantee: st.Guarantee, windowed: topics.windowed,
		checkpoint: st.Checkpoint.LastCompleted, checkpointAt: st.Checkpoint.LastCompletedAt}
	families, err := g.Gather()
	if err != nil {
		return p, err
	}
	deadLetterTopics := map[string]bool{}
	for _, s := range st.Topology.Sinks {
		deadLetterTopics[s.DeadLetterTopic] = true
	}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			switch f.GetName() {
			case "pipeline_records_in_total":
				p.in += m.GetCounter().GetValue()
			case "pipeline_records_out_total":
				switch topic := label(m, "topic"); {
				case topics.late[topic]:
					p.late += m.GetCounter().GetValue()
				case !deadLetterTopics[topic]:
					p.out += m.GetCounter().GetValue()
				}
			case "pipeline_late_records_total":
				if label(m, "result") == "drop" {
					p.late += m.GetCounter().GetValue()
				}
			case "pipeline_dead_letter_records_total":
				p.deadLetters += m.GetCounter().GetValue()
			case "pipeline_consumer_lag_records":
				if strings.HasPrefix(label(m, "partition"), "-") {
					continue // the client's pseudo-partition of a failed fetch, not a partition
				}
				p.lag += m.GetGauge().GetValue()
				p.lagKnown = true
			}
		}
	}
	return p, nil
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// line is the progress line for p, with rates since prev:
//
//	progress: running  in 2000 (400/s)  out 2000 (400/s)  lag 0  checkpoint 57 (0.3s ago)  dead letters 1
//
// A windowed job's line has "late N" after out.
func (p progress) line(prev progress) string {
	var b strings.Builder
	fmt.Fprintf(&b, "progress: %s  in %.0f (%s)  out %.0f (%s)  ", p.state,
		p.in, rate(p.in-prev.in, p.at.Sub(prev.at)), p.out, rate(p.out-prev.out, p.at.Sub(prev.at)))
	if p.windowed {
		fmt.Fprintf(&b, "late %.0f  ", p.late)
	}
	b.WriteString("lag ")
	if p.lagKnown {
		fmt.Fprintf(&b, "%.0f", p.lag)
	} else {
		b.WriteString("?")
	}
	switch {
	case p.guarantee == "at_most_once":
		b.WriteString("  no checkpoints (at_most_once)")
	case p.checkpointAt.IsZero():
		fmt.Fprintf(&b, "  checkpoint %d", p.checkpoint)
		if p.checkpoint == 0 {
			b.WriteString(" (none yet)")
		}
	default:
		age := max(p.at.Sub(p.checkpointAt), 0)
		fmt.Fprintf(&b, "  checkpoint %d (%s ago)", p.checkpoint, age.Round(100*time.Millisecond))
	}
	fmt.Fprintf(&b, "  dead letters %.0f", p.deadLetters)
	return b.String()
}

// rate is n per second over d, as a whole number.
func rate(n float64, d time.Duration) string {
	if d <= 0 {
		return "-/s"
	}
	return fmt.Sprintf("%.0f/s", math.Round(n/d.Seconds()))
}

// reportProgress prints a progress line to w every interval until ctx
// ends. The first line's rates count from start.
func reportProgress(ctx context.Context, every time.Duration, g prometheus.Gatherer, topics progressTopics, job *engine.Job, w io.Writer) {
	prev := progress{at: time.Now()}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			p, err := readProgress(g, topics, job.Status(), now)
			if err != nil {
				fmt.Fprintf(w, "progress: reading the metrics: %v\n", err)
				continue
			}
			fmt.Fprintln(w, p.line(prev))
			prev = p
		}
	}
}

// isTerminal reports whether w is a terminal (a character device), where a
// person watches and a progress line helps.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
