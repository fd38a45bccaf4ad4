package deploytest

import (
	"bytes"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/types"

	pipelinecli "github.com/eoflow/pipeline/cmd/pipeline/cli"
	"github.com/eoflow/pipeline/config"
)

// The Avro example of the compose stack: a schema registry, datagen
// writing Avro into it, and examples/avro-sum reading and writing Avro
// with it; the job's file, with the service's environment, loads, reads
// what datagen writes and uses the registry service.
func TestComposeSchemaRegistryAndAvroJob(t *testing.T) {
	p := loadCompose(t)
	reg := service(t, p, "schema-registry")
	if !strings.HasPrefix(reg.Image, "confluentinc/cp-schema-registry:") || reg.HealthCheck == nil {
		t.Errorf("schema-registry: image %q, health check %+v", reg.Image, reg.HealthCheck)
	}
	publishes(t, reg, 8081)
	dependsOn(t, reg, "kafka", types.ServiceConditionHealthy)
	if got := env(reg, "SCHEMA_REGISTRY_KAFKASTORE_BOOTSTRAP_SERVERS"); !strings.Contains(got, "kafka:29092") {
		t.Errorf("schema-registry: kafkastore %q, want the compose broker", got)
	}

	gen := service(t, p, "avro-datagen")
	cmd := strings.Join(gen.Command, " ")
	for _, want := range []string{"-format avro", "-registry http://schema-registry:8081", "-topic numbers-avro", "-resume"} {
		if !strings.Contains(cmd, want) {
			t.Errorf("avro-datagen: %q lacks %q", cmd, want)
		}
	}
	dependsOn(t, gen, "schema-registry", types.ServiceConditionHealthy)
	var usage bytes.Buffer
	pipelinecli.Main([]string{"datagen", "-h"}, &usage, &usage)
	for _, arg := range gen.Command[1:] {
		if strings.HasPrefix(arg, "-") && !strings.Contains(usage.String(), "  "+arg+" ") && !strings.Contains(usage.String(), "  "+arg+"\n") {
			t.Errorf("avro-datagen: `pipeline datagen` has no flag %s", arg)
		}
	}

	job := service(t, p, "avro-pipeline")
	dependsOn(t, job, "schema-registry", types.ServiceConditionHealthy)
	publishes8083 := false
	for _, port := range job.Ports {
		publishes8083 = publishes8083 || (port.Target == 8080 && port.HostIP == "127.0.0.1" && port.Published == "8083")
	}
	if !publishes8083 {
		t.Errorf("avro-pipeline: ports %+v, want its admin port on 127.0.0.1:8083", job.Ports)
	}
	cfgPath := job.Command[len(job.Command)-1]
	if src := mount(t, job, cfgPath); src != filepath.Join(root(t), "examples", "avro-sum", "config.yaml") {
		t.Errorf("avro-pipeline: %s mounts %s, want examples/avro-sum/config.yaml", cfgPath, src)
	}
	for _, k := range []string{"KAFKA_BROKERS", "SCHEMA_REGISTRY_URL", "INPUT_TOPIC", "OUTPUT_TOPIC", "ADMIN_LISTEN", "SAVEPOINT_DIR", "JOB_NAME", "GUARANTEE", "CHECKPOINT_INTERVAL", "OUTPUT_FORMAT", "PIPELINE_ADMIN_TOKEN"} {
		t.Setenv(k, env(job, k))
	}
	cfg, err := config.Load(filepath.Join(root(t), "examples", "avro-sum", "config.yaml"))
	if err != nil {
		t.Fatalf("examples/avro-sum with the avro-pipeline service's environment: %v", err)
	}
	if !slices.Equal(cfg.SchemaRegistry.URL, []string{"http://schema-registry:8081"}) || cfg.Sources[0].Format != config.FormatAvro ||
		!slices.Equal(cfg.Sources[0].Topics, []string{"numbers-avro"}) || cfg.Sinks[0].Format != config.FormatAvro {
		t.Errorf("avro-sum in compose: registry %v, source %+v, sink %+v", cfg.SchemaRegistry.URL, cfg.Sources[0], cfg.Sinks[0])
	}
	if cfg.Name == "parity-sum" {
		t.Error("avro-sum shares the parity-sum job's name (and so its internal topics)")
	}
}
