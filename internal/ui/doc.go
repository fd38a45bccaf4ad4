// Package ui is the job's web UI: static files (HTML, CSS and plain
// JavaScript, no build step) embedded in the binary and served by the
// admin listener under /ui/. The pages read the job only through the JSON
// API of internal/admin (docs/api.yaml), polling it; they load nothing
// from any other host (the Content-Security-Policy says so to the
// browser), so the UI works offline and behind a firewall.
//
// The admin token, which taking a savepoint needs, is typed into the
// savepoints page and sent in the Authorization header of that request
// only. It is kept in the page's memory, never in a cookie or in
// storage: no other site can make the browser send it (no CSRF), and a
// reload forgets it.
//
// Pages: overview, job graph, checkpoints, event time, group, dead
// letters and late records, savepoints, configuration. Each is a hash
// route of one document (#/graph), so the browser's back button and
// bookmarks work without a server-side router.
package ui
