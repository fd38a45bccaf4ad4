// Package keyed holds the keyed operators of a job graph: the running
// aggregate (with its state TTL), the window, the interval join of two
// streams, and the pass-through that writes an output target's records as
// they are. Each runs on one worker
// over the key groups the worker owns, with its state in a store of the
// state package; the engine hands it inputs and barriers and takes what it
// produces.
//
// The contract, per operator:
//
//  1. Process is called once per input that reached the operator, in the
//     order the worker received them: the input after the stateless steps
//     (its group key, its decoded value), its key's hash, and, with event
//     time, the input's event time and its partition's watermark. It may
//     update state and returns the records to write: outputs (one per sink
//     that reads the operator), dead letters (a value that fails), late
//     records. It never blocks and does no I/O.
//  2. Barrier is called at checkpoint barrier N with the job's watermark
//     W(N) (window.NoWatermark without event time), after every input
//     before the barrier and before any after it: the operator fires what
//     W(N) makes due (windows, expiring keys), emits it, and returns the
//     changelog records of every key changed since the previous barrier,
//     and the size of its state. The checkpoint therefore describes
//     exactly the inputs before barrier N.
//  3. The store (Stateful.Store) is filled by a restore before the first
//     Process, and read by a savepoint's export right after a Barrier.
//
// The engine gives an operator what it needs of the job (Env: dead
// letters, recycling decoded inputs, metrics, the clock) and of its sinks
// (Sinks); the package imports no engine type.
package keyed
