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
//	POST /api/v1/savepoints   {"dir": NAME}: take a savepoint into NAME below
//	                          admin.savepoint_dir, answer when it is complete
//	                          (bearer token admin.token; off without one)
//	GET  /debug/pprof/...     Go profiles (CPU, heap, goroutines, trace);
//	                          bearer token admin.token, off without one
//
// Savepoints never leave admin.savepoint_dir (default ./savepoints): a
// request names a directory below it, relative ("sp-1", "daily/sp-1") or
// absolute inside it; "..", other absolute paths, missing parents and
// symbolic links that lead out are refused before the job is asked.
//
// Errors are JSON {"error": "..."}: 400 for a bad request (a directory
// outside admin.savepoint_dir included), 401 for a missing or wrong token,
// 403 when the endpoint is off, 409 when the savepoint's directory is
// taken or the checkpoint that would serve the request already holds
// another savepoint (ask again), 500 when the savepoint failed (the job
// goes on).
package admin
