package config

import (
	"errors"
	"testing"
)

// FuzzParse: any bytes give a Config or Errors, never a panic, and a
// Config is complete enough to summarise and fingerprint. The seeds run
// with every `go test`, as does the corpus in testdata/fuzz/FuzzParse.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		"",
		minimal,
		full,
		"name: ${JOB:-x}\nkafka: {brokers: ${B}}\n",
		"a: &a [*a, *a]\nsources: *a\n",
		"steps:\n  - map: {a: b}\n    filter: x\n  - aggregate: {values: {s: sum(x)}}\n",
		"sources: [{topics: 'a,,b', start: 2024-01-01T00:00:00Z}]\n",
		"- [\n",
		"$${}",
		windowJob,
		"sources: [{topics: a, event_time: {max_out_of_orderness: 1d1ms}}]\nsteps:\n  - key_by: k\n  - window: {hopping: {size: 1m, advance: 1m}, late_records: drop, values: {n: count()}}\n",
		"steps:\n  - window: {session: {gap: 1us}, tumbling: 0s}\n  - aggregate: {ttl: 7d, emit: on_window_close}\n",
	} {
		f.Add([]byte(seed))
	}
	vars := env(map[string]string{"B": "h:1,h:2", "JOB": "fuzz"})
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse("f.yaml", data, vars)
		if (c == nil) == (err == nil) {
			t.Fatalf("Parse = %v, %v: want exactly one of Config and error", c, err)
		}
		if err != nil {
			var problems Errors
			if !errors.As(err, &problems) || len(problems) == 0 {
				t.Fatalf("error %T %v is not a non-empty Errors", err, err)
			}
			for _, p := range problems {
				if p.File != "f.yaml" || p.Msg == "" || p.Line < 0 || (p.Line > 0 && p.Col < 1) {
					t.Fatalf("malformed problem %#v", p)
				}
			}
			return
		}
		if c.Summary() == "" || len(c.Fingerprint()) != 64 {
			t.Fatalf("Summary %q, Fingerprint %q", c.Summary(), c.Fingerprint())
		}
		if len(c.Sources) == 0 || len(c.Sinks) == 0 || c.Name == "" {
			t.Fatalf("a Config without its required parts: %+v", public(c))
		}
	})
}
