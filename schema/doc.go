// Package schema reads and writes the schema registry formats (Avro,
// Protobuf, JSON Schema in the Confluent wire format) for a job, with a
// Confluent-compatible schema registry (franz-go's pkg/sr client).
//
// # Pieces
//
//   - Registry: the client, a cache of schemas by id (each compiled once
//     for reading), and the bookkeeping of outages.
//   - Set: one job's decoders (operator.Inputs, one per source topic read
//     in a schema format, with a key format or an envelope) and sink
//     encoders (Sink).
//   - Sink: one sink's schema (derived from what the job writes, a
//     schema_file, or a registered subject and version), its id, and the
//     encoder of its values.
//   - avro.go (hamba/avro), protobuf.go (protocompile and dynamicpb),
//     jsonschema.go (santhosh-tekuri/jsonschema), and the derivation of a
//     sink's schema from the configuration and the input's schema
//     (derive.go, deriveformats.go).
//
// # Invariants
//
//  1. Each record is read with its own writer schema: the id in its
//     first five bytes. Producers may evolve their schema mid-stream; a
//     record never meets a schema it was not written with.
//  2. Decoding does no I/O. A source task calls Set.Prefetch on what it
//     polled before it routes it; Prefetch fetches every id it has not
//     seen (and the schemas they reference) and caches the answer for
//     the life of the process, an id the registry does not have
//     included. The decoders then only read the cache (lock-free).
//  3. An unreachable registry is waited for, never guessed around:
//     Prefetch and Prepare return or retry ErrUnavailable (no answer,
//     5xx, 429, refused credentials) and the records wait, unread, while
//     the job's checkpoints go on. Nothing is dead-lettered for an
//     outage. One log line says when it begins and one when it ends;
//     pipeline_schema_registry_errors_total and _waiting count it.
//  4. A record whose id the registry does not have, or whose bytes do
//     not match their schema (or do not carry the framing), is a
//     *operator.RecordError with CodeSchema and the id: a dead letter,
//     its bytes unchanged; the job goes on.
//  5. A sink's schema is settled before anything is written (Prepare):
//     registered under its subject after the registry said it is
//     compatible with the subject's latest, or looked up when
//     auto_register is false. A refusal (ErrRefused) carries the
//     registry's reason and stops the start.
//  6. Values are the operator's domain, with their real types: exact
//     integers, operator.Decimal for decimals, time.Time for timestamps
//     and dates, []byte for bytes, unions as the value of their branch.
//     Writing takes them back exactly: a decimal that does not fit the
//     schema's scale is refused (a dead letter), not rounded, except for
//     the values avg computes, which are rounded half away from zero.
package schema
