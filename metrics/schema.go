package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// schemaRegistry is the job's use of its schema registry
// (schema_registry): the requests that failed, the time the job spent
// waiting for an unreachable registry, and the schemas it holds.
type schemaRegistry struct {
	errors  *prometheus.CounterVec
	waiting prometheus.Gauge
	waited  prometheus.Counter
	cached  prometheus.Gauge
}

// schemaRegistryOps are the requests a job makes of its registry, each a
// series of pipeline_schema_registry_errors_total from the start.
func schemaRegistryOps() []string { return []string{"fetch", "register", "lookup"} }

func newSchemaRegistry(f factory) schemaRegistry {
	s := schemaRegistry{
		errors:  f.counterVec("schema_registry_errors_total", "Schema registry requests that failed to get an answer (unreachable, timed out, a 5xx, refused credentials), by request: fetch (a schema by id), register, lookup. The job waits and retries them; nothing is dead-lettered for it.", "op"),
		waiting: f.gauge("schema_registry_waiting", "1 while the job waits for an unreachable schema registry (its sources hold their records), 0 otherwise."),
		waited:  f.counter("schema_registry_wait_seconds_total", "Time the job spent waiting for an unreachable schema registry."),
		cached:  f.gauge("schema_registry_schemas_cached", "Schemas (by id) the job has fetched and holds, unknown ids included."),
	}
	for _, op := range schemaRegistryOps() {
		s.errors.WithLabelValues(op)
	}
	return s
}

// SchemaRegistryError counts a failed registry request of kind op.
func (m *Metrics) SchemaRegistryError(op string) { m.sr.errors.WithLabelValues(op).Inc() }

// SchemaRegistryWaiting says whether the job waits for its registry now.
func (m *Metrics) SchemaRegistryWaiting(waiting bool) {
	v := 0.0
	if waiting {
		v = 1
	}
	m.sr.waiting.Set(v)
}

// SchemaRegistryWaited adds d to the time spent waiting for the registry.
func (m *Metrics) SchemaRegistryWaited(d time.Duration) { m.sr.waited.Add(d.Seconds()) }

// SchemaRegistryCached sets how many schemas the job holds.
func (m *Metrics) SchemaRegistryCached(n int) { m.sr.cached.Set(float64(n)) }
