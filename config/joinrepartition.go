package config

import (
	"slices"
	"strings"
)

// A partitioned table (tables[].mode: partitioned) is split between the
// processes of a group-mode job: each holds the table partitions of the
// stream partitions it reads. A join finds a record's key in its own
// process only when the stream is co-partitioned with the table: the job
// reads one stream topic, keyed as the table is, and looks the record key
// up (key: _key). Any other join of a partitioned table first
// repartitions its stream by the join key, as Kafka Streams does before a
// KStream–KTable join on a key the stream is not partitioned by: the
// records the join reads are written, keyed by the join key, to the
// internal topic <name>-<step>-repartition, which has as many partitions
// as the table's topic (the job creates it so), by Kafka's default
// partitioner (murmur2 of the key), so that its partition p holds the
// join keys of table partition p. The job reads that topic as a source of
// its own, and the join reads that source: partition p of it and table
// partition p go to the same process.
//
// WithJoinRepartitions writes the repartition into the configuration as
// one more source and one more sink, so the engine runs it as any other:
// the sink's records commit with the offsets they came from, the source's
// offsets are the group's like every source's, and a rebalance moves a
// partition of the topic with its table partition. The record key the
// join's input had crosses in a header (JoinKeyHeader), so _key after the
// join is what it was before it. When every source the join reads has
// event time, so does the internal source: each record carries its event
// time and its partition's watermark across in a header
// (JoinTimeHeader), and the topic's partitions have the watermarks the
// stream's partitions report through them (engine/jointime.go).
//
// The record's value crosses in FormatJoinRecord (package operator's
// AppendJoinRecord): the bytes it was read as, and, when they alone do
// not say it (a value decoded from a schema registry format or a
// Debezium envelope, or one a map step built), the decoded value itself,
// every value with its type (timestamps, bytes, decimals of any size and
// scale, integers and floats apart), and its decoded key. So whatever
// the sources' formats, envelopes and key formats, the join and the
// steps after it see exactly the record they would have seen without the
// repartition, and no process on the far side needs the schema registry
// to read it. JSON would not do: a timestamp, bytes or a decimal would
// come back as a string or a float.

// JoinKeyHeader is the header in which a record written to a join's
// repartition topic carries its own record key (the topic's record key is
// the join key).
const JoinKeyHeader = "pipeline.key"

// JoinTimeHeader is the header in which a record written to a join's
// repartition topic carries its event time and its partition's watermark
// just before it, when the job has event time.
const JoinTimeHeader = "pipeline.event.time"

// JoinRepartition is a join step whose stream the job repartitions by the
// join key.
type JoinRepartition struct {
	// Step is the join's index in Steps.
	Step int
	// Table is the id of the partitioned table it looks up.
	Table string
	// Topic is the internal topic the stream crosses
	// (JoinRepartitionTopic), read by the source Source.
	Topic, Source string
	// From are the ids the join read in the configuration as written:
	// the internal sink reads them.
	From []string
	// Upstream are the topics of the sources the join reads through
	// other steps or none, in the configuration as written; Timed says
	// every one of them has event time, which then crosses the topic
	// (the file's comment).
	Upstream []string
	Timed    bool
}

// JoinRepartitionTopic is the internal topic through which job
// repartitions the stream of join step by its join key.
func JoinRepartitionTopic(job, step string) string { return job + "-" + step + "-repartition" }

// JoinRepartitionSource is the id of the internal source that reads the
// repartition topic of join step.
func JoinRepartitionSource(step string) string { return step + "-repartition" }

// JoinRepartitioned is the joins WithJoinRepartitions repartitioned (nil
// for a configuration it did not make).
func (c *Config) JoinRepartitioned() []JoinRepartition { return c.joinRepartitions }

// joinCopartitioned reports whether join step s of a partitioned table,
// read as table t, is co-partitioned with its stream: the job reads one
// stream topic, keyed as the table is, and s looks the record key up.
func (c *Config) joinCopartitioned(s Step, t Table) bool {
	topics := 0
	for _, src := range c.Sources {
		topics += len(src.Topics)
		if len(src.Topics) > 0 && src.KeyFormat != t.KeyFormat {
			return false
		}
	}
	k := strings.TrimSpace(s.Join.Key)
	return topics == 1 && (k == "_key" || k == "")
}

// joinsOf is the index in Steps of every join of table t, and whether
// each is co-partitioned with its stream (joinCopartitioned).
func (c *Config) joinsOf(t Table) (joins []int, copartitioned bool) {
	copartitioned = true
	for i, s := range c.Steps {
		if s.Join != nil && s.Join.Table == t.ID {
			joins = append(joins, i)
			copartitioned = copartitioned && c.joinCopartitioned(s, t)
		}
	}
	return joins, copartitioned
}

// joinRepartitionsNeeded is every join of a partitioned table in c (group
// mode) that is not co-partitioned with its stream. A table with one such
// join has all its joins repartitioned: the table's partitions go where
// the repartition topic's do, not the stream's.
func (c *Config) joinRepartitionsNeeded() []JoinRepartition {
	if c.Scale.Mode != ScaleGroup {
		return nil
	}
	g := c.Graph()
	var out []JoinRepartition
	for _, t := range c.Tables {
		if t.Mode != TablePartitioned {
			continue
		}
		joins, co := c.joinsOf(t)
		if co {
			continue
		}
		for _, i := range joins {
			n, _ := g.Lookup(c.Steps[i].ID)
			var from []string
			for _, in := range g.Nodes[n].Inputs {
				from = append(from, g.Nodes[in].ID)
			}
			r := JoinRepartition{
				Step: i, Table: t.ID, From: from,
				Topic:  JoinRepartitionTopic(c.Name, c.Steps[i].ID),
				Source: JoinRepartitionSource(c.Steps[i].ID),
			}
			up := c.upstreamSources(i)
			r.Timed = len(up) > 0
			for _, s := range up {
				r.Upstream = append(r.Upstream, c.Sources[s].Topics...)
				r.Timed = r.Timed && c.Sources[s].EventTime != nil
			}
			out = append(out, r)
		}
	}
	return out
}

// WithJoinRepartitions returns c with the repartition of every join that
// needs one written in (the file's comment above): c itself when none
// does. For a valid configuration only, after defaults: the result is
// the engine's, never validated again.
func (c *Config) WithJoinRepartitions() *Config {
	if c.joinRepartitions != nil {
		return c
	}
	rs := c.joinRepartitionsNeeded()
	if len(rs) == 0 {
		return c
	}
	out := *c
	out.Sources = slices.Clone(c.Sources)
	out.Steps = slices.Clone(c.Steps)
	out.Sinks = slices.Clone(c.Sinks)
	out.joinRepartitions = rs
	if len(out.Steps) > 0 && out.Steps[0].From == nil {
		// The first step read every source: not the new ones.
		for _, s := range c.Sources {
			out.Steps[0].From = append(out.Steps[0].From, s.ID)
		}
	}
	for _, r := range rs {
		// The record crosses whole, its decoded key with it
		// (FormatJoinRecord): the header's key bytes are not decoded
		// again.
		keyFormat, format := FormatRaw, FormatJoinRecord
		src := Source{
			ID: r.Source, Topics: []string{r.Topic}, Start: StartPosition{Kind: StartEarliest},
			Format: format, KeyFormat: keyFormat, Envelope: EnvelopeNone,
		}
		if r.Timed {
			// Each record's event time, and its partition's watermark
			// before it, cross in a header; the topic's partitions have
			// the watermarks the stream's partitions report through
			// them, not their own (engine/jointime.go).
			src.EventTime = &EventTime{}
		}
		out.Sources = append(out.Sources, src)
		dlt := c.Name + "-dead-letter"
		if len(c.Sinks) > 0 {
			dlt = c.Sinks[0].DeadLetterTopic
		}
		out.Sinks = append(out.Sinks, Sink{
			From: r.From, Topic: r.Topic, Key: c.Steps[r.Step].Join.Key, Format: format,
			DeadLetterTopic: dlt, Partitions: -1, ReplicationFactor: c.Checkpoint.ReplicationFactor,
			AutoRegister: true,
		})
		j := *c.Steps[r.Step].Join
		out.Steps[r.Step].Join = &j
		out.Steps[r.Step].From = []string{r.Source}
	}
	return &out
}

// upstreamSources is the index in Sources of every source step i reads,
// directly or through other steps.
func (c *Config) upstreamSources(i int) []int {
	g := c.Graph()
	n, ok := g.Lookup(c.Steps[i].ID)
	if !ok {
		return nil
	}
	var out []int
	for _, u := range g.Upstream(n) {
		if g.Nodes[u].Kind == NodeSource {
			out = append(out, g.Nodes[u].Index)
		}
	}
	return out
}
