// Package admin is the job's HTTP endpoint for people and machines:
// liveness and readiness for orchestrators, /metrics for Prometheus, a
// small JSON API about the job and its checkpoints, and one endpoint that
// acts: taking a savepoint. It listens on loopback by default
// (admin.listen).
//
//	GET  /healthz             200 while the process serves requests
//	GET  /readyz              200 once restored and running, else 503
//	GET  /metrics             Prometheus text format
//	GET  /api/v1/job          status, topology, guarantee, partitions, checkpoint
//	GET  /api/v1/checkpoints  recently completed checkpoints, newest first
//	POST /api/v1/savepoints   {"dir": PATH}: take a savepoint, answer when it is
//	                          complete (bearer token admin.token; off without one)
//	GET  /debug/pprof/...     Go profiles (CPU, heap, goroutines, trace)
//
// Errors are JSON {"error": "..."}: 400 for a bad request, 401 for a
// missing or wrong token, 403 when the endpoint is off, 409 when the
// savepoint's directory is taken, 500 when the savepoint failed (the job
// goes on).
package admin
