package kafkatest

import (
	"context"
	"fmt"
	"net/netip"
	"strconv"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/wait"
)

// ContainerImage is the official Apache Kafka image, at the same version the
// local launcher runs.
const ContainerImage = "apache/kafka:" + KafkaVersion

// startContainer runs a single KRaft node in Docker where an engine answers.
// The broker must advertise an address the host can reach before the
// container starts, so a free host port is chosen first and bound
// explicitly, instead of letting Docker pick one after the fact.
func startContainer(ctx context.Context) ([]string, func() error, error) {
	provider, err := testcontainers.NewDockerProvider()
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %v", errNoDocker, err)
	}
	if err := provider.Health(ctx); err != nil {
		return nil, nil, fmt.Errorf("%w: %v", errNoDocker, err)
	}
	ports, err := freePorts(1)
	if err != nil {
		return nil, nil, err
	}
	hostPort := ports[0]
	addr := "127.0.0.1:" + strconv.Itoa(hostPort)
	ctr, err := testcontainers.Run(ctx, ContainerImage,
		testcontainers.WithExposedPorts("9092/tcp"),
		testcontainers.WithEnv(containerEnv(addr)),
		testcontainers.WithHostConfigModifier(func(hc *container.HostConfig) {
			hc.PortBindings = network.PortMap{
				network.MustParsePort("9092/tcp"): {{HostIP: netip.MustParseAddr("127.0.0.1"), HostPort: strconv.Itoa(hostPort)}},
			}
		}),
		testcontainers.WithWaitStrategy(wait.ForLog("Kafka Server started")),
	)
	if err != nil {
		if ctr != nil {
			_ = testcontainers.TerminateContainer(ctr)
		}
		return nil, nil, fmt.Errorf("starting %s: %w", ContainerImage, err)
	}
	return []string{addr}, func() error { return testcontainers.TerminateContainer(ctr) }, nil
}

// containerEnv configures the image the way Options{Nodes: 1} configures the
// local launcher (the image maps KAFKA_FOO_BAR to foo.bar).
func containerEnv(advertised string) map[string]string {
	return map[string]string{
		"KAFKA_NODE_ID":                                          "1",
		"KAFKA_PROCESS_ROLES":                                    "broker,controller",
		"KAFKA_CONTROLLER_QUORUM_VOTERS":                         "1@localhost:9093",
		"KAFKA_LISTENERS":                                        "PLAINTEXT://:9092,CONTROLLER://:9093",
		"KAFKA_ADVERTISED_LISTENERS":                             "PLAINTEXT://" + advertised,
		"KAFKA_INTER_BROKER_LISTENER_NAME":                       "PLAINTEXT",
		"KAFKA_CONTROLLER_LISTENER_NAMES":                        "CONTROLLER",
		"KAFKA_LISTENER_SECURITY_PROTOCOL_MAP":                   "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
		"KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR":                 "1",
		"KAFKA_OFFSETS_TOPIC_NUM_PARTITIONS":                     "4",
		"KAFKA_TRANSACTION_STATE_LOG_NUM_PARTITIONS":             "4",
		"KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR":         "1",
		"KAFKA_TRANSACTION_STATE_LOG_MIN_ISR":                    "1",
		"KAFKA_SHARE_COORDINATOR_STATE_TOPIC_REPLICATION_FACTOR": "1",
		"KAFKA_SHARE_COORDINATOR_STATE_TOPIC_MIN_ISR":            "1",
		"KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS":                 "0",
		"KAFKA_AUTO_CREATE_TOPICS_ENABLE":                        "false",
	}
}
