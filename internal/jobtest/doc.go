// Package jobtest runs a job's test file: each case's input records are
// written to a fresh in-memory Kafka (franz-go's kfake), the job's real
// engine runs on it until a completed checkpoint has read every input
// record, stops gracefully, and what it committed (read with
// read_committed) is compared with what the case expects. It is
// `pipeline test`.
//
// A test file (YAML) names the job (optional: -c does too), the
// variables of the job file's ${VAR}s (the process environment is not
// read, so a test gives the same result on every machine), and the
// cases:
//
//	job: config.yaml
//	env: {INPUT_TOPIC: numbers}
//	cases:
//	  - name: sums per parity
//	    input:
//	      numbers:                      # a topic the job reads (a source's or a table's)
//	        - {n: 1}                    # a value alone
//	        - {value: {n: 2}, key: k, partition: 1, timestamp: 2026-12-04T10:00:00Z, headers: {h: v}}
//	        - {value: '{"n": 3'}        # a string is written as its bytes
//	    expect:
//	      parity-sums:                  # a sink topic
//	        - {key: odd, value: {key: odd, count: 1, sum: 1}}
//	      dead_letters:
//	        - {value: '{"n": 3', code: decode}
//	    compare: per_key
//
// A job reading Avro, Protobuf or JSON Schema names the schemas its
// input is written with (rule 7):
//
//	schemas:
//	  numbers-avro: number.avsc                  # relative to the test file
//	  orders: [order-v1.avsc, order-v2.avsc]     # versions 1 and 2
//	  payments: {value: {file: payment.proto, message: Payment}, key: {schema: '"string"'}}
//	cases:
//	  - name: ...
//	    input:
//	      numbers-avro:
//	        - {n: 1, parity: odd, amount: 0.10, ts: 2026-12-04T10:00:00Z}
//	      orders:
//	        - {value: {id: 1}, schema_version: 1}
//
// The rules the package keeps:
//
//  1. A list item is a whole record when it is a mapping with a value
//     key, and a value alone otherwise (a value that is an object with a
//     field named value is written whole: {value: {value: 1}}). A value
//     written as a string is its bytes; null is a null value; any other
//     YAML value is its JSON, and as an expectation it compares as JSON:
//     objects whatever their field order, numbers as exact decimals.
//  2. An expected record without a key is a record without one. Key and
//     value always compare; partition, timestamp and headers when given
//     (headers: the ones listed must be there, others may be).
//  3. A sink topic the case does not list is not checked; dead letters
//     and late records the case does not list must be absent.
//     compare: names one rule for every topic, or a rule per topic and a
//     default for the rest ({default: last_per_key, tens: unordered}).
//  4. A run is done when a committed checkpoint holds every input
//     partition's end offset (a table's among its tables' offsets):
//     everything the job derives from its input is committed then. The
//     job then stops gracefully. Inputs are written before the job
//     starts, without transactions, so the end offset is one past the
//     last record; a table's topic, written before too, is read to its
//     end before any record is joined, so every record meets the table
//     as the case writes it, whatever the order of topics in the file.
//  5. Every run gets a fresh cluster: cases do not see each other's
//     records or checkpoints.
//  6. A crash run arms one to three fault points (internal/fault) drawn
//     from its seed, at least one that every checkpoint passes, so it
//     always fails at least once; it waits for the armed points that can
//     still fail, disarms the rest (reported) and must commit exactly
//     the crash-free run's records on every output topic, listed or not,
//     each by its comparison rule. Only exactly_once promises that.
//  7. A job that names a schema registry gets one of its own in every
//     run (franz-go's srfake over HTTP; config.WithSchemaRegistry points
//     the job at it, as config.WithBrokers points it at kfake), holding
//     the case's schemas (schemas:, the file's with the case's over
//     them, topic by topic) registered in the order written under
//     <topic>-value and <topic>-key, so every run gives them the same
//     ids. A value on a topic with a schema is written with it (the
//     version schema_version picks, else the last listed), framed with
//     its id, by the schema package's encoders: a value that does not
//     fit is a problem of the test file at the field it names. A string
//     the schema does not take, and !!binary, are their bytes (a record
//     not in the wire format); null is a null value. Keys likewise, with
//     the key schema.
//  8. A value or key a job wrote in the wire format, with an id the
//     run's registry has, compares as what it reads as: a string as its
//     text, anything else as its JSON (schema.Registry.JSON). Anything
//     else, such as the dead letter of a record not in the wire format,
//     compares as bytes.
//
// engine.go is the only file that knows the engine package.
package jobtest
