// Package admin is the job's HTTP endpoint for people and machines:
// liveness and readiness for orchestrators, /metrics for Prometheus, a
// JSON API about the job (docs/api.yaml is its reference, held to the
// handlers by api_test.go), the web UI (internal/ui) that reads only that
// API, and one endpoint that acts: taking a savepoint. It listens on
// loopback by default (admin.listen).
//
//	GET  /healthz                 200 while the process serves requests
//	GET  /readyz                  200 once restored and running, else 503
//	GET  /metrics                 Prometheus text format
//	GET  /api/v1/job              status, topology, partitions, checkpoint, restarts, group
//	GET  /api/v1/checkpoints      recently completed and aborted checkpoints, newest first
//	GET  /api/v1/graph            the job graph with each node's numbers
//	GET  /api/v1/flow             records in and out, lag, dead letters, restarts by reason
//	GET  /api/v1/eventtime        watermarks of the job and of each partition, windows
//	GET  /api/v1/group            the whole job: every process's status and numbers
//	                              (group mode: asked of each member at the address it
//	                              advertised, group.go), and their sums
//	GET  /api/v1/dead-letters     the newest committed dead letters (?limit=N, at most 200)
//	GET  /api/v1/late-records     the newest committed late records (?limit=N)
//	GET  /api/v1/savepoints       the savepoints below admin.savepoint_dir
//	POST /api/v1/savepoints       {"dir": NAME}: take a savepoint into NAME below
//	                              admin.savepoint_dir, answer when it is complete
//	                              (bearer token admin.token; off without one)
//	GET  /api/v1/config           the effective configuration, secrets masked
//	GET  /ui/                     the web UI; / leads there
//	GET  /debug/pprof/...         Go profiles (CPU, heap, goroutines, trace);
//	                              bearer token admin.token, off without one
//
// The JSON views of numbers (graph, flow, eventtime) are read from the
// job's metrics registry at each request, so they agree with /metrics;
// their counts are totals since the process started, and a client
// computes rates from two answers. The tails read the topics with
// read_committed when asked (at most once a second, however many ask),
// and show keys, values and headers as text, cut to a length.
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
