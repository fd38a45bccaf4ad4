// Package deploytest holds the tests of what deploy/, the Dockerfile and
// docker-compose.yml promise, since no Docker engine runs where the tests
// do:
//
//   - promtool accepts deploy/prometheus/prometheus.yml and alerts.yml, and
//     the rule unit tests in alerts_test.yml pass, with every alert made to
//     fire and not to fire;
//   - every metric named in a PromQL expression of the alert rules and of
//     the Grafana dashboard is one the pipeline exports (metrics.New, the
//     Kafka clients' kprom metrics, the Go and process collectors), or
//     "up"; and every dashboard query parses;
//   - the Dockerfile builds ./cmd/pipeline statically and runs it as a
//     non-root user with the config the compose file mounts;
//   - docker-compose.yml, loaded by compose-go as docker compose would,
//     wires the services, ports, health checks, dependencies and mounts,
//     and the mounted files exist; Kafka's log directories and the job's
//     admin.savepoint_dir are in named volumes, a restarting datagen
//     resumes instead of writing 1, 2, ... again, and the README (and any
//     document in docs/) starts the stack with the command the file names.
//
// The package has no code outside its tests.
package deploytest
