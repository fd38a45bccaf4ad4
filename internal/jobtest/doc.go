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
//	      numbers:                      # a topic the job reads
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
//  4. A run is done when a committed checkpoint holds every input
//     partition's end offset: everything the job derives from its input
//     is committed then. The job then stops gracefully. Inputs are
//     written before the job starts, without transactions, so the end
//     offset is one past the last record.
//  5. Every run gets a fresh cluster: cases do not see each other's
//     records or checkpoints.
//  6. A crash run arms one to three fault points (internal/fault) drawn
//     from its seed, at least one that every checkpoint passes, so it
//     always fails at least once; it waits for the armed points that can
//     still fail, disarms the rest (reported) and must commit exactly
//     the crash-free run's records, by the case's comparison rule. Only
//     exactly_once promises that.
//
// engine.go is the only file that knows the engine package.
package jobtest
