package config

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Summary is one line describing the job, printed by `pipeline validate`:
//
//	job "parity-sum": exactly_once, 1 source (2 topics), 3 steps, 1 sink, checkpoint every 1s
//
// followed, for a job with a window or a TTL, by what they do:
//
//	...; tumbling 5m windows in event time (allowed lateness 1m), late records to orders-late
//	...; keys expire 7d after their last update, in processing time
//
// and, in group mode, how each table is shared:
//
//	...; table customers broadcast: every process reads all of topic customers
func (c *Config) Summary() string {
	topics := 0
	for _, s := range c.Sources {
		topics += len(s.Topics)
	}
	checkpoints := "checkpoint every " + c.Checkpoint.Interval.String()
	if c.Guarantee == AtMostOnce {
		checkpoints = "no checkpoints"
	}
	tables := ""
	if len(c.Tables) > 0 {
		tables = ", " + plural(len(c.Tables), "table")
	}
	line := fmt.Sprintf("job %q: %s, %s (%s)%s, %s, %s, %s",
		c.Name, c.Guarantee,
		plural(len(c.Sources), "source"), plural(topics, "topic"), tables,
		plural(len(c.Steps), "step"), plural(len(c.Sinks), "sink"),
		checkpoints)
	if c.Scale.Mode == ScaleGroup {
		line += "; " + c.shuffleSummary()
		repartitioned := map[string]JoinRepartition{}
		for _, r := range c.joinRepartitionsNeeded() {
			repartitioned[r.Table] = r
		}
		for _, t := range c.Tables {
			r, byJoinKey := repartitioned[t.ID]
			switch {
			case t.Mode == TableBroadcast:
				line += fmt.Sprintf("; table %s broadcast: every process reads all of topic %s", t.ID, t.Topic)
			case byJoinKey:
				line += fmt.Sprintf("; table %s partitioned: the stream is repartitioned by the join key of steps[%d] (%s) through topic %s, with as many partitions as topic %s, and each process reads the table partitions of the partitions of it that it owns",
					t.ID, r.Step, strings.TrimSpace(c.Steps[r.Step].Join.Key), r.Topic, t.Topic)
				if r.Timed {
					line += " (the records' event times and their partitions' watermarks cross with them)"
				}
			default:
				line += fmt.Sprintf("; table %s partitioned: each process reads the partitions of topic %s that match its partitions of the stream (co-partitioned, checked at start)", t.ID, t.Topic)
			}
		}
	}
	for _, s := range c.Steps {
		if w := s.Window; w != nil {
			line += "; " + w.summary()
		}
		if a := s.Aggregate; a != nil && a.TTL > 0 {
			clock := "processing time"
			if c.eventTime() {
				clock = "event time"
			}
			line += fmt.Sprintf("; keys expire %s after their last update, in %s", short(a.TTL), clock)
		}
	}
	return line
}

// eventTime reports whether every source has event time.
func (c *Config) eventTime() bool {
	for _, s := range c.Sources {
		if s.EventTime == nil {
			return false
		}
	}
	return len(c.Sources) > 0
}

// summary describes a window: "tumbling 5m windows in event time (allowed
// lateness 1m), late records to orders-late".
func (w *Window) summary() string {
	var shape string
	switch w.Kind() {
	case "tumbling":
		shape = "tumbling " + short(w.Tumbling) + " windows"
	case "hopping":
		shape = fmt.Sprintf("hopping %s windows every %s", short(w.Hopping.Size), short(w.Hopping.Advance))
	case "session":
		shape = "session windows (gap " + short(w.Session.Gap) + ")"
	}
	shape += " in event time"
	if w.AllowedLateness > 0 {
		shape += " (allowed lateness " + short(w.AllowedLateness) + ")"
	}
	if w.Emit == EmitEveryUpdate {
		shape += ", emitted on every update"
	}
	if w.LateRecords == LateDrop {
		return shape + ", late records dropped"
	}
	return shape + ", late records to " + w.LateTopic
}

// short writes a duration as it is usually written in a file: "7d", "5m",
// "1h30m", "250ms".
func short(d time.Duration) string {
	const day = 24 * time.Hour
	if d >= day && d%day == 0 {
		return strconv.FormatInt(int64(d/day), 10) + "d"
	}
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// Fingerprint identifies what the job computes: a hex SHA-256 over a
// canonical form of the sources (ids, formats, topics as a set, event
// time), the steps (ids, kinds, expressions, joins, aggregate values in
// order, TTLs, window shapes, lateness and late records), the sinks, the
// tables (ids, topics, formats), the graph's edges (when it is not a
// linear chain) and the number of key groups. Settings that change how the job runs but not what it computes
// (brokers, timeouts, checkpoint interval, start position, workers,
// admin, logging) leave it unchanged, so a checkpoint can tell
// "the same job, tuned" from "a different job".
func (c *Config) Fingerprint() string {
	h := sha256.New()
	// Every string is length-prefixed, so no two configurations write
	// the same bytes; the leading version changes if the form ever does.
	put := func(parts ...string) {
		for _, p := range parts {
			fmt.Fprintf(h, "%d:%s,", len(p), p)
		}
	}
	put("pipeline-config-v1", strconv.Itoa(c.Checkpoint.KeyGroups))
	put("sources", strconv.Itoa(len(c.Sources)))
	for _, s := range c.Sources {
		// Reading a then b is reading b then a.
		topics := slices.Compact(slices.Sorted(slices.Values(s.Topics)))
		put(s.ID, string(s.Format), strconv.Itoa(len(topics)))
		put(topics...)
		// Only where set, so a job without event time keeps the
		// fingerprint its checkpoints were written with.
		if et := s.EventTime; et != nil {
			put("event_time", et.Timestamp, et.MaxOutOfOrderness.String(), et.IdleTimeout.String())
			if et.MaxFuture > 0 {
				put("max_future", et.MaxFuture.String())
			}
		}
	}
	put("steps", strconv.Itoa(len(c.Steps)))
	for _, s := range c.Steps {
		put(s.ID, string(s.Kind()), s.Filter, s.KeyBy, strconv.Itoa(len(s.Map)))
		for _, f := range s.Map {
			put(f.Name, f.Expr)
		}
		if j := s.Join; j != nil {
			// A join is new: only where set, as event time is.
			put("join", j.Table, j.Key, j.As, string(j.How))
			if j.Interval() {
				put("interval", j.Stream, j.OtherKey, string(j.LateRecords), j.LateTopic)
				if w := j.Within; w != nil {
					put(w.Before.String(), w.After.String())
				}
			}
		}
		if a := s.Aggregate; a != nil {
			put(string(a.Emit), strconv.Itoa(len(a.Values)))
			for _, v := range a.Values {
				put(v.Name, string(v.Func), v.Arg)
			}
			if a.TTL > 0 {
				put("ttl", a.TTL.String())
			}
		}
		if w := s.Window; w != nil {
			put(w.Kind(), w.Tumbling.String())
			if h := w.Hopping; h != nil {
				put(h.Size.String(), h.Advance.String())
			}
			if g := w.Session; g != nil {
				put(g.Gap.String())
			}
			put(w.AllowedLateness.String(), string(w.Emit), string(w.LateRecords), w.LateTopic, strconv.Itoa(len(w.Values)))
			for _, v := range w.Values {
				put(v.Name, string(v.Func), v.Arg)
			}
		}
	}
	put("sinks", strconv.Itoa(len(c.Sinks)))
	for _, s := range c.Sinks {
		put(s.Topic, s.Key, string(s.Format), s.DeadLetterTopic)
		if s.Upsert {
			put("upsert")
		}
	}
	// Where a group-mode job keeps a key's state depends on it (by key
	// group, or by the key's source partition): only where set, as event
	// time is.
	if c.Scale.KeyByIsRecordKey {
		put("key_by_is_record_key")
	}
	// The tables, only when there are any, so a job without them keeps
	// the fingerprint its checkpoints were written with.
	if len(c.Tables) > 0 {
		put("tables", strconv.Itoa(len(c.Tables)))
		for _, t := range c.Tables {
			put(t.ID, t.Topic, string(t.Format), string(t.KeyFormat))
		}
	}
	// The edges, only for a graph that is not the linear chain a file
	// without from: describes: a linear job keeps the fingerprint its
	// checkpoints were written with, and writing out the default from:
	// changes nothing.
	if g := c.Graph(); !g.Linear() {
		put("graph")
		for _, n := range g.Nodes {
			if n.Kind == NodeSource {
				continue
			}
			put(n.Path, strconv.Itoa(len(n.Inputs)))
			for _, in := range n.Inputs {
				put(g.Nodes[in].ID)
			}
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// shuffleSummary says how a group-mode job spreads its keyed work: which
// jobs repartition.
func (c *Config) shuffleSummary() string {
	keyed, windowed, asOf := false, false, false
	for _, s := range c.Steps {
		keyed = keyed || s.KeyBy != "" || s.Join != nil && s.Join.Interval()
		windowed = windowed || s.Window != nil
		asOf = asOf || s.Join != nil && s.Join.Time == JoinEventTime
	}
	switch {
	case !keyed:
		return "no key_by: no repartition (each process runs the steps on the partitions it reads)"
	case c.Scale.KeyByIsRecordKey && windowed && asOf:
		return "no repartition: the record key is the key_by value (scale.key_by_is_record_key, checked per record); each process fires its windows at the least watermark of the source partitions it reads, never past a record its join as of event time holds"
	case c.Scale.KeyByIsRecordKey && windowed:
		return "no repartition: the record key is the key_by value (scale.key_by_is_record_key, checked per record); each process fires its windows at the least watermark of the source partitions it reads"
	case c.Scale.KeyByIsRecordKey:
		return "no repartition: the record key is the key_by value (scale.key_by_is_record_key, checked per record)"
	}
	return fmt.Sprintf("repartitions every keyed record through %s-repartition (%d partitions)", c.Name, c.Scale.Partitions)
}
