package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/eoflow/pipeline/config"
	"github.com/eoflow/pipeline/internal/testkit/memkafka"
	"github.com/eoflow/pipeline/operator"
	"github.com/eoflow/pipeline/source"
)

// The group simulation's table job: the same keyed sums, with the group
// key read from the broadcast table tiers (key "k" + n mod 5, value
// {"tier": that key}), so the oracle is the other schedules'. Every
// attempt of every process reads the table to its end; the table also
// holds a record that is not JSON, which the group must dead-letter
// exactly once (tableduty.go: one member on duty per table partition,
// its position committed to the group with its epochs), whatever the
// crashes, zombies and rebalances.

const gsimTable = "tiers"

// gsimTableYAML is parity-sum keyed through the table.
func gsimTableYAML(yaml string) string {
	yaml = strings.Replace(yaml, "steps:\n", `tables:
  - {id: tiers, topic: tiers}
steps:
  - id: enrich
    join: {table: tiers, key: '"k" + string(n % 5)', as: t}
`, 1)
	return strings.Replace(yaml, `'"k" + string(n % 5)'`+"\n", "'t.tier'\n", 1)
}

// useTable makes s the table job: its configuration, and the table's
// topic, written before any process starts.
func (s *gsim) useTable() { s.useTableAs(config.TableBroadcast) }

// useTableAs is useTable with the table in mode: partitioned too, where
// the join's key (a field, not the record key) makes the job repartition
// the stream by it through the topic s.joinTopic (created here, as
// ensureJoinTopics does, with the table's partition count).
func (s *gsim) useTableAs(mode config.TableMode) {
	s.table, s.tableParts = true, 2
	if mode == config.TablePartitioned {
		// As many as the stream topic's: a table dealt out like the
		// stream's partitions (plantedJoinTableFollowsStream) is not
		// refused for its count, and meets the wrong keys.
		s.tableParts = gsimInParts
	}
	prev := s.cfg
	yaml := strings.Replace(paritySumYAML, `'n % 2 == 0 ? "even" : "odd"'`, `'"k" + string(n % 5)'`, 1)
	if mode == config.TablePartitioned {
		s.joinTopic = config.JoinRepartitionTopic(gsimJob, "enrich")
		if err := s.w.kafka.CreateTopic(s.joinTopic, s.tableParts); err != nil {
			s.t.Fatal(err)
		}
	}
	env := map[string]string{
		"KAFKA_BROKERS": "127.0.0.1:9", "JOB_NAME": gsimJob, "INPUT_TOPIC": "in", "OUTPUT_TOPIC": "out",
		"GUARANTEE": "exactly_once", "CHECKPOINT_INTERVAL": prev.Checkpoint.Interval.String(),
		"ADMIN_LISTEN": "off", "SCALE_MODE": "group", "SCALE_PARTITIONS": "3", "SESSION_TIMEOUT": gsimSession.String(),
	}
	tableYAML := gsimTableYAML(yaml)
	if mode == config.TablePartitioned {
		tableYAML = strings.Replace(tableYAML, "{id: tiers, topic: tiers}", "{id: tiers, topic: tiers, mode: partitioned}", 1)
		// A map before the join: the repartition topic carries the
		// record it made, encoded anew, not the input's bytes.
		tableYAML = strings.Replace(tableYAML, "steps:\n", "steps:\n  - id: reshape\n    map: {n: n, twice: 'n * 2'}\n", 1)
	}
	s.cfg = parseConfig(s.t, []byte(tableYAML), env)
	if mode == config.TablePartitioned && (s.cfg.Steps[0].ID != "reshape" || s.cfg.Steps[1].Join == nil) {
		s.t.Fatalf("the repartitioned table job's steps: %+v", s.cfg.Steps)
	}
	s.cfg.Workers, s.cfg.Checkpoint.KeyGroups, s.cfg.Checkpoint.Timeout = prev.Workers, prev.Checkpoint.KeyGroups, prev.Checkpoint.Timeout
	if err := s.w.kafka.CreateTopic(gsimTable, s.tableParts); err != nil {
		s.t.Fatal(err)
	}
	for k := range gsimKeys {
		key := "k" + string(rune('0'+k))
		s.appendTable(key, `{"tier":"`+key+`"}`)
	}
	s.appendTable("zz", `{"tier":`) // not JSON: one dead letter
	s.tableBad = 1
}

// appendTable appends one record to the table's topic.
func (s *gsim) appendTable(key, value string) {
	rec := memkafka.Record{Topic: gsimTable, Key: []byte(key), Value: []byte(value), Timestamp: s.clock}
	rec.Partition = s.w.toModel(fromModel(rec)).Partition
	if s.joinTopic != "" {
		// Where Kafka's default partitioner puts the key, as the
		// members' producers put the join keys in the join's topic.
		rec.Partition = kafkaPartition(rec.Key, s.tableParts)
	}
	if _, err := s.w.kafka.Append(rec); err != nil {
		panic(err) // the topic exists: a bug of the harness
	}
}

// loadTable reads the table of the table job for attempt a, as runAttempt
// does after the restore.
func (s *gsim) loadTable(a *attempt) error {
	if !s.table && !s.asOf {
		return nil
	}
	return a.loadTables(context.Background(), func(offsets map[source.TopicPartition]int64) (recordReader, error) {
		return s.w.tableReader(offsets), nil
	})
}

// tablesAtEnd checks the rule every attempt start must keep, whether it
// read its tables from the start or kept them from the last generation
// (tablekept.go): each table stands at its topic's last stable offset,
// every partition it reads (a partitioned table: those of the member's
// stream partitions), and holds exactly the topic's latest value of every
// key up to there. It counts the attempts that kept their tables.
func (s *gsim) tablesAtEnd(p *gproc, a *attempt) error {
	if a.tables == nil {
		return nil
	}
	if a.tables.kept > 0 {
		s.counts["attempts that kept their tables"]++
		s.log("%s: kept %d tables from the last generation", p.id, a.tables.kept)
	}
	for _, tt := range a.tables.tasks {
		n, err := s.w.kafka.Partitions(tt.cfg.Topic)
		if err != nil {
			return err
		}
		want := map[string]string{}
		for part := range int32(n) {
			if _, reads := tt.mu.next[part]; !reads && tt.cfg.Mode == config.TablePartitioned {
				continue // another member's partition of the table
			}
			tp := memkafka.TP{Topic: tt.cfg.Topic, Partition: part}
			o, err := s.w.kafka.EndOffsets(tp)
			if err != nil {
				return err
			}
			if at := tt.mu.next[part]; at != o.LastStable {
				return s.violation("%s: table %s begins the attempt at offset %d of partition %d; the topic's last stable offset is %d",
					p.id, tt.cfg.ID, at, part, o.LastStable)
			}
			for from := int64(0); from < o.LastStable; {
				recs, next, err := s.w.kafka.ReadCommitted(tp, from, 1000)
				if err != nil {
					return err
				}
				for _, r := range recs {
					if r.Offset >= o.LastStable {
						break
					}
					if skip, _ := tt.table.Check(r.Key, r.Value); skip != "" {
						continue
					}
					if r.Value == nil {
						delete(want, string(r.Key))
					} else {
						want[string(r.Key)] = string(r.Value)
					}
				}
				if next == from {
					break
				}
				from = next
			}
		}
		if got := tt.table.Len(); got != int64(len(want)) {
			return s.violation("%s: table %s begins the attempt with %d keys; its topic holds %d", p.id, tt.cfg.ID, got, len(want))
		}
		for k, v := range want {
			var dec any
			if err := json.Unmarshal([]byte(v), &dec); err != nil {
				return err
			}
			if got, ok := tt.table.Lookup(k); !ok || fmt.Sprint(got) != fmt.Sprint(dec) {
				return s.violation("%s: table %s begins the attempt with %s = %v; its topic says %s", p.id, tt.cfg.ID, k, got, v)
			}
		}
	}
	return nil
}

// tableDeadAtEnd: the table's bad record was dead-lettered once.
func (s *gsim) tableDeadAtEnd() error {
	if s.table && len(s.view.tableDead) != s.tableBad {
		return s.violation("%d dead letters of the table's records committed; it holds %d bad records", len(s.view.tableDead), s.tableBad)
	}
	return nil
}

// playTable runs the faults schedule on the table job, whose table moves
// key k0 to a new tier halfway through. The schedule steps no table
// task (tableTask.poll) before every input is written: each attempt joins with the table as it read it
// at its start, so processes whose attempts began on either side of the
// move hold different values for k0, and a record's source side and its
// key group's owner may disagree. The owner must use what the source side
// found (router.shuffleOut carries it): the source side routed the record
// by it. Each input of k0 then counts under k0 or k0x, once.
func playTable(s *gsim) error {
	s.useTable()
	s.moveTier = true
	return playFaults(s)
}

// maybeMoveTier moves k0 to tier k0x once half the input is fed (when
// the schedule moves it), and writes a record that is not JSON at each
// quarter of the input: its dead letter is due from the member on duty
// then, which may hold the table kept from a generation before, applied
// past the group's committed position (tablekept.go).
func (s *gsim) maybeMoveTier() {
	if s.table && s.tableBad < 4 && s.fed >= s.tableBad*s.want/4 {
		key := fmt.Sprintf("zz%d", s.tableBad)
		s.tableBad++
		s.appendTable(key, `{"tier":`)
		s.log("the table gets a record that is not JSON (%s)", key)
	}
	if s.moveTier && !s.moved && s.fed >= s.want/2 {
		s.moved = true
		s.appendTable("k0", `{"tier":"k0x"}`)
		s.log("the table moves k0 to tier k0x")
	}
}

// keyOf reports whether input n may count under key: its key, or, once
// the table moved k0, k0x for k0's inputs.
func (s *gsim) keyOf(n int64, key string) bool {
	if s.moved && gsimKey(n) == "k0" && key == "k0x" {
		s.counts["inputs of k0 counted under k0x"]++
		return true
	}
	if s.asOfKeyed {
		for _, ins := range s.inputs {
			for _, in := range ins {
				if in.n == n {
					return s.groupKey(in) == key
				}
			}
		}
		return false
	}
	return s.key(n) == key
}

// countedElsewhere reports whether input n was counted under the other of
// k0 and k0x already.
func (s *gsim) countedElsewhere(key string, n int64) bool {
	switch key {
	case "k0":
		return s.view.counted["k0x"][n]
	case "k0x":
		return s.view.counted["k0"][n]
	}
	return false
}

// tierMoved is want, the oracle's per key totals, as the outputs end
// after the table moved k0: the outputs of k0 and k0x add up to k0's.
func (s *gsim) tierMoved(want map[string]simAgg) map[string]simAgg {
	if !s.moved {
		return want
	}
	k0, k0x := s.view.last["k0"], s.view.last["k0x"]
	if k0.count+k0x.count != want["k0"].count || k0.sum+k0x.sum != want["k0"].sum {
		return want // outputsEndAt says how k0 differs
	}
	out := maps.Clone(want)
	out["k0"], out["k0x"] = k0, k0x
	return out
}

// playTableRepartitioned is playTable with the table partitioned: its
// join looks a field up, so the stream crosses the join's repartition
// topic keyed by it, whose partition p goes where table partition p is
// read (config/joinrepartition.go, tableduty.go). The same oracle judges
// it: every input counted once under its tier, exactly once through two
// topics, whatever the crashes, zombies and rebalances.
func playTableRepartitioned(s *gsim) error {
	s.useTableAs(config.TablePartitioned)
	s.moveTier = true
	return playFaults(s)
}

// playTableRepartitionedLive takes a savepoint of the running group
// whose stream crosses the join's repartition topic: its offsets are the
// savepoint's like any source's.
func playTableRepartitionedLive(s *gsim) error {
	s.useTableAs(config.TablePartitioned)
	return playLive(s)
}

// playTableRepartitionedStop stops the last process with a savepoint,
// which leaves what the join's repartition topic holds unread there.
func playTableRepartitionedStop(s *gsim) error {
	s.useTableAs(config.TablePartitioned)
	return playStop(s)
}

func playTableLive(s *gsim) error {
	s.useTable()
	return playLive(s)
}

// inFlightAt sets s.inFlight to the inputs committed in the join's
// repartition topic at or after the offsets at (by partition).
func (s *gsim) inFlightAt(at map[int32]int64) error {
	s.inFlight = map[int64]bool{}
	for p := range int32(s.tableParts) {
		tp := memkafka.TP{Topic: s.joinTopic, Partition: p}
		for from := at[p]; ; {
			recs, next, err := s.w.kafka.ReadCommitted(tp, from, 1000)
			if err != nil {
				return err
			}
			for _, r := range recs {
				if slices.ContainsFunc(r.Headers, func(h memkafka.Header) bool { return h.Key == headerEventTimes }) {
					continue // the times of the stream's partitions (jointime.go)
				}
				// A join record (operator/joinrecord.go), read as the
				// join's side reads it.
				rec := operator.Record{Value: r.Value, Format: config.FormatJoinRecord}
				v, err := rec.Fields()
				n, ok := v["n"].(int)
				if err != nil || !ok {
					return s.violation("the join's repartition topic holds %q at %d/%d: %v, n %v", r.Value, p, r.Offset, err, v["n"])
				}
				s.inFlight[int64(n)] = true
			}
			if next == from {
				break
			}
			from = next
		}
	}
	return nil
}
