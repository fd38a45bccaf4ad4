// Package kclient turns the job's kafka settings (brokers, client id, TLS,
// SASL) into franz-go client options, so every client the job opens —
// sources, sinks, admin — connects the same way.
package kclient
