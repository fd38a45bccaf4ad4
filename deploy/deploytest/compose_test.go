package deploytest

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"

	pipelinecli "github.com/eoflow/pipeline/cmd/pipeline/cli"
	"github.com/eoflow/pipeline/config"
)

// loadCompose loads docker-compose.yml as docker compose would: schema
// validation, normalization (short port and depends_on syntax, relative
// paths made absolute), with no variables from the environment.
func loadCompose(t *testing.T) *types.Project {
	t.Helper()
	dir := root(t)
	opts, err := cli.NewProjectOptions([]string{filepath.Join(dir, "docker-compose.yml")},
		cli.WithWorkingDirectory(dir), cli.WithResolvedPaths(true))
	if err != nil {
		t.Fatal(err)
	}
	p, err := cli.ProjectFromOptions(context.Background(), opts)
	if err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
	return p
}

func service(t *testing.T, p *types.Project, name string) types.ServiceConfig {
	t.Helper()
	s, ok := p.Services[name]
	if !ok {
		t.Fatalf("service %s missing", name)
	}
	return s
}

// publishes fails unless s publishes container port target on 127.0.0.1
// at the same port: everything in the stack stays on loopback.
func publishes(t *testing.T, s types.ServiceConfig, target uint32) {
	t.Helper()
	for _, p := range s.Ports {
		if p.Target == target {
			if p.HostIP != "127.0.0.1" || p.Published != strconv.Itoa(int(target)) {
				t.Errorf("%s: port %d published on %s:%s, want 127.0.0.1:%d", s.Name, target, p.HostIP, p.Published, target)
			}
			return
		}
	}
	t.Errorf("%s: port %d not published", s.Name, target)
}

func dependsOn(t *testing.T, s types.ServiceConfig, on, condition string) {
	t.Helper()
	if d, ok := s.DependsOn[on]; !ok || d.Condition != condition {
		t.Errorf("%s: depends_on %s %q, want %q", s.Name, on, d.Condition, condition)
	}
}

func env(s types.ServiceConfig, key string) string {
	if v := s.Environment[key]; v != nil {
		return *v
	}
	return ""
}

// mount returns the bind mount of s at target, failing unless its source
// exists in the repository and it is read-only.
func mount(t *testing.T, s types.ServiceConfig, target string) string {
	t.Helper()
	for _, v := range s.Volumes {
		if v.Target != target {
			continue
		}
		if v.Type != types.VolumeTypeBind || !v.ReadOnly {
			t.Errorf("%s: %s should be a read-only bind mount", s.Name, target)
		}
		rel, err := filepath.Rel(root(t), v.Source)
		if err != nil || strings.HasPrefix(rel, "..") {
			t.Errorf("%s: %s mounts %s, outside the repository", s.Name, target, v.Source)
		}
		if _, err := os.Stat(v.Source); err != nil {
			t.Errorf("%s: %s mounts a missing file: %v", s.Name, target, err)
		}
		return v.Source
	}
	t.Fatalf("%s: nothing mounted at %s", s.Name, target)
	return ""
}

func TestComposeServices(t *testing.T) {
	p := loadCompose(t)
	names := p.ServiceNames()
	slices.Sort(names)
	if want := []string{"avro-datagen", "avro-pipeline", "datagen", "grafana", "kafka", "pipeline", "prometheus", "schema-registry", "topics"}; !slices.Equal(names, want) {
		t.Errorf("services %q, want %q", names, want)
	}

	kafka := service(t, p, "kafka")
	if kafka.Image != "apache/kafka:4.1.1" || kafka.HealthCheck == nil || len(kafka.HealthCheck.Test) == 0 {
		t.Errorf("kafka: image %s, health check %+v", kafka.Image, kafka.HealthCheck)
	}
	publishes(t, kafka, 9092)
	if l := env(kafka, "KAFKA_ADVERTISED_LISTENERS"); !strings.Contains(l, "INTERNAL://kafka:29092") || !strings.Contains(l, "HOST://127.0.0.1:9092") {
		t.Errorf("kafka: advertised listeners %q", l)
	}

	topics := service(t, p, "topics")
	dependsOn(t, topics, "kafka", types.ServiceConditionHealthy)
	script := strings.Join(append(slices.Clone(topics.Entrypoint), topics.Command...), " ")
	for _, want := range []string{"--bootstrap-server kafka:29092", "--topic numbers --partitions 4", "--topic parity-sums"} {
		if !strings.Contains(script, want) {
			t.Errorf("topics: %q lacks %q", script, want)
		}
	}
}

// The pipeline runs the image the Dockerfile builds with the root
// config.yaml, whose ${VARS} the service's environment sets.
// publishesRange fails unless s publishes container port target on
// 127.0.0.1 at a range of n host ports from target: one per replica.
func publishesRange(t *testing.T, s types.ServiceConfig, target uint32, n int) {
	t.Helper()
	want := fmt.Sprintf("%d-%d", target, int(target)+n-1)
	for _, p := range s.Ports {
		if p.Target == target {
			if p.HostIP != "127.0.0.1" || p.Published != want {
				t.Errorf("%s: port %d published on %s:%s, want 127.0.0.1:%s", s.Name, target, p.HostIP, p.Published, want)
			}
			return
		}
	}
	t.Errorf("%s: port %d not published", s.Name, target)
}

func TestComposePipeline(t *testing.T) {
	p := loadCompose(t)
	pipe := service(t, p, "pipeline")
	if pipe.Build == nil || pipe.Build.Context != root(t) || (pipe.Build.Dockerfile != "" && pipe.Build.Dockerfile != "Dockerfile") {
		t.Errorf("pipeline: build %+v, want the repository's Dockerfile", pipe.Build)
	}
	stages := parseDockerfile(t, filepath.Join(root(t), "Dockerfile"))
	imageCmd := execForm(t, "CMD", stages[len(stages)-1].last(t, "CMD"))
	if !slices.Equal(pipe.Command, imageCmd) {
		t.Errorf("pipeline: command %q, want the image's %q", pipe.Command, imageCmd)
	}
	cfgPath := imageCmd[len(imageCmd)-1]
	if src := mount(t, pipe, cfgPath); src != filepath.Join(root(t), "config.yaml") {
		t.Errorf("pipeline: %s mounts %s, want the root config.yaml", cfgPath, src)
	}
	// A range from 8080: each of up to three replicas publishes its
	// admin port (--scale pipeline=3).
	publishesRange(t, pipe, 8080, 3)
	dependsOn(t, pipe, "kafka", types.ServiceConditionHealthy)
	dependsOn(t, pipe, "topics", types.ServiceConditionCompletedSuccessfully)

	// The health check asks /healthz of the admin listener.
	_, port, err := net.SplitHostPort(env(pipe, "ADMIN_LISTEN"))
	if err != nil || port != "8080" {
		t.Errorf("pipeline: ADMIN_LISTEN %q, want port 8080: %v", env(pipe, "ADMIN_LISTEN"), err)
	}
	if hc := pipe.HealthCheck; hc == nil || !strings.Contains(strings.Join(hc.Test, " "), "127.0.0.1:8080/healthz") {
		t.Errorf("pipeline: health check %+v, want a GET of /healthz on 8080", hc)
	}

	// Savepoints: a named volume the job writes, with the image's
	// directory there (so the volume starts owned by the job's user), and a
	// token, so `pipeline savepoint create` works out of the box.
	var savepoints *types.ServiceVolumeConfig
	for i, v := range pipe.Volumes {
		if v.Target == "/savepoints" {
			savepoints = &pipe.Volumes[i]
		}
	}
	if savepoints == nil || savepoints.Type != types.VolumeTypeVolume || savepoints.ReadOnly {
		t.Errorf("pipeline: /savepoints is %+v, want a writable named volume", savepoints)
	} else if _, ok := p.Volumes[savepoints.Source]; !ok {
		t.Errorf("pipeline: volume %q is not declared", savepoints.Source)
	}
	if !strings.Contains(strings.Join(stages[len(stages)-1].all("RUN"), "\n"), "/savepoints") {
		t.Error("the image does not create /savepoints for the job's user")
	}

	// config.yaml, with the service's environment, reads what it should.
	for _, k := range []string{"KAFKA_BROKERS", "INPUT_TOPIC", "OUTPUT_TOPIC", "ADMIN_LISTEN", "PIPELINE_ADMIN_TOKEN", "SAVEPOINT_DIR", "JOB_NAME", "GUARANTEE", "CHECKPOINT_INTERVAL", "EMIT", "SCALE_MODE"} {
		t.Setenv(k, env(pipe, k))
	}
	cfg, err := config.Load(filepath.Join(root(t), "config.yaml"))
	if err != nil {
		t.Fatalf("config.yaml with the pipeline service's environment: %v", err)
	}
	if got := strings.Join(cfg.Kafka.Brokers, ","); got != "kafka:29092" {
		t.Errorf("config brokers %q, want kafka:29092", got)
	}
	if cfg.Admin.Listen != "0.0.0.0:8080" {
		t.Errorf("config admin.listen %q, want 0.0.0.0:8080", cfg.Admin.Listen)
	}
	if cfg.Admin.Token == "" {
		t.Error("config admin.token is empty: savepoints over the API would be off")
	}
	// Replicas share the job: group mode, each under its container's host
	// name (no instance id set, so every replica has its own).
	if cfg.Scale.Mode != config.ScaleGroup {
		t.Errorf("config scale.mode %q in compose, want group: --scale pipeline=3 would run three processes fencing each other", cfg.Scale.Mode)
	}
	if env(pipe, "PIPELINE_INSTANCE_ID") != "" || pipe.Hostname != "" || pipe.ContainerName != "" {
		t.Error("pipeline: an instance id, host name or container name set in compose would give every replica the same one")
	}
	// Savepoints over the API go below admin.savepoint_dir, resolved
	// against the image's working directory: it must be the volume, or
	// they vanish with the container.
	workdir := "/"
	if w := stages[len(stages)-1].all("WORKDIR"); len(w) > 0 {
		workdir = w[len(w)-1]
	}
	spDir := cfg.Admin.SavepointDir
	if !path.IsAbs(spDir) {
		spDir = path.Join(workdir, spDir)
	}
	if savepoints != nil && path.Clean(spDir) != savepoints.Target {
		t.Errorf("config admin.savepoint_dir is %s in the container, want the savepoints volume at %s", spDir, savepoints.Target)
	}
	if len(cfg.Sources) != 1 || !slices.Equal(cfg.Sources[0].Topics, []string{"numbers"}) || len(cfg.Sinks) != 1 || cfg.Sinks[0].Topic != "parity-sums" {
		t.Errorf("config reads %+v and writes %+v, want numbers -> parity-sums", cfg.Sources, cfg.Sinks)
	}
}

func TestComposeDatagen(t *testing.T) {
	p := loadCompose(t)
	gen, pipe := service(t, p, "datagen"), service(t, p, "pipeline")
	if gen.Image == "" || gen.Image != pipe.Image || gen.Build != nil {
		t.Errorf("datagen: image %q, want the pipeline's %q, built once", gen.Image, pipe.Image)
	}
	if got := strings.Join(gen.Command, " "); !strings.HasPrefix(got, "datagen -brokers kafka:29092 -topic numbers -rate 200") {
		t.Errorf("datagen: command %q", got)
	}
	dependsOn(t, gen, "kafka", types.ServiceConditionHealthy)
	dependsOn(t, gen, "topics", types.ServiceConditionCompletedSuccessfully)

	// Restarted without a resume point, datagen writes 1, 2, ... again:
	// the topic then holds numbers twice and the parity sums are wrong.
	if gen.Restart != "" && gen.Restart != types.RestartPolicyNo && !slices.Contains(gen.Command, "-resume") {
		t.Errorf("datagen: restart %q without -resume: a restart writes the numbers again from 1", gen.Restart)
	}
	// Every flag of the command is one `pipeline datagen` has.
	var usage bytes.Buffer
	pipelinecli.Main([]string{"datagen", "-h"}, &usage, &usage)
	for _, arg := range gen.Command[1:] {
		if strings.HasPrefix(arg, "-") && !strings.Contains(usage.String(), "  "+arg+" ") && !strings.Contains(usage.String(), "  "+arg+"\n") {
			t.Errorf("datagen: `pipeline datagen` has no flag %s:\n%s", arg, usage.String())
		}
	}
}

// The apache/kafka image writes to /tmp/kraft-combined-logs unless told
// otherwise: inside the container, so a recreated one loses every topic,
// the job's checkpoints and state with them. Its log directories must lie
// in a named volume.
func TestComposeKafkaKeepsItsData(t *testing.T) {
	p := loadCompose(t)
	kafka := service(t, p, "kafka")
	dirs := env(kafka, "KAFKA_LOG_DIRS")
	if dirs == "" {
		t.Fatal("kafka: KAFKA_LOG_DIRS is not set: the image's default, /tmp/kraft-combined-logs, is lost with the container")
	}
	for _, dir := range strings.Split(dirs, ",") {
		kept := false
		for _, v := range kafka.Volumes {
			rel, err := filepath.Rel(v.Target, dir)
			if v.Type == types.VolumeTypeVolume && err == nil && filepath.IsLocal(rel) {
				_, declared := p.Volumes[v.Source]
				kept = declared
			}
		}
		if !kept {
			t.Errorf("kafka: log directory %s is not in a declared named volume (volumes %+v)", dir, kafka.Volumes)
		}
	}
	if env(kafka, "CLUSTER_ID") == "" {
		t.Error("kafka: CLUSTER_ID not pinned: the volume is formatted with it, and a different one would not start on it")
	}
}

// The README starts the stack with the command the compose file documents
// (`up --build`: without it, compose reuses an image built from older
// code), and so does every document in docs/ that starts it.
func TestReadmeStartsComposeAsTheFileSays(t *testing.T) {
	compose, err := os.ReadFile(filepath.Join(root(t), "docker-compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := regexp.MustCompile("`(docker compose up[^`]*)`")
	header, _, _ := strings.Cut(string(compose), "\n")
	m := cmd.FindStringSubmatch(header)
	if m == nil {
		t.Fatalf("docker-compose.yml: its first line names no `docker compose up` command: %q", header)
	}
	want := m[1]
	docs, err := filepath.Glob(filepath.Join(root(t), "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range append([]string{filepath.Join(root(t), "README.md")}, docs...) {
		text, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		name, err := filepath.Rel(root(t), doc)
		if err != nil {
			t.Fatal(err)
		}
		whole := 0
		for _, m := range cmd.FindAllStringSubmatch(string(text), -1) {
			names := false // a command that names services starts only those
			for _, arg := range strings.Fields(m[1])[3:] {
				names = names || !strings.HasPrefix(arg, "-")
			}
			if names {
				continue
			}
			whole++
			if m[1] != want {
				t.Errorf("%s starts the stack with `%s`; docker-compose.yml says `%s`", name, m[1], want)
			}
		}
		if whole == 0 && name == "README.md" {
			t.Errorf("README.md never says how to start the stack (`%s`)", want)
		}
	}
}

// Prometheus gets the config and every rule file it names, at the paths
// the config names them, and scrapes the pipeline service's admin port.
func TestComposePrometheus(t *testing.T) {
	p := loadCompose(t)
	prom := service(t, p, "prometheus")
	if !strings.HasPrefix(prom.Image, "prom/prometheus:") {
		t.Errorf("prometheus: image %s", prom.Image)
	}
	publishes(t, prom, 9090)
	var cfg struct {
		RuleFiles     []string `yaml:"rule_files"`
		ScrapeConfigs []struct {
			JobName      string `yaml:"job_name"`
			DNSSDConfigs []struct {
				Names []string `yaml:"names"`
				Type  string   `yaml:"type"`
				Port  int      `yaml:"port"`
			} `yaml:"dns_sd_configs"`
		} `yaml:"scrape_configs"`
	}
	readYAML(t, mount(t, prom, "/etc/prometheus/prometheus.yml"), &cfg)
	for _, f := range cfg.RuleFiles {
		mount(t, prom, filepath.Join("/etc/prometheus", f))
	}
	// Every replica: the service name's A records, at the admin port.
	var target string
	for _, sc := range cfg.ScrapeConfigs {
		if sc.JobName == "pipeline" && len(sc.DNSSDConfigs) == 1 && len(sc.DNSSDConfigs[0].Names) == 1 && sc.DNSSDConfigs[0].Type == "A" {
			target = fmt.Sprintf("%s:%d", sc.DNSSDConfigs[0].Names[0], sc.DNSSDConfigs[0].Port)
		}
	}
	if target != "pipeline:8080" {
		t.Errorf("prometheus discovers %q, want every replica of the pipeline service at its admin port (A records of pipeline, port 8080)", target)
	}
}

// Grafana shows the provisioned dashboard at localhost:3000 with no login,
// reading the compose stack's Prometheus.
func TestComposeGrafana(t *testing.T) {
	p := loadCompose(t)
	g := service(t, p, "grafana")
	publishes(t, g, 3000)
	dependsOn(t, g, "prometheus", types.ServiceConditionHealthy)
	if env(g, "GF_AUTH_ANONYMOUS_ENABLED") != "true" || env(g, "GF_AUTH_ANONYMOUS_ORG_ROLE") != "Admin" {
		t.Error("grafana: anonymous admin access is not enabled")
	}
	provisioning := mount(t, g, "/etc/grafana/provisioning")
	dashboards := mount(t, g, "/var/lib/grafana/dashboards")

	var providers struct {
		Providers []struct{ Options struct{ Path string } }
	}
	readYAML(t, filepath.Join(provisioning, "dashboards", "dashboards.yml"), &providers)
	if len(providers.Providers) != 1 || providers.Providers[0].Options.Path != "/var/lib/grafana/dashboards" {
		t.Errorf("dashboard provider %+v, want the path the dashboards are mounted at", providers.Providers)
	}
	home := env(g, "GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH")
	rel, err := filepath.Rel("/var/lib/grafana/dashboards", home)
	if err != nil || strings.HasPrefix(rel, "..") {
		t.Fatalf("grafana: home dashboard %q is outside the mounted dashboards", home)
	}
	if _, err := os.Stat(filepath.Join(dashboards, rel)); err != nil {
		t.Errorf("grafana: home dashboard: %v", err)
	}

	_, url := provisionedDatasource(t)
	prom := service(t, p, "prometheus")
	if url != "http://"+prom.Name+":9090" {
		t.Errorf("datasource url %q, want the prometheus service, http://prometheus:9090", url)
	}
}
