package kafkatest

import (
	"regexp"
	"testing"
)

func TestJavaMajor(t *testing.T) {
	for _, tc := range []struct {
		out  string
		want int
		ok   bool
	}{
		{`openjdk version "17.0.15" 2025-04-15`, 17, true},
		{`openjdk version "25" 2025-09-16`, 25, true},
		{`java version "1.8.0_402"`, 8, true},
		{`openjdk version "21-ea" 2023-09-19`, 21, true},
		{`bash: java: command not found`, 0, false},
	} {
		got, ok := javaMajor(tc.out)
		if got != tc.want || ok != tc.ok {
			t.Errorf("javaMajor(%q) = %d, %v; want %d, %v", tc.out, got, ok, tc.want, tc.ok)
		}
	}
}

// The embedded pom decides which jars run; KafkaVersion names them in
// messages and picks the container image. They must agree.
func TestPomMatchesKafkaVersion(t *testing.T) {
	m := regexp.MustCompile(`<kafka.version>([^<]+)</kafka.version>`).FindSubmatch(pomXML)
	if m == nil || string(m[1]) != KafkaVersion {
		t.Fatalf("pom.xml kafka.version = %q, KafkaVersion = %q", m, KafkaVersion)
	}
}

// A cluster id is 22 URL-safe base64 characters and never starts with
// '-', which kafka-storage would take for an option (1 in 64 random ids
// did, before).
func TestClusterIDShape(t *testing.T) {
	shape := regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_-]{21}$`)
	for range 10000 {
		if id := newClusterID(); !shape.MatchString(id) {
			t.Fatalf("cluster id %q: want 22 URL-safe base64 characters, not starting with '-'", id)
		}
	}
}

func TestSplitList(t *testing.T) {
	got := splitList(" a:1, b:2,,c:3 ")
	if len(got) != 3 || got[0] != "a:1" || got[2] != "c:3" {
		t.Fatalf("splitList = %q", got)
	}
}

// The container must be configured like a local single node.
func TestContainerEnvMatchesLocalNode(t *testing.T) {
	c := &Cluster{nodes: []*node{{id: 1, port: 1, ctrlPort: 2}}}
	props := c.serverProperties(c.nodes[0], "1@127.0.0.1:2")
	env := containerEnv("127.0.0.1:1")
	for _, key := range []string{
		"offsets.topic.replication.factor", "offsets.topic.num.partitions",
		"transaction.state.log.num.partitions", "transaction.state.log.replication.factor",
		"transaction.state.log.min.isr", "group.initial.rebalance.delay.ms", "auto.create.topics.enable",
	} {
		envKey := "KAFKA_" + regexp.MustCompile(`\.`).ReplaceAllString(upper(key), "_")
		if env[envKey] != props[key] {
			t.Errorf("%s: container %q, local %q", key, env[envKey], props[key])
		}
	}
}

func upper(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'a' <= c && c <= 'z' {
			b[i] = c - 'a' + 'A'
		}
	}
	return string(b)
}
