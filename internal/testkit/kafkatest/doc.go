// Package kafkatest gives tests (and people, through cmd/kafka-local) a real
// Apache Kafka 4.x broker. The exactly-once promise of this project is only
// ever proven against the real transaction coordinator, never a fake.
//
// A test asks for a broker with Broker(t) and gets one, in this order:
//
//  1. KAFKA_BOOTSTRAP is set: that cluster is used as it is. `make test`
//     starts one local broker this way and shares it across every package
//     of the run.
//  2. Java 17+ is on the machine: a broker is started from the Maven Central
//     jars (resolved once into a cache directory by the embedded pom.xml),
//     in KRaft combined mode on free loopback ports, formatted, awaited, and
//     shared by every test of the package (one per test binary).
//  3. A Docker engine answers: the official apache/kafka image through
//     testcontainers-go.
//
// Otherwise the test fails with instructions; it never skips silently.
// Under `go test -short` broker tests skip.
//
// StartCluster(t, 3) always starts a cluster of its own (fault tests stop and
// restart its brokers, which must not disturb other tests). Broker logs of a
// failed test are kept and their path is printed.
package kafkatest
