package kafkatest

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Options describe a local cluster to start.
type Options struct {
	// Nodes is the number of brokers, each a KRaft broker+controller.
	// 1 (default) or 3 are the useful values: a 3-node quorum survives the
	// loss of any one node.
	Nodes int
	// Dir holds each node's config, data and logs. Required; created if
	// missing.
	Dir string
	// Detached brokers outlive this process (cmd/kafka-local). Otherwise
	// they are killed by the kernel when this process dies, so a crashed
	// test run leaves no broker behind.
	Detached bool
	// Properties are added to (and override) every node's
	// server.properties.
	Properties map[string]string
	// ReadyTimeout bounds start-up. Default 2 minutes.
	ReadyTimeout time.Duration
	// BrokerPorts fixes the client port of each node (e.g. 9092 for a
	// developer's broker). Default: free loopback ports.
	BrokerPorts []int
	// SASL adds a second client listener per node (SASLBootstrap) that
	// requires SASL authentication: PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512,
	// each for user SASLUser with password SASLPassword.
	SASL bool
	// Authorizer turns on KRaft's StandardAuthorizer with
	// allow.everyone.if.no.acl.found=false: SASLUser may then do only
	// what a test grants it with ACLs. The PLAINTEXT listener's principal
	// (User:ANONYMOUS, also the controllers' and brokers' own) is a super
	// user, so tests grant ACLs through Bootstrap.
	Authorizer bool
	// TLS, when set, adds a TLS client listener per node (TLSBootstrap)
	// serving this PEM certificate chain and unencrypted PKCS#8 key.
	TLS *TLSListener
}

// TLSListener is the broker side of a TLS listener, PEM encoded.
type TLSListener struct {
	CertChainPEM, KeyPEM string
	// ClientCAPEM, when set, requires clients to present a certificate
	// signed by it (mutual TLS).
	ClientCAPEM string
}

// The user every SASL mechanism of a SASL-enabled cluster accepts.
const (
	SASLUser     = "pipeline"
	SASLPassword = "pipeline-secret"
)

// Cluster is a running local Kafka cluster of brokers in KRaft combined mode.
type Cluster struct {
	opts      Options
	java      string
	libs      string
	clusterID string
	nodes     []*node
}

// Start resolves the jars (once), formats storage and starts every node,
// returning when all brokers are registered and answer metadata requests.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	if opts.Nodes == 0 {
		opts.Nodes = 1
	}
	if opts.Dir == "" {
		return nil, errors.New("kafkatest: Options.Dir is required")
	}
	if opts.ReadyTimeout == 0 {
		opts.ReadyTimeout = 2 * time.Minute
	}
	java, err := JavaCommand()
	if err != nil {
		return nil, err
	}
	libs, err := ResolveJars()
	if err != nil {
		return nil, err
	}
	if len(opts.BrokerPorts) != 0 && len(opts.BrokerPorts) != opts.Nodes {
		return nil, fmt.Errorf("kafkatest: %d broker ports for %d nodes", len(opts.BrokerPorts), opts.Nodes)
	}
	ports, err := freePorts(4 * opts.Nodes)
	if err != nil {
		return nil, err
	}
	for i, p := range opts.BrokerPorts {
		ports[4*i] = p
	}
	c := &Cluster{opts: opts, java: java, libs: libs, clusterID: newClusterID()}
	var voters []string
	for i := 0; i < opts.Nodes; i++ {
		n := &node{
			id:       i + 1,
			port:     ports[4*i],
			ctrlPort: ports[4*i+1],
			dir:      filepath.Join(opts.Dir, fmt.Sprintf("node-%d", i+1)),
		}
		if opts.SASL {
			n.saslPort = ports[4*i+2]
		}
		if opts.TLS != nil {
			n.tlsPort = ports[4*i+3]
		}
		c.nodes = append(c.nodes, n)
		voters = append(voters, fmt.Sprintf("%d@127.0.0.1:%d", n.id, n.ctrlPort))
	}
	for _, n := range c.nodes {
		if err := n.writeConfig(c.serverProperties(n, strings.Join(voters, ","))); err != nil {
			return nil, err
		}
	}
	// Formatting starts a JVM per node: do them side by side.
	errs := make([]error, len(c.nodes))
	var wg sync.WaitGroup
	for i, n := range c.nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = n.format(ctx, c.java, c.libs, c.clusterID, c.formatArgs()...)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	for _, n := range c.nodes {
		if err := n.start(c.java, c.libs, opts.Detached); err != nil {
			c.Close()
			return nil, err
		}
	}
	ctx, cancel := context.WithTimeout(ctx, opts.ReadyTimeout)
	defer cancel()
	if err := c.awaitBrokers(ctx, c.ids()...); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// Bootstrap returns every broker's address, host:port.
func (c *Cluster) Bootstrap() []string {
	var addrs []string
	for _, n := range c.nodes {
		addrs = append(addrs, n.addr())
	}
	return addrs
}

// SASLBootstrap returns every broker's SASL listener, host:port; empty
// unless Options.SASL.
func (c *Cluster) SASLBootstrap() []string {
	var addrs []string
	for _, n := range c.nodes {
		if n.saslPort != 0 {
			addrs = append(addrs, fmt.Sprintf("127.0.0.1:%d", n.saslPort))
		}
	}
	return addrs
}

// TLSBootstrap returns every broker's TLS listener, host:port; empty unless
// Options.TLS.
func (c *Cluster) TLSBootstrap() []string {
	var addrs []string
	for _, n := range c.nodes {
		if n.tlsPort != 0 {
			addrs = append(addrs, fmt.Sprintf("127.0.0.1:%d", n.tlsPort))
		}
	}
	return addrs
}

// formatArgs adds the SCRAM credentials to the metadata log at format time:
// KRaft clusters keep them there, so they exist before the first start.
func (c *Cluster) formatArgs() []string {
	if !c.opts.SASL {
		return nil
	}
	var args []string
	for _, mech := range []string{"SCRAM-SHA-256", "SCRAM-SHA-512"} {
		args = append(args, "--add-scram", fmt.Sprintf("%s=[name=%s,password=%s]", mech, SASLUser, SASLPassword))
	}
	return args
}

// Dir is the directory holding every node's config, data and logs.
func (c *Cluster) Dir() string { return c.opts.Dir }

// BrokerIDs are the node ids, 1..Nodes.
func (c *Cluster) BrokerIDs() []int32 {
	ids := make([]int32, len(c.nodes))
	for i, n := range c.nodes {
		ids[i] = int32(n.id)
	}
	return ids
}

// PIDs are the broker processes' ids, by node id (0 when stopped).
func (c *Cluster) PIDs() map[int32]int {
	m := map[int32]int{}
	for _, n := range c.nodes {
		m[int32(n.id)] = n.pid()
	}
	return m
}

// KillBroker kills one broker with SIGKILL, as a crash would.
func (c *Cluster) KillBroker(id int32) error {
	n, err := c.node(id)
	if err != nil {
		return err
	}
	return n.stop(0)
}

// StopBroker stops one broker gracefully (SIGTERM, controlled shutdown).
func (c *Cluster) StopBroker(id int32) error {
	n, err := c.node(id)
	if err != nil {
		return err
	}
	return n.stop(30 * time.Second)
}

// StartBroker restarts a stopped broker with the same ports and data, and
// waits until it is registered again.
func (c *Cluster) StartBroker(ctx context.Context, id int32) error {
	n, err := c.node(id)
	if err != nil {
		return err
	}
	if err := n.start(c.java, c.libs, c.opts.Detached); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, c.opts.ReadyTimeout)
	defer cancel()
	return c.awaitBrokers(ctx, n.id)
}

// Close stops every broker gracefully, killing those that do not stop in
// time. Data and logs stay in Dir.
func (c *Cluster) Close() error {
	var errs []error
	var wg sync.WaitGroup
	var mu sync.Mutex
	for _, n := range c.nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := n.stop(20 * time.Second); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (c *Cluster) node(id int32) (*node, error) {
	for _, n := range c.nodes {
		if int32(n.id) == id {
			return n, nil
		}
	}
	return nil, fmt.Errorf("kafkatest: no broker %d in this cluster", id)
}

func (c *Cluster) ids() []int {
	ids := make([]int, len(c.nodes))
	for i, n := range c.nodes {
		ids[i] = n.id
	}
	return ids
}

// awaitBrokers polls metadata until every given broker is registered,
// failing fast (with the log's tail) if a broker process exits.
func (c *Cluster) awaitBrokers(ctx context.Context, ids ...int) error {
	var lastErr error
	for {
		for _, n := range c.nodes {
			if err := n.exitErr(); err != nil {
				return fmt.Errorf("kafka broker %d exited during start-up: %v\nlast lines of %s:\n%s",
					n.id, err, n.logFile(), n.logTail(30))
			}
		}
		lastErr = c.brokersRegistered(ctx, ids)
		if lastErr == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kafka brokers %v not ready (logs in %s): %w", ids, c.opts.Dir, lastErr)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func (c *Cluster) brokersRegistered(ctx context.Context, ids []int) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Bootstrap()...), kgo.RequestRetries(0))
	if err != nil {
		return err
	}
	defer cl.Close()
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	md, err := kadm.NewClient(cl).BrokerMetadata(rctx)
	if err != nil {
		return err
	}
	have := map[int32]bool{}
	for _, b := range md.Brokers {
		have[b.NodeID] = true
	}
	for _, id := range ids {
		if !have[int32(id)] {
			return fmt.Errorf("broker %d not registered yet", id)
		}
	}
	return nil
}

func (c *Cluster) serverProperties(n *node, voters string) map[string]string {
	rf, minISR := "1", "1"
	if len(c.nodes) >= 3 {
		rf, minISR = "3", "2"
	}
	p := map[string]string{
		"process.roles":                    "broker,controller",
		"node.id":                          fmt.Sprint(n.id),
		"controller.quorum.voters":         voters,
		"listeners":                        fmt.Sprintf("PLAINTEXT://127.0.0.1:%d,CONTROLLER://127.0.0.1:%d", n.port, n.ctrlPort),
		"advertised.listeners":             "PLAINTEXT://" + n.addr(),
		"inter.broker.listener.name":       "PLAINTEXT",
		"controller.listener.names":        "CONTROLLER",
		"listener.security.protocol.map":   "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
		"log.dirs":                         filepath.Join(n.dir, "data"),
		"offsets.topic.replication.factor": rf,
		// Few partitions for the internal topics: the first group join and
		// the first transaction create them, and tests wait for that.
		"offsets.topic.num.partitions":                     "4",
		"transaction.state.log.num.partitions":             "4",
		"transaction.state.log.replication.factor":         rf,
		"transaction.state.log.min.isr":                    minISR,
		"share.coordinator.state.topic.replication.factor": rf,
		"share.coordinator.state.topic.min.isr":            minISR,
		"default.replication.factor":                       rf,
		"min.insync.replicas":                              minISR,
		"group.initial.rebalance.delay.ms":                 "0",
		// Topics are created on purpose by the pipeline and the tests; a
		// typo must not silently create an empty one.
		"auto.create.topics.enable": "false",
	}
	if n.saslPort != 0 {
		p["listeners"] += fmt.Sprintf(",SASL://127.0.0.1:%d", n.saslPort)
		p["advertised.listeners"] += fmt.Sprintf(",SASL://127.0.0.1:%d", n.saslPort)
		p["listener.security.protocol.map"] += ",SASL:SASL_PLAINTEXT"
		p["sasl.enabled.mechanisms"] = "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512"
		p["listener.name.sasl.plain.sasl.jaas.config"] = fmt.Sprintf(
			`org.apache.kafka.common.security.plain.PlainLoginModule required user_%s="%s";`, SASLUser, SASLPassword)
		for _, m := range []string{"scram-sha-256", "scram-sha-512"} {
			p["listener.name.sasl."+m+".sasl.jaas.config"] = `org.apache.kafka.common.security.scram.ScramLoginModule required;`
		}
	}
	if c.opts.Authorizer {
		p["authorizer.class.name"] = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
		p["super.users"] = "User:ANONYMOUS"
		p["allow.everyone.if.no.acl.found"] = "false"
	}
	if n.tlsPort != 0 {
		t := c.opts.TLS
		p["listeners"] += fmt.Sprintf(",TLS://127.0.0.1:%d", n.tlsPort)
		p["advertised.listeners"] += fmt.Sprintf(",TLS://127.0.0.1:%d", n.tlsPort)
		p["listener.security.protocol.map"] += ",TLS:SSL"
		p["listener.name.tls.ssl.keystore.type"] = "PEM"
		p["listener.name.tls.ssl.keystore.certificate.chain"] = propertyValue(t.CertChainPEM)
		p["listener.name.tls.ssl.keystore.key"] = propertyValue(t.KeyPEM)
		if t.ClientCAPEM != "" {
			p["listener.name.tls.ssl.client.auth"] = "required"
			p["listener.name.tls.ssl.truststore.type"] = "PEM"
			p["listener.name.tls.ssl.truststore.certificates"] = propertyValue(t.ClientCAPEM)
		}
	}
	for k, v := range c.opts.Properties {
		p[k] = v
	}
	return p
}

// freePorts asks the kernel for n distinct free loopback ports, holding all
// listeners open until every port is chosen so none is handed out twice.
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("finding a free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// newClusterID makes a Kafka cluster id (16 random bytes, unpadded URL-safe
// base64), saving a JVM start for `kafka-storage random-uuid`. Like Kafka's
// own Uuid.randomUuid it never starts with '-': one in 64 did, and
// kafka-storage read it as an option ("--cluster-id: expected one
// argument"), failing a cluster start in CI.
func newClusterID() string {
	for {
		var b [16]byte
		if _, err := rand.Read(b[:]); err != nil {
			panic(err) // crypto/rand never fails on Linux
		}
		if id := base64.RawURLEncoding.EncodeToString(b[:]); id[0] != '-' {
			return id
		}
	}
}

func writeFileAtomic(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// propertyValue escapes a multi-line value (a PEM block) for a Java
// .properties file, which reads \n as a newline.
func propertyValue(v string) string {
	return strings.ReplaceAll(strings.TrimSpace(v), "\n", `\n`)
}
