package config

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
)

// Summary is one line describing the job, printed by `pipeline validate`:
//
//	job "parity-sum": exactly_once, 1 source (2 topics), 3 steps, 1 sink, checkpoint every 1s
func (c *Config) Summary() string {
	topics := 0
	for _, s := range c.Sources {
		topics += len(s.Topics)
	}
	checkpoints := "checkpoint every " + c.Checkpoint.Interval.String()
	if c.Guarantee == AtMostOnce {
		checkpoints = "no checkpoints"
	}
	return fmt.Sprintf("job %q: %s, %s (%s), %s, %s, %s",
		c.Name, c.Guarantee,
		plural(len(c.Sources), "source"), plural(topics, "topic"),
		plural(len(c.Steps), "step"), plural(len(c.Sinks), "sink"),
		checkpoints)
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// Fingerprint identifies what the job computes: a hex SHA-256 over a
// canonical form of the sources (ids, formats, topics as a set), the steps
// (ids, kinds, expressions, aggregate values in order), the sinks and the
// number of key groups. Settings that change how the job runs but not what
// it computes (brokers, timeouts, checkpoint interval, start position,
// workers, admin, logging) leave it unchanged, so a checkpoint can tell
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
	}
	put("steps", strconv.Itoa(len(c.Steps)))
	for _, s := range c.Steps {
		put(s.ID, string(s.Kind()), s.Filter, s.KeyBy, strconv.Itoa(len(s.Map)))
		for _, f := range s.Map {
			put(f.Name, f.Expr)
		}
		if a := s.Aggregate; a != nil {
			put(string(a.Emit), strconv.Itoa(len(a.Values)))
			for _, v := range a.Values {
				put(v.Name, string(v.Func), v.Arg)
			}
		}
	}
	put("sinks", strconv.Itoa(len(c.Sinks)))
	for _, s := range c.Sinks {
		put(s.Topic, s.Key, string(s.Format), s.DeadLetterTopic)
	}
	return hex.EncodeToString(h.Sum(nil))
}
