// Package admin is the job's HTTP endpoint for people and machines:
// liveness and readiness for orchestrators, /metrics for Prometheus, and a
// small read-only JSON API about the job and its checkpoints. It listens on
// loopback by default (admin.listen).
//
//	GET /healthz             200 while the process serves requests
//	GET /readyz              200 once restored and running, else 503
//	GET /metrics             Prometheus text format
//	GET /api/v1/job          status, topology, guarantee, partitions, checkpoint
//	GET /api/v1/checkpoints  recently completed checkpoints, newest first
//	GET /debug/pprof/...     Go profiles (CPU, heap, goroutines, trace)
package admin
