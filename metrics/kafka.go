package metrics

import (
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/plugin/kprom"
)

// KafkaHooks returns the option that gives one franz-go client its metrics
// (plugin/kprom): connections, bytes and errors per broker, produced and
// fetched records and bytes per topic, request latency, buffered records,
// all named pipeline_kafka_* with the labels pipeline (the job) and
// client=client. Handler serves them; the Registerer given to New does not
// hold them.
//
// client names the client's role ("source", "producer", "admin"), not an
// instance: a role keeps its series across restarts. When two open clients
// share a role, only the newer one's series are exported (an overlap while
// a restart replaces a client must not break the scrape); give clients that
// live side by side, like a producer pool, distinct roles.
//
// The series live while the client does: closing it removes them.
func (m *Metrics) KafkaHooks(client string) kgo.Opt {
	kp := kprom.NewMetrics("pipeline",
		kprom.Subsystem("kafka"),
		// Registry(nil): kprom is a plain collector, gathered through
		// m.kafka; registering each client's metrics on the job's registry
		// would panic on the second client of a role.
		kprom.Registry(nil),
		kprom.WithStaticLabel(prometheus.Labels{"pipeline": m.job, "client": client}),
		kprom.FetchAndProduceDetail(kprom.ByTopic, kprom.Records, kprom.UncompressedBytes, kprom.ConsistentNaming),
		kprom.Histograms(kprom.RequestDurationE2E),
	)
	// kp first: kgo calls hooks in order, so kp has built its collectors
	// before the client joins the set.
	return kgo.WithHooks(kp, &kafkaClient{set: m.kafka, role: client, kp: kp})
}

// kafkaClient exports its kprom metrics while its client is open.
type kafkaClient struct {
	set  *kafkaClients
	role string
	kp   *kprom.Metrics
	reg  *prometheus.Registry // kp alone, from OnNewClient on
}

func (c *kafkaClient) OnNewClient(*kgo.Client) {
	reg := prometheus.NewRegistry()
	if reg.Register(c.kp) != nil {
		return // cannot happen: kp's descriptors are distinct
	}
	c.reg = reg
	c.set.add(c)
}

func (c *kafkaClient) OnClientClosed(*kgo.Client) { c.set.remove(c) }

// kafkaClients gathers the metrics of every open client. It is a Gatherer
// rather than a Collector because it renames families, which a Collector
// cannot do to metrics it did not build.
type kafkaClients struct {
	mu   sync.Mutex
	open []*kafkaClient // in the order they opened
}

func (s *kafkaClients) add(c *kafkaClient) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.open = append(s.open, c)
}

func (s *kafkaClients) remove(c *kafkaClient) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, o := range s.open {
		if o == c {
			s.open = append(s.open[:i], s.open[i+1:]...)
			return
		}
	}
}

// Gather merges the newest open client of each role.
func (s *kafkaClients) Gather() ([]*dto.MetricFamily, error) {
	s.mu.Lock()
	var gs prometheus.Gatherers
	seen := make(map[string]bool, len(s.open))
	for i := len(s.open) - 1; i >= 0; i-- {
		if c := s.open[i]; !seen[c.role] {
			seen[c.role] = true
			gs = append(gs, c.reg)
		}
	}
	s.mu.Unlock()
	fams, err := gs.Gather()
	for _, mf := range fams {
		// kprom exports the buffered record counts as gauges named
		// ..._records_total; the _total suffix promises a counter, and
		// promtool check metrics objects.
		if mf.GetType() != dto.MetricType_COUNTER && strings.HasSuffix(mf.GetName(), "_total") {
			name := strings.TrimSuffix(mf.GetName(), "_total")
			mf.Name = &name
		}
	}
	return fams, err
}
