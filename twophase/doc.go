// Package twophase models the two-phase commit that makes outputs
// exactly-once, as a pure state machine (no I/O, no clock, no goroutines)
// driven by a thin loop that does the Kafka work:
//
//  1. Barrier N reaches every task; each participant prepares: it stops
//     adding to epoch N and makes epoch N durable but invisible (for Kafka,
//     the producer flushes transaction N).
//  2. When every participant prepared, the coordinator decides commit and
//     writes the decision. For Kafka the decision is the checkpoint record
//     written into transaction N itself, and committing the transaction is
//     the decision: there is no window where the checkpoint is complete but
//     its outputs are not.
//  3. Commits happen strictly in checkpoint order; a failed commit, a
//     timeout or a participant's refusal aborts epoch N and the job
//     restarts from the last committed checkpoint.
//  4. On recovery, participants fence their predecessors (for Kafka,
//     InitProducerId aborts what a dead instance left open) before any new
//     epoch begins.
//
// Its Participant interface is what a non-Kafka sink will implement to take
// part, with the checkpoint record as its decision log.
package twophase
