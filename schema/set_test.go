package schema

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"

	"github.com/eoflow/pipeline/config"
	"github.com/eoflow/pipeline/metrics"
	"github.com/eoflow/pipeline/operator"
)

// paymentV1 and paymentV2 are one subject's schema and its evolution: a
// field added with a default.
const (
	paymentV1 = `{"type":"record","name":"Payment","namespace":"shop","fields":[
	 {"name":"n","type":"long"},{"name":"parity","type":"string"},
	 {"name":"amount","type":{"type":"bytes","logicalType":"decimal","precision":12,"scale":2}},
	 {"name":"ts","type":{"type":"long","logicalType":"timestamp-millis"}}]}`
	paymentV2 = `{"type":"record","name":"Payment","namespace":"shop","fields":[
	 {"name":"n","type":"long"},{"name":"parity","type":"string"},
	 {"name":"amount","type":{"type":"bytes","logicalType":"decimal","precision":12,"scale":2}},
	 {"name":"ts","type":{"type":"long","logicalType":"timestamp-millis"}},
	 {"name":"currency","type":"string","default":"EUR"}]}`
)

// sumJob is the parity sum over payments, exact in decimals.
func sumJob(t testing.TB, url string, sink string) *config.Config {
	t.Helper()
	yaml := `name: pay
kafka:
  brokers: [localhost:9092]
schema_registry:
  url: ` + url + `
sources:
  - topics: [payments]
    format: avro
steps:
  - key_by: parity
  - id: sums
    aggregate:
      values:
        count: count()
        total: sum(amount)
        mean: avg(amount)
        biggest: max(amount)
        last_n: last(n)
sinks:
  - topic: sums
` + sink
	c, err := config.Parse("job.yaml", []byte(yaml), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

// encodeAvro frames v in schema text's encoding with id.
func encodeAvro(t *testing.T, id int, text string, v map[string]any) []byte {
	t.Helper()
	w, err := compileAvroWriter(avro.MustParse(text))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := header.AppendEncode(nil, id, nil)
	b, err = w.appendObject(b, v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestAvroSumsThroughTheChain: records of two schema versions, read by a
// chain with the Set's inputs, sum their decimal amounts exactly; an
// unknown id and bytes that do not match are schema errors with the id.
func TestAvroSumsThroughTheChain(t *testing.T) {
	reg := srfake.New()
	defer reg.Close()
	id1, _, err := reg.RegisterSchema("payments-value", sr.Schema{Schema: paymentV1})
	if err != nil {
		t.Fatal(err)
	}
	id2, _, err := reg.RegisterSchema("payments-value", sr.Schema{Schema: paymentV2})
	if err != nil {
		t.Fatal(err)
	}
	cfg := sumJob(t, reg.URL(), "")
	set, err := New(cfg, quiet(), nil)
	if err != nil {
		t.Fatal(err)
	}
	chain, err := operator.Compile(cfg.Steps)
	if err != nil {
		t.Fatal(err)
	}
	chain.SetInputs(set.Inputs())
	agg := chain.Aggregator()
	states := map[string]*operator.AggregateState{}

	ts := time.UnixMilli(1765000000000).UTC()
	var recs []*kgo.Record
	for i, amount := range []string{"0.10", "0.20", "112.99", "0.01", "19999999.99"} {
		v := map[string]any{"n": int64(i + 1), "parity": []string{"even", "odd"}[(i+1)%2], "amount": decimal(t, amount), "ts": ts}
		id, text := id1, paymentV1
		if i >= 2 { // the producer moves to v2 mid-stream
			id, text = id2, paymentV2
			v["currency"] = "USD"
		}
		recs = append(recs, &kgo.Record{Topic: "payments", Value: encodeAvro(t, id, text, v)})
	}
	unknown := &kgo.Record{Topic: "payments", Value: []byte{0, 0, 0, 0x30, 0x39, 2}}
	garbage := &kgo.Record{Topic: "payments", Value: append(append([]byte(nil), recs[0].Value[:5]...), 0xff)}
	notFramed := &kgo.Record{Topic: "payments", Value: []byte(`{"n":1}`)}
	recs = append(recs, unknown, garbage, notFramed)
	if err := set.Prefetch(context.Background(), recs); err != nil {
		t.Fatal(err)
	}

	var codes []string
	for _, rec := range recs {
		op := &operator.Record{Topic: rec.Topic, Value: rec.Value, Format: config.FormatAvro}
		keep, rerr := chain.Process(op)
		if rerr != nil {
			codes = append(codes, string(rerr.Code)+":"+itoa(rerr.SchemaID)+":"+rerr.Reason)
			continue
		}
		if !keep {
			t.Fatal("dropped")
		}
		st := states[op.GroupKey]
		if st == nil {
			st = agg.NewState()
			states[op.GroupKey] = st
		}
		if _, rerr := agg.Add(st, op); rerr != nil {
			t.Fatal(rerr)
		}
	}
	if got, want := string(states["odd"].Output("odd")), `{"key":"odd","count":3,"total":20000113.08,"mean":6666704.36,"biggest":19999999.99,"last_n":5}`; got != want {
		t.Errorf("odd: %s\nwant %s", got, want)
	}
	if got, want := string(states["even"].Output("even")), `{"key":"even","count":2,"total":0.21,"mean":0.105,"biggest":0.2,"last_n":4}`; got != want {
		t.Errorf("even: %s\nwant %s", got, want)
	}
	want := []string{
		"schema:12345:schema id 12345: the registry has no such schema",
		"schema:" + itoa(id1) + ":value of schema id " + itoa(id1) + ": the bytes end inside the value: they do not match the schema",
		"schema:0:value is not in the Confluent wire format (a 0 byte and a 4-byte schema id, then the avro data): it starts with byte 0x7b",
	}
	if strings.Join(codes, "\n") != strings.Join(want, "\n") {
		t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(codes, "\n"), strings.Join(want, "\n"))
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

// TestPrefetchWaitsForAnUnreachableRegistry: while the registry answers
// 503 (or not at all), Prefetch says so and caches nothing; the metrics
// count it and one log line says it; once it answers, the schema is
// there.
func TestPrefetchWaitsForAnUnreachableRegistry(t *testing.T) {
	reg := srfake.New()
	defer reg.Close()
	id, _, err := reg.RegisterSchema("payments-value", sr.Schema{Schema: paymentV1})
	if err != nil {
		t.Fatal(err)
	}
	var down atomic.Bool
	down.Store(true)
	reg.Intercept(func(w http.ResponseWriter, _ *http.Request) bool {
		if down.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return true
		}
		return false
	})
	var logs bytes.Buffer
	promReg := prometheus.NewRegistry()
	m := metrics.New(promReg, "pay")
	set, err := New(sumJob(t, reg.URL(), ""), slog.New(slog.NewTextHandler(&logs, nil)), m)
	if err != nil {
		t.Fatal(err)
	}
	rec := &kgo.Record{Topic: "payments", Value: encodeAvro(t, id, paymentV1, map[string]any{"n": int64(1), "parity": "odd", "amount": decimal(t, "1.00"), "ts": time.Now()})}
	for range 3 {
		if err := set.Prefetch(context.Background(), []*kgo.Record{rec}); !Unavailable(err) {
			t.Fatalf("Prefetch while down: %v, want ErrUnavailable", err)
		}
	}
	if set.reg.cached(id) != nil {
		t.Fatal("an unanswered fetch was cached")
	}
	if got := gauge(t, promReg, "pipeline_schema_registry_waiting"); got != 1 {
		t.Errorf("waiting = %v during the outage", got)
	}
	down.Store(false)
	if err := set.Prefetch(context.Background(), []*kgo.Record{rec}); err != nil {
		t.Fatal(err)
	}
	if e := set.reg.cached(id); e == nil || e.err != nil {
		t.Fatalf("after the outage: %+v", e)
	}
	if got := counter(t, promReg, "pipeline_schema_registry_errors_total", "fetch"); got != 3 {
		t.Errorf("errors_total{op=fetch} = %v, want 3", got)
	}
	if got := gauge(t, promReg, "pipeline_schema_registry_waiting"); got != 0 {
		t.Errorf("waiting = %v after the outage", got)
	}
	if n := strings.Count(logs.String(), "schema registry unreachable"); n != 1 {
		t.Errorf("%d outage lines, want 1:\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), "schema registry reachable again") {
		t.Errorf("no recovery line:\n%s", logs.String())
	}
	// A closed registry (connection refused) is an outage too.
	reg.Close()
	other := &kgo.Record{Topic: "payments", Value: []byte{0, 0, 0, 0, 99, 0}}
	if err := set.Prefetch(context.Background(), []*kgo.Record{other}); !Unavailable(err) {
		t.Fatalf("Prefetch with the registry gone: %v", err)
	}
}

// TestSinkDerivesAndRegisters: an aggregate's derived schema (count long,
// a decimal sum at the input's scale, avg a rounded decimal, max a
// decimal, last nullable) is registered under <topic>-value, and the
// job's JSON outputs encode into it exactly.
func TestSinkDerivesAndRegisters(t *testing.T) {
	reg := srfake.New()
	defer reg.Close()
	if _, _, err := reg.RegisterSchema("payments-value", sr.Schema{Schema: paymentV1}); err != nil {
		t.Fatal(err)
	}
	set, err := New(sumJob(t, reg.URL(), "    format: avro\n"), quiet(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := set.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	k := set.Sink(0)
	want := `{"type":"record","name":"sums","namespace":"eoflow.pipeline","fields":[{"name":"key","type":"string"},{"name":"count","type":"long"},` +
		`{"name":"total","type":{"type":"bytes","logicalType":"decimal","precision":38,"scale":2}},{"name":"mean","type":{"type":"bytes","logicalType":"decimal","precision":38,"scale":6}},` +
		`{"name":"biggest","type":{"type":"bytes","logicalType":"decimal","precision":38,"scale":2}},{"name":"last_n","type":["null","long"],"default":null}]}`
	if k.Text() != want {
		t.Errorf("derived:\n%s\nwant:\n%s", k.Text(), want)
	}
	if k.Subject() != "sums-value" {
		t.Errorf("subject %s", k.Subject())
	}
	ss, ok := reg.GetSchema("sums-value", 1)
	if !ok || ss.ID != k.ID() {
		t.Errorf("registered %+v, sink id %d", ss, k.ID())
	}
	out, rerr := k.AppendJSON(nil, []byte(`{"key":"odd","count":3,"total":20000113.09,"mean":6666704.3633333,"biggest":19999999.99,"last_n":5}`))
	if rerr != nil {
		t.Fatal(rerr)
	}
	id, rest, err := header.DecodeID(out)
	if err != nil || id != k.ID() {
		t.Fatalf("framing: id %d, %v", id, err)
	}
	r, _ := compileAvroReader(avro.MustParse(k.Text()))
	got, err := r.decodeObject(rest)
	if err != nil {
		t.Fatal(err)
	}
	if got["total"].(operator.Decimal).String() != "20000113.09" || got["mean"].(operator.Decimal).String() != "6666704.363333" ||
		got["count"] != int64(3) || got["last_n"] != int64(5) || got["key"] != "odd" {
		t.Errorf("read back %v", normalizeDecimal(got))
	}
	// A sum with more digits after the point than the schema keeps is a
	// schema error, never rounded.
	if _, rerr := k.AppendJSON(nil, []byte(`{"key":"odd","count":1,"total":0.001,"mean":0,"biggest":0,"last_n":null}`)); rerr == nil ||
		rerr.Code != operator.CodeSchema || !strings.Contains(rerr.Reason, "0.001 has more than the 2 digits after the point") {
		t.Errorf("too many digits: %v", rerr)
	}
}

// TestSinkRefusedIncompatible: the registry's compatibility check says
// no, and Prepare refuses with its reason before anything is written.
func TestSinkRefusedIncompatible(t *testing.T) {
	reg := srfake.New()
	defer reg.Close()
	if _, _, err := reg.RegisterSchema("payments-value", sr.Schema{Schema: paymentV1}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := reg.RegisterSchema("sums-value", sr.Schema{Schema: `{"type":"record","name":"sums","fields":[{"name":"key","type":"long"}]}`}); err != nil {
		t.Fatal(err)
	}
	reg.Intercept(func(w http.ResponseWriter, req *http.Request) bool {
		if strings.HasPrefix(req.URL.Path, "/compatibility/") {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"is_compatible":false,"messages":["{errorType:'TYPE_MISMATCH', description:'The type (path '/fields/0/type') of a field in the new schema does not match with the old schema'}"]}`))
			return true
		}
		return false
	})
	set, err := New(sumJob(t, reg.URL(), "    format: avro\n"), quiet(), nil)
	if err != nil {
		t.Fatal(err)
	}
	err = set.Prepare(context.Background())
	if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "TYPE_MISMATCH") || !strings.Contains(err.Error(), "incompatible with the latest of subject sums-value") {
		t.Fatalf("Prepare: %v", err)
	}
	if ss, ok := reg.GetSchema("sums-value", 2); ok {
		t.Errorf("registered anyway: %+v", ss)
	}
}

// TestSinkWithoutAutoRegister looks the schema up, and refuses a start
// when the subject lacks it.
func TestSinkWithoutAutoRegister(t *testing.T) {
	reg := srfake.New()
	defer reg.Close()
	if _, _, err := reg.RegisterSchema("payments-value", sr.Schema{Schema: paymentV1}); err != nil {
		t.Fatal(err)
	}
	set, err := New(sumJob(t, reg.URL(), "    format: avro\n    auto_register: false\n"), quiet(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := set.Prepare(context.Background()); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "not registered under subject sums-value, and auto_register is false") {
		t.Fatalf("Prepare: %v", err)
	}
}

// TestSinkUnderivable names the value whose type cannot be told.
func TestSinkUnderivable(t *testing.T) {
	reg := srfake.New()
	defer reg.Close()
	if _, _, err := reg.RegisterSchema("payments-value", sr.Schema{Schema: paymentV1}); err != nil {
		t.Fatal(err)
	}
	cfg := sumJob(t, reg.URL(), "    format: avro\n")
	cfg.Steps[1].Aggregate.Values[1].Arg = "amount * n"
	set, err := New(cfg, quiet(), nil)
	if err != nil {
		t.Fatal(err)
	}
	err = set.Prepare(context.Background())
	if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "value total, sum(amount * n): the argument's type cannot be told") {
		t.Fatalf("Prepare: %v", err)
	}
}

func gauge(t *testing.T, g prometheus.Gatherer, name string) float64 {
	t.Helper()
	fams, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() == name {
			return f.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no %s", name)
	return 0
}

func counter(t *testing.T, g prometheus.Gatherer, name, op string) float64 {
	t.Helper()
	fams, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "op" && l.GetValue() == op {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("no %s{op=%s}", name, op)
	return 0
}

// TestRegistryAuthAndTLS: a bearer token and basic credentials reach the
// registry; refused credentials are an outage (the job waits, nothing is
// dead-lettered), not an unknown schema; a TLS file that cannot be read
// is an error at start naming schema_registry.tls.
func TestRegistryAuthAndTLS(t *testing.T) {
	for _, tt := range []struct {
		auth, yaml string
	}{
		{"Bearer s3cret", "  token: s3cret\n"},
		{"Basic " + base64.StdEncoding.EncodeToString([]byte("app:pw")), "  username: app\n  password: pw\n"},
	} {
		reg := srfake.New(srfake.WithAuth(tt.auth))
		id, _, err := reg.RegisterSchema("payments-value", sr.Schema{Schema: paymentV1})
		if err != nil {
			t.Fatal(err)
		}
		rec := &kgo.Record{Topic: "payments", Value: []byte{0, 0, 0, 0, byte(id), 2}}
		for _, right := range []bool{true, false} {
			cfg := sumJob(t, reg.URL(), "")
			creds := tt.yaml
			if !right {
				creds = strings.ReplaceAll(strings.ReplaceAll(creds, "s3cret", "wrong"), "pw", "wrong")
			}
			c, err := config.Parse("job.yaml", []byte(strings.Replace(cfgText(reg.URL()), "schema_registry:\n", "schema_registry:\n"+creds, 1)), func(string) (string, bool) { return "", false })
			if err != nil {
				t.Fatal(err)
			}
			cfg.SchemaRegistry = c.SchemaRegistry
			set, err := New(cfg, quiet(), nil)
			if err != nil {
				t.Fatal(err)
			}
			err = set.Prefetch(context.Background(), []*kgo.Record{rec})
			if right && err != nil {
				t.Errorf("%s: %v", tt.auth, err)
			}
			if !right && !Unavailable(err) {
				t.Errorf("%s, wrong credentials: %v, want ErrUnavailable", tt.auth, err)
			}
		}
		reg.Close()
	}
	cfg := sumJob(t, "https://127.0.0.1:1", "")
	cfg.SchemaRegistry.TLS.CAFile = "/nonexistent/ca.pem"
	if _, err := New(cfg, quiet(), nil); err == nil || !strings.Contains(err.Error(), "schema_registry.tls") {
		t.Errorf("unreadable CA file: %v", err)
	}
}

func cfgText(url string) string {
	return "name: pay\nkafka:\n  brokers: [localhost:9092]\nschema_registry:\n  url: " + url + "\nsources:\n  - topics: [payments]\n    format: avro\nsinks:\n  - topic: sums\n"
}
