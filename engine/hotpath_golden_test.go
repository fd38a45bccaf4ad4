package engine

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/window"
)

var updateGolden = flag.Bool("update", false, "rewrite testdata/*.golden from the current code")

// hotPathJobs are the jobs whose every output byte is pinned by
// testdata/hotpath.golden: each feature of the per-record path (decode,
// filter, map, key_by, every aggregate function, both emit modes, sink key
// expressions, json and raw formats, dead letters) on inputs chosen for
// their encodings (escapes, invalid UTF-8, U+2028, big and small numbers).
var hotPathJobs = []struct {
	name string
	yaml string
}{
	{"bench-keyed-sum", ""}, // bench/jobs/keyed-sum.yaml
	{"all-functions", `
name: all
kafka: {brokers: "127.0.0.1:9092"}
sources: [{id: in, topics: [in, raw-in]}]
steps:
  - filter: 'x != 13'
  - map:
      k: k
      x: x
      name: name ?? "none"
      obj: 'obj ?? {"b": [1, 2.5, nil], "a": "é\u2028"}'
  - key_by: k
  - id: agg
    aggregate:
      values:
        c: count()
        s: sum(x)
        fs: sum(float(x) / 3)
        avg: avg(x)
        mn: min(x)
        mx: max(x)
        first: first(obj)
        last: last(name)
sinks:
  - topic: out-json
  - topic: out-raw
    format: raw
    key: 'key + "/" + string(c)'
    dead_letter_topic: dlq-2
`},
	{"on-checkpoint", `
name: onc
kafka: {brokers: "127.0.0.1:9092"}
sources: [{id: in, topics: [in]}]
steps:
  - key_by: k
  - aggregate:
      emit: on_checkpoint
      values:
        s: sum(x)
        last: last($env)
sinks: [{topic: out}]
`},
	{"passthrough", `
name: pass
kafka: {brokers: "127.0.0.1:9092"}
sources: [{id: in, topics: [in]}, {id: raw, topics: [raw-in], format: raw}]
sinks:
  - topic: out-json
  - topic: out-raw
    format: raw
    key: 'string(_partition) + ":" + _topic'
`},
	{"map-then-key", `
name: mapkey
kafka: {brokers: "127.0.0.1:9092"}
sources: [{id: in, topics: [in]}]
steps:
  - filter: 'x > 0'
  - map:
      z: name ?? k
      x2: x * 2
sinks:
  - topic: out
    key: 'z'
`},
}

// hotPathInputs: values for topic "in" (and the raw ones for "raw-in").
var hotPathInputs = []string{
	`{"k":"a","x":1,"name":"Zoë"}`,
	`{"k":"b","x":2.5,"pad":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}`,
	` { "k" : "a" , "x" : 9007199254740993 , "obj" : {"z":1,"a":[true,false,{}]} } `,
	`{"k":"q\"uote\\back\u2028","x":-3,"name":"tab\tnl\n<&>"}`,
	`{"k":"a","x":0.000001,"name":"\ud800 lone"}`,
	"{\"k\":\"bad\xffutf8\",\"x\":1e21,\"name\":\"\xc3\x28\"}",
	`{"k":"a","x":13}`,
	`{"k":"a","x":"not a number"}`,
	`{"k":"a"}`,
	`{"k":{"nested":1},"x":1}`,
	`not json`,
	`{"k":"a","x":1,}`,
	`[1,2]`,
	`{"k":"c","x":-0.0,"name":null}`,
	`{"k":"a","x":9223372036854775807}`,
	`{"k":"a","x":1}`,
	`{"k":"b","x":1e400}`,
	`{"k":"","x":4,"name":""}`,
	`{"k":"é","x":7,"name":"` + strings.Repeat("long ", 20) + `"}`,
	`{"key":"k1","amount":10,"ts":1764688091000,"pad":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}`,
	`{"key":"k2","amount":999,"ts":1764688091001,"pad":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}`,
	`{"key":"k1","amount":1,"ts":1764688091002,"pad":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}`,
	`{"key":"k\u00e9","amount":-5,"ts":1764688091003,"pad":""}`,
	`{"key":"k1","amount":"x","ts":1764688091004}`,
	`{"amount":3,"ts":1764688091005}`,
	`{"key":"k1","amount":9223372036854775807,"ts":1764688091006}`, // an integer sum overflows: dead letter
	`{"k":"m","x":112.99}`, `{"k":"m","x":0.01}`, // money: exact decimals
	`{"k":3,"x":1.5e-2}`, // a number key stays a number in the output
}

var hotPathRawInputs = []string{"plain text", "{\"k\":\"a\",\"x\":1}", "", "\xff\x00bin"}

// TestHotPathOutputsUnchanged runs every input through route and process
// (and a snapshot after every third input) and compares a transcript of
// every record produced, byte for byte, with testdata/hotpath.golden. The
// golden file was written by the code before the per-record path was
// optimized: a faster path must not write one byte differently. Run with
// -update to rewrite it after a deliberate change of the output format.
func TestHotPathOutputsUnchanged(t *testing.T) {
	var out strings.Builder
	for _, job := range hotPathJobs {
		data := []byte(job.yaml)
		if job.yaml == "" {
			var err error
			if data, err = os.ReadFile("../bench/jobs/keyed-sum.yaml"); err != nil {
				t.Fatal(err)
			}
		}
		r, op := hotPathJob(t, data, nil)
		fmt.Fprintf(&out, "== %s\n", job.name)
		ts := time.UnixMilli(1764688090000).UTC()
		var inputs []*kgo.Record
		for i, v := range hotPathInputs {
			inputs = append(inputs, &kgo.Record{Topic: "in", Partition: int32(i % 3), Offset: int64(100 + i),
				Key: []byte(fmt.Sprintf("in-key-%d", i%4)), Value: []byte(v), Timestamp: ts.Add(time.Duration(i) * time.Millisecond)})
		}
		if _, ok := r.p.format["raw-in"]; ok {
			for i, v := range hotPathRawInputs {
				inputs = append(inputs, &kgo.Record{Topic: "raw-in", Partition: 1, Offset: int64(i), Value: []byte(v), Timestamp: ts})
			}
		}
		for i, in := range inputs {
			msgs, w := r.route1(in)
			fmt.Fprintf(&out, "in %s/%d@%d %q -> worker %d, %d messages\n", in.Topic, in.Partition, in.Offset, in.Value, w, len(msgs))
			for _, m := range msgs {
				switch m.kind {
				case msgDeadLetter:
					writeRecord(&out, "  route dead letter", m.rec)
				case msgRecord:
					outs, dls := op.process(m)
					for _, o := range outs {
						writeRecord(&out, "  output", o)
					}
					for _, d := range dls {
						writeRecord(&out, "  dead letter", d.rec)
					}
				default:
					t.Fatalf("route: message kind %d", m.kind)
				}
			}
			if i%3 == 2 || i == len(inputs)-1 {
				outputs, changes, summary := op.snapshot(window.NoWatermark)
				fmt.Fprintf(&out, "snapshot %+v\n", summary)
				for _, o := range outputs {
					writeRecord(&out, "  checkpoint output", o)
				}
				for _, c := range changeRecords(changes) {
					writeRecord(&out, "  change", c)
				}
			}
		}
	}
	golden := filepath.Join("testdata", "hotpath.golden")
	if *updateGolden {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, []byte(out.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got := out.String(); got != string(want) {
		gl, wl := strings.Split(got, "\n"), strings.Split(string(want), "\n")
		for i := range min(len(gl), len(wl)) {
			if gl[i] != wl[i] {
				t.Fatalf("transcript differs from %s at line %d:\n got: %s\nwant: %s", golden, i+1, gl[i], wl[i])
			}
		}
		t.Fatalf("transcript differs from %s in length: %d lines, want %d", golden, len(gl), len(wl))
	}
}

func writeRecord(b *strings.Builder, what string, r *kgo.Record) {
	fmt.Fprintf(b, "%s topic=%s key=%q value=%q ts=%d", what, r.Topic, r.Key, r.Value, r.Timestamp.UnixMilli())
	if r.Key == nil {
		b.WriteString(" nilkey")
	}
	if r.Value == nil {
		b.WriteString(" nilvalue")
	}
	for _, h := range r.Headers {
		fmt.Fprintf(b, " %s=%q", h.Key, h.Value)
	}
	b.WriteString("\n")
}
