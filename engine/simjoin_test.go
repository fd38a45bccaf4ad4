package engine

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/config"
	"github.com/eoflow/pipeline/internal/testkit/memkafka"
	"github.com/eoflow/pipeline/source"
)

// The simulation's join job: the numbers enriched from the table "tiers"
// (key "k" + n mod 5) and summed per tier. The table is written before
// the run: k2 is deleted (a tombstone) and k4 never written, so both count
// under "none". While the job runs, the table keeps changing without
// changing any tier: k0, k1 and k3 written again with their tiers, a key
// no number looks up written and deleted, and a transaction that would
// make k0 "platinum" aborted. So the oracle holds whatever the arrival
// order: every number counts under its key's tier exactly once, through
// crashes in the table's read to its end and in its updates.
const joinYAML = `name: ${JOB_NAME}
guarantee: ${GUARANTEE}
kafka:
  brokers: ${KAFKA_BROKERS}
checkpoint:
  interval: ${CHECKPOINT_INTERVAL}
sources:
  - id: numbers
    topics: ${INPUT_TOPIC}
tables:
  - id: tiers
    topic: tiers
steps:
  - id: enrich
    join: {table: tiers, key: '"k" + string(n % 5)', as: t, how: left}
  - id: by-tier
    key_by: 't == nil ? "none" : t.tier'
  - id: sums
    aggregate: {values: {count: count(), sum: sum(n)}}
sinks:
  - topic: ${OUTPUT_TOPIC}
admin:
  listen: ${ADMIN_LISTEN}
`

// joinTiers is the tier each key of the table has throughout the run.
var joinTiers = []string{"gold", "silver", "none", "bronze", "none"}

var joinSimJob = simJob{
	name: "join", config: joinYAML, table: true,
	keyOf: func(n int64) string { return joinTiers[n%5] },
	// exactly_once only, for the CI's time: the commit paths are the
	// other jobs'.
	guarantees: []config.Guarantee{config.ExactlyOnce},
}

// createTable creates the table's topic and writes what it holds before
// the job first starts (also in a continuation's new cluster).
func (r *simRun) createTable(t testing.TB) {
	if err := r.w.kafka.CreateTopic("tiers", 2); err != nil {
		t.Fatal(err)
	}
	for _, row := range []struct{ key, value string }{
		{"k0", `{"tier":"gold"}`}, {"k1", `{"tier":"silver"}`}, {"k2", `{"tier":"gold"}`},
		{"k3", `{"tier":"bronze","v":0}`}, {"k2", ""},
	} {
		r.appendTable(row.key, row.value)
	}
}

// appendTable appends one record to the table's topic ("" a tombstone).
func (r *simRun) appendTable(key, value string) {
	rec := memkafka.Record{Topic: "tiers", Key: []byte(key), Timestamp: r.clock}
	if value != "" {
		rec.Value = []byte(value)
	}
	rec.Partition = r.w.toModel(fromModel(rec)).Partition
	if _, err := r.w.kafka.Append(rec); err != nil {
		panic(err) // the topic exists: a bug of the harness
	}
}

// writeTable changes the table without changing a tier.
func (r *simRun) writeTable() {
	r.tableWrites++
	v := r.tableWrites
	switch v % 4 {
	case 0:
		k := []int{0, 1, 3}[r.w.rng.IntN(3)]
		r.appendTable(fmt.Sprintf("k%d", k), fmt.Sprintf(`{"tier":%q,"v":%d}`, joinTiers[k], v))
	case 1:
		r.appendTable("zz", fmt.Sprintf(`{"tier":"unused","v":%d}`, v))
	case 2:
		r.appendTable("zz", "")
	case 3:
		r.w.writeAbortedTier("k0", r.clock)
	}
	r.w.log("table write %d", v)
}

// writeAbortedTier writes key's tier "platinum" to the table's topic in a
// transaction that aborts: a read_committed table never shows it.
func (w *world) writeAbortedTier(key string, ts time.Time) {
	p, err := w.kafka.InitProducer("tiers-writer", time.Minute)
	if err != nil {
		panic(err)
	}
	rec := memkafka.Record{Topic: "tiers", Key: []byte(key), Value: []byte(`{"tier":"platinum"}`), Timestamp: ts}
	rec.Partition = w.toModel(fromModel(rec)).Partition
	if err := p.Begin(); err != nil {
		panic(err)
	}
	if _, err := p.Produce(rec); err != nil {
		panic(err)
	}
	if err := p.End(false); err != nil {
		panic(err)
	}
}

// tableReader opens the simulation's readers of a table's partitions.
func (r *simRun) tableReader(offsets map[source.TopicPartition]int64) (recordReader, error) {
	return r.w.tableReader(offsets), nil
}

var _ tableCluster = simCluster{}

// ReadTable reads a table's topic to its last stable offset, each
// partition from where read says (a crash may hit it).
func (c simCluster) ReadTable(_ context.Context, topic string, read func(int32) (int64, bool), fn func(*kgo.Record) error) (map[int32]int64, error) {
	after := c.w.io("read table " + topic)
	n, err := c.w.kafka.Partitions(topic)
	if err != nil {
		return nil, err
	}
	ends := map[int32]int64{}
	for p := range int32(n) {
		start, ok := read(p)
		if !ok {
			continue
		}
		tp := memkafka.TP{Topic: topic, Partition: p}
		o, err := c.w.kafka.EndOffsets(tp)
		if err != nil {
			return nil, err
		}
		for from := start; from < o.LastStable; {
			recs, next, err := c.w.kafka.ReadCommitted(tp, from, 1000)
			if err != nil {
				return nil, err
			}
			for _, rec := range recs {
				if rec.Offset >= o.LastStable {
					break
				}
				if err := fn(fromModel(rec)); err != nil {
					return nil, err
				}
			}
			if next == from {
				break
			}
			from = next
		}
		ends[p] = o.LastStable
	}
	after()
	return ends, nil
}
