package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/internal/kread"
)

// adminLine is the pipeline's log line naming its admin listener (started
// with ADMIN_LISTEN=127.0.0.1:0, so the port is its own pick):
// level=INFO msg="admin listening" metrics=http://127.0.0.1:41234/metrics api=...
var adminLine = regexp.MustCompile(`msg="admin listening" metrics=(http://\S+/metrics)`)

// metricsURL is the /metrics URL in the pipeline log at path, or "".
func metricsURL(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	if m := adminLine.FindSubmatch(b); m != nil {
		return string(m[1])
	}
	return ""
}

// scrape reads the Prometheus text at url, summed by metric name (over
// every label set: e.g. pipeline_state_keys over all operators).
func scrape(ctx context.Context, url string) (map[string]float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", url, resp.Status)
	}
	return parseProm(resp.Body)
}

// parseProm sums the samples of a Prometheus text exposition by metric
// name, labels dropped. Histogram buckets keep their _bucket name (their
// sum means nothing; nothing here reads it).
func parseProm(r io.Reader) (map[string]float64, error) {
	m := map[string]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		name, rest := line, ""
		if i := strings.IndexAny(line, "{ "); i >= 0 {
			name, rest = line[:i], line[i:]
		}
		if strings.HasPrefix(rest, "{") {
			j := strings.LastIndexByte(rest, '}')
			if j < 0 {
				return nil, fmt.Errorf("metrics line %q: no closing brace", line)
			}
			rest = rest[j+1:]
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			return nil, fmt.Errorf("metrics line %q: no value", line)
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			return nil, fmt.Errorf("metrics line %q: %w", line, err)
		}
		m[name] += v
	}
	return m, sc.Err()
}

// addCheckpointMetrics sets r's checkpoint and state fields from a
// scrape of the pipeline's metrics.
func addCheckpointMetrics(r *result, m map[string]float64) {
	n := m["pipeline_checkpoint_duration_seconds_count"]
	r.Checkpoints = int64(n)
	if n > 0 {
		r.CheckpointMeanMs = m["pipeline_checkpoint_duration_seconds_sum"] / n * 1000
	}
	if c := m["pipeline_checkpoint_size_bytes_count"]; c > 0 {
		r.CheckpointMeanBytes = m["pipeline_checkpoint_size_bytes_sum"] / c
	}
	r.StateKeys = int64(m["pipeline_state_keys"])
	r.StateBytes = int64(m["pipeline_state_bytes"])
}

// inputSizes counts the bytes (keys and values) of input topics: one read
// of each topic, then the runner's own probe records added as it writes
// them. A topic that holds other records than counted (someone else wrote
// to it, or a windowed probe's sentinels) is read again.
type inputSizes struct {
	topics map[string]*inputSize
}

type inputSize struct{ records, bytes int64 }

// bytes returns the bytes of the records of topic, which holds records
// (its end offsets summed).
func (s *inputSizes) bytes(ctx context.Context, brokers, topic string, records int64) (int64, error) {
	if s.topics == nil {
		s.topics = map[string]*inputSize{}
	}
	if c, ok := s.topics[topic]; ok && c.records == records {
		return c.bytes, nil
	}
	var c inputSize
	start := time.Now()
	err := kread.All(ctx, []kgo.Opt{kgo.SeedBrokers(strings.Split(brokers, ",")...)}, topic, func(r *kgo.Record) error {
		c.records++
		c.bytes += int64(len(r.Key) + len(r.Value))
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("counting the bytes of %s: %w", topic, err)
	}
	log.Printf("runner: %s holds %d records, %d bytes (read in %s)", topic, c.records, c.bytes, time.Since(start).Round(time.Millisecond))
	s.topics[topic] = &c
	return c.bytes, nil
}

// add counts records of bytes appended to topic by the runner.
func (s *inputSizes) add(topic string, records, bytes int64) {
	if c, ok := s.topics[topic]; ok {
		c.records += records
		c.bytes += bytes
	}
}
