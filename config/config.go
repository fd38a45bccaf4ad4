package config

import "time"

// Config is one job: where it reads, what it computes, where it writes, and
// how strongly it promises that results are exact. The zero value is not
// useful; Load and Parse return a Config with every default applied.
type Config struct {
	// Name identifies the job. It names the internal topics
	// (<name>-checkpoints, <name>-state), the transactional ids and the
	// consumer group that shows lag. Changing it starts a new job from
	// scratch. Required. Flink: pipeline.name; Kafka Streams: application.id.
	Name string `yaml:"name"`

	// Guarantee is the delivery guarantee: at_most_once, at_least_once or
	// exactly_once. Default exactly_once.
	Guarantee Guarantee `yaml:"guarantee"`

	// Workers is the number of keyed-operator goroutines key groups are
	// spread over. Default 0: one per CPU (GOMAXPROCS). Flink: parallelism.
	Workers int `yaml:"workers"`

	Kafka      Kafka      `yaml:"kafka"`
	Checkpoint Checkpoint `yaml:"checkpoint"`
	Sources    []Source   `yaml:"sources"`
	// Tables are compacted topics read as keyed state, for join steps to
	// look records up in.
	Tables  []Table `yaml:"tables"`
	Steps   []Step  `yaml:"steps"`
	Sinks   []Sink  `yaml:"sinks"`
	Admin   Admin   `yaml:"admin"`
	Logging Logging `yaml:"logging"`
	Scale   Scale   `yaml:"scale"`
	// SchemaRegistry is the schema registry that the avro, protobuf and
	// json_schema formats of sources and sinks use. Required by them.
	SchemaRegistry SchemaRegistry `yaml:"schema_registry"`

	// file and where are set by Parse: the file name and where each path
	// was written, for problems found after loading (see Errorf).
	file  string
	where positions
	// joinRepartitions are the joins WithJoinRepartitions wrote a
	// repartition for (joinrepartition.go).
	joinRepartitions []JoinRepartition
}

// Guarantee is a delivery guarantee level.
type Guarantee string

const (
	AtMostOnce  Guarantee = "at_most_once"
	AtLeastOnce Guarantee = "at_least_once"
	ExactlyOnce Guarantee = "exactly_once"
)

// Checkpoints reports whether the guarantee keeps checkpoints: epochs,
// barriers, restores and savepoints (exactly_once, at_least_once).
// at_most_once keeps none: offsets go to the consumer group as records are
// polled, state lives in memory only.
func (g Guarantee) Checkpoints() bool { return g != AtMostOnce }

// TransactionalOutputs reports whether the outputs are written inside each
// epoch's transaction with the state and the checkpoint record
// (exactly_once); otherwise a plain idempotent producer writes them, flushed
// before the epoch commits (at_least_once) or as they come (at_most_once).
func (g Guarantee) TransactionalOutputs() bool { return g == ExactlyOnce }

// Kafka is how the job connects to its cluster.
type Kafka struct {
	// Brokers are the seed brokers, host:port. Required (at least one).
	// Java client: bootstrap.servers.
	Brokers []string `yaml:"brokers"`
	// ClientID is sent with every request. Default "pipeline-<name>".
	ClientID string `yaml:"client_id"`
	// TransactionTimeout is the producer's transaction timeout. It must
	// cover checkpoint.interval + checkpoint.timeout and be at most the
	// brokers' transaction.max.timeout.ms. Default 60s.
	// Java client: transaction.timeout.ms.
	TransactionTimeout time.Duration `yaml:"transaction_timeout"`
	// Compression is the codec of every record batch the job produces:
	// outputs, dead letters, state changes and checkpoint records.
	// Default snappy. Java client: compression.type (default none).
	Compression Compression `yaml:"compression"`
	TLS         TLS         `yaml:"tls"`
	SASL        SASL        `yaml:"sasl"`
}

// Compression names a record batch codec.
type Compression string

const (
	CompressionNone   Compression = "none"
	CompressionGzip   Compression = "gzip"
	CompressionSnappy Compression = "snappy"
	CompressionLZ4    Compression = "lz4"
	CompressionZstd   Compression = "zstd"
)

// Compressions are the codecs kafka.compression accepts.
var Compressions = []Compression{CompressionNone, CompressionGzip, CompressionSnappy, CompressionLZ4, CompressionZstd}

// TLS configures an encrypted connection. Setting any file enables TLS.
type TLS struct {
	// Enabled turns TLS on with the system roots when no file is given.
	// Default false.
	Enabled bool `yaml:"enabled"`
	// CAFile is a PEM bundle of roots to trust instead of the system's.
	CAFile string `yaml:"ca_file"`
	// CertFile and KeyFile are a PEM client certificate and key, for
	// mutual TLS. Both or neither.
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
	// ServerName overrides the name checked in the broker's certificate.
	ServerName string `yaml:"server_name"`
	// InsecureSkipVerify disables certificate checks. Default false.
	InsecureSkipVerify bool `yaml:"insecure_skip_verify"`
}

// SASL configures authentication. Empty mechanism: none.
type SASL struct {
	// Mechanism is PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512. Default: none.
	Mechanism SASLMechanism `yaml:"mechanism"`
	// Username and Password are required when Mechanism is set.
	Username string `yaml:"username"`
	Password string `yaml:"password" secret:"true"`
}

// SASLMechanism names a SASL mechanism.
type SASLMechanism string

const (
	SASLNone        SASLMechanism = ""
	SASLPlain       SASLMechanism = "PLAIN"
	SASLScramSHA256 SASLMechanism = "SCRAM-SHA-256"
	SASLScramSHA512 SASLMechanism = "SCRAM-SHA-512"
)

// Checkpoint configures consistent checkpoints (and, under exactly_once,
// the transactions they commit).
type Checkpoint struct {
	// Interval between the starts of two checkpoints. Default 1s.
	// Flink: execution.checkpointing.interval; Kafka Streams:
	// commit.interval.ms.
	Interval time.Duration `yaml:"interval"`
	// Timeout after which an unfinished checkpoint is aborted and the job
	// restarts from the last complete one. Default 30s.
	// Flink: execution.checkpointing.timeout.
	Timeout time.Duration `yaml:"timeout"`
	// MinPause is the least time between the end of one checkpoint and the
	// start of the next. Default 0. Flink: execution.checkpointing.min-pause.
	MinPause time.Duration `yaml:"min_pause"`
	// KeyGroups is the number of key groups keyed state is split into
	// (hash(key) mod KeyGroups). Fixed for the life of the job: it is the
	// most workers the job can ever use. Default 128, range 1..32768.
	// Flink: pipeline.max-parallelism.
	KeyGroups int `yaml:"key_groups"`
	// ReplicationFactor of the job's internal topics (checkpoints and
	// state), when they are created. Default -1: the brokers' default.
	ReplicationFactor int `yaml:"replication_factor"`
}

// StartPosition says where a source starts when no checkpoint exists.
type StartPosition struct {
	// Kind is earliest, latest or timestamp.
	Kind StartKind
	// At is the timestamp for Kind == StartAtTimestamp.
	At time.Time
}

// StartKind is the kind of a StartPosition.
type StartKind string

const (
	StartEarliest    StartKind = "earliest"
	StartLatest      StartKind = "latest"
	StartAtTimestamp StartKind = "timestamp"
)

// Format is the encoding of record values (and keys).
type Format string

const (
	FormatJSON Format = "json"
	FormatRaw  Format = "raw"
	// The schema registry formats: the Confluent wire framing (a zero
	// magic byte, the 4-byte schema id, for Protobuf the message indexes)
	// around Avro binary, a Protobuf message, or JSON text that must
	// validate against a JSON Schema.
	FormatAvro       Format = "avro"
	FormatProtobuf   Format = "protobuf"
	FormatJSONSchema Format = "json_schema"
	// FormatJoinRecord is no format a configuration can name: it is the
	// encoding of the internal topic through which the job repartitions
	// a join's stream by its join key (joinrepartition.go), the record as
	// the join's input holds it, decoded values and all, so that it
	// crosses exactly whatever it was read in.
	FormatJoinRecord Format = "join-record"
)

// Registered reports whether f is a schema registry format.
func (f Format) Registered() bool {
	return f == FormatAvro || f == FormatProtobuf || f == FormatJSONSchema
}

// Envelope is how a source's values wrap the rows they carry.
type Envelope string

const (
	EnvelopeNone Envelope = "none"
	// EnvelopeDebezium: Debezium change events ({op, before, after,
	// source, ts_ms}, in JSON also inside {schema, payload}).
	EnvelopeDebezium Envelope = "debezium"
)

// SubjectStrategy names how a sink's schema subject is named.
type SubjectStrategy string

const (
	// TopicNameStrategy: <topic>-value (Confluent's default).
	TopicNameStrategy SubjectStrategy = "topic_name"
	// RecordNameStrategy: the fully qualified record (message) name.
	RecordNameStrategy SubjectStrategy = "record_name"
)

// SchemaRegistry is how the job reaches a Confluent-compatible schema
// registry (Confluent Schema Registry, Apicurio's ccompat API, Karapace,
// Redpanda). Unset (no url): the schema formats cannot be used.
type SchemaRegistry struct {
	// URL is one or more base URLs, tried in order. Java client:
	// schema.registry.url.
	URL []string `yaml:"url"`
	// Username and Password for HTTP basic authentication. Java client:
	// basic.auth.user.info.
	Username string `yaml:"username"`
	Password string `yaml:"password" secret:"true"`
	// Token is a bearer token (instead of basic authentication). Java
	// client: bearer.auth.token.
	Token string `yaml:"token" secret:"true"`
	// TLS as kafka.tls. Java client: schema.registry.ssl.*.
	TLS TLS `yaml:"tls"`
	// Timeout of one request. Default 10s.
	Timeout time.Duration `yaml:"timeout"`
}

// Enabled reports whether a registry is configured.
func (r SchemaRegistry) Enabled() bool { return len(r.URL) > 0 }

// Source reads every partition of its topics.
type Source struct {
	// ID is the stable operator id of this source (its offsets are state).
	// Default "source-<index>".
	ID string `yaml:"id"`
	// Topics to read. Required (at least one).
	Topics []string `yaml:"topics"`
	// Start is where to begin when the job has no checkpoint: earliest,
	// latest, or an RFC 3339 timestamp. Default earliest.
	// Java client: auto.offset.reset.
	Start StartPosition `yaml:"start"`
	// Format of record values: json, raw, avro, protobuf or json_schema.
	// Default json.
	Format Format `yaml:"format"`
	// KeyFormat of record keys: raw (the key's bytes, as text), json,
	// avro, protobuf or json_schema. Default raw.
	KeyFormat Format `yaml:"key_format"`
	// Envelope of the values: none or debezium. Default none.
	Envelope Envelope `yaml:"envelope"`
	// EventTime turns on event time for this source: watermarks per partition. nil: none.
	EventTime *EventTime `yaml:"event_time"`
}

// EventTime says how a source's records are placed in event time.
type EventTime struct {
	// Timestamp is an expression giving the record's event time: RFC 3339 text or epoch milliseconds. Empty: the Kafka record timestamp.
	Timestamp string `yaml:"timestamp"`
	// MaxOutOfOrderness bounds the disorder per partition: a partition's watermark is its largest event time minus this. Default 0.
	MaxOutOfOrderness time.Duration `yaml:"max_out_of_orderness"`
	// IdleTimeout: a partition without records for this long (processing time) stops holding the watermark back. Default 0: off (deterministic).
	IdleTimeout time.Duration `yaml:"idle_timeout"`
	// MaxFuture: a record whose event time is further ahead of the processing time than this goes to the dead-letter topic (code future) and never moves its partition's watermark. Default 0: off (deterministic).
	MaxFuture time.Duration `yaml:"max_future"`
}

// Table is a compacted topic read as keyed state: the latest value of
// each record key, a tombstone (a null value) deleting the key. The topic
// is the table's changelog: the job keeps no copy of its own. Join steps
// look records up in it. Kafka Streams: a GlobalKTable; Flink: a lookup
// join's dimension table.
type Table struct {
	// ID names the table for join steps; in one id space with the
	// sources and steps. Required.
	ID string `yaml:"id"`
	// Topic is the table's topic, keyed by the table's key. Required.
	Topic string `yaml:"topic"`
	// Format of record values, as for sources: json, raw, or a schema
	// registry format (avro, protobuf, json_schema), each record decoded
	// with the writer schema its bytes name. Default json.
	Format Format `yaml:"format"`
	// KeyFormat of record keys, as for sources: raw (the key's bytes, as
	// text), json, avro, protobuf or json_schema (the decoded key's text
	// is looked up). Default raw.
	KeyFormat Format `yaml:"key_format"`
	// Mode is where a group-mode job reads the table: broadcast (every
	// process reads every partition) or partitioned (each process the
	// table partitions of its stream partitions; the stream is first
	// repartitioned by the join key unless it is co-partitioned with the
	// table). Default broadcast.
	Mode TableMode `yaml:"mode"`
}

// TableMode is how the processes of a group-mode job share a table.
type TableMode string

const (
	// TableBroadcast: every process reads every partition of the table
	// and holds it whole (Kafka Streams' GlobalKTable). The default; the
	// only mode of a single-mode job.
	TableBroadcast TableMode = "broadcast"
	// TablePartitioned: table partition p goes to the process that owns
	// stream partition p (Kafka Streams' KTable): the job's one stream
	// topic co-partitioned with the table, each join looking the record
	// key up (join key _key), or else the stream repartitioned by the
	// join key first (joinrepartition.go).
	TablePartitioned TableMode = "partitioned"
)

// Join looks each record up in a table by a key it computes, and shows the
// table's value to the steps after it under a name of its own. With
// Stream instead of Table it is an interval join of two streams in event
// time (intervaljoin.go).
type Join struct {
	// Table is the id of the table looked up. Required unless Stream is
	// set.
	Table string `yaml:"table"`
	// Stream is the id of the other stream of an interval join (a source
	// or a stateless step); the step's from: is the left stream.
	Stream string `yaml:"stream"`
	// Key is an expression on the record whose text is looked up among
	// the table's record keys (an interval join: matched with OtherKey's
	// on the other stream). Required.
	Key string `yaml:"key"`
	// OtherKey is an interval join's key on the other stream's records.
	OtherKey string `yaml:"other_key"`
	// Within bounds an interval join: a record of the other stream at
	// event time t' matches a record at t when t-Before <= t' <= t+After.
	Within *JoinWithin `yaml:"within"`
	// LateRecords and LateTopic: where an interval join's late records
	// go, as a window's (default side_output to <name>-late).
	LateRecords LateRecords `yaml:"late_records"`
	LateTopic   string      `yaml:"late_topic"`
	// As is the name later expressions read the table's value by.
	// Required.
	As string `yaml:"as"`
	// How is inner (a record without a match is dropped, and counted) or
	// left (it goes on, with nil under As). Default inner.
	How JoinHow `yaml:"how"`
	// Time is when a table join looks the table up: processing_time (the
	// default: the table as it is when the record is processed) or
	// event_time (the table as of the record's event time, from versioned
	// values). Kafka Streams: a KStream–KTable join against a versioned
	// store (KIP-914).
	Time JoinTime `yaml:"time"`
	// History is how far behind the watermark a join as of event time
	// keeps a table's older values. Required with Time event_time. Kafka
	// Streams: the versioned store's historyRetention.
	History time.Duration `yaml:"history"`
}

// JoinTime is when a table join looks the table up.
type JoinTime string

const (
	// JoinProcessingTime: the table as it is when the record is processed.
	JoinProcessingTime JoinTime = "processing_time"
	// JoinEventTime: the table as of the record's event time.
	JoinEventTime JoinTime = "event_time"
)

// JoinWithin is an interval join's bounds, both inclusive. Flink
// between(-Before, After).
type JoinWithin struct {
	Before time.Duration `yaml:"before"`
	After  time.Duration `yaml:"after"`
}

// Interval reports whether j is an interval join of two streams (not a
// table lookup).
func (j *Join) Interval() bool { return j != nil && j.Stream != "" }

// JoinHow is what a join does with a record the table has no value for.
type JoinHow string

const (
	JoinInner JoinHow = "inner"
	JoinLeft  JoinHow = "left"
)

// Step is one stage of the chain. Exactly one of Filter, Map, KeyBy,
// Join, Aggregate and Window is set.
type Step struct {
	// ID is the stable operator id (state maps to operators by it).
	// Default "<kind>-<index>", e.g. "aggregate-3".
	ID string `yaml:"id"`
	// From names the step's input: a source id or the id of a step
	// above it; several ids merge them. Default: the step before it (the
	// first step reads every source, merged).
	From []string `yaml:"from"`
	// Filter keeps a record when the expression is true.
	Filter string `yaml:"filter"`
	// Map replaces a JSON record with an object whose fields are the
	// given expressions, in the order written.
	Map []Field `yaml:"map"`
	// KeyBy sets the record's group key to the expression's value.
	KeyBy string `yaml:"key_by"`
	// Join looks the record up in a table.
	Join *Join `yaml:"join"`
	// Aggregate reduces records per group key.
	Aggregate *Aggregate `yaml:"aggregate"`
	// Window is a windowed aggregate per group key.
	Window *Window `yaml:"window"`
}

// StepKind names what a Step does.
type StepKind string

const (
	StepFilter    StepKind = "filter"
	StepMap       StepKind = "map"
	StepKeyBy     StepKind = "key_by"
	StepJoin      StepKind = "join"
	StepAggregate StepKind = "aggregate"
	StepWindow    StepKind = "window"
)

// Kind reports which of the step's fields is set.
func (s Step) Kind() StepKind {
	switch {
	case s.Filter != "":
		return StepFilter
	case s.Map != nil:
		return StepMap
	case s.KeyBy != "":
		return StepKeyBy
	case s.Join != nil:
		return StepJoin
	case s.Aggregate != nil:
		return StepAggregate
	case s.Window != nil:
		return StepWindow
	}
	return ""
}

// Field is a named expression, in configuration order.
type Field struct {
	Name string
	Expr string
}

// Aggregate is a running (not windowed) reduce per group key.
type Aggregate struct {
	// Emit is every_record (one output per input: the running value) or
	// on_checkpoint (each changed key once per checkpoint: an upsert
	// stream). Default every_record.
	Emit EmitMode `yaml:"emit"`
	// TTL deletes a key's state when it was not updated for this long: event time when every source has event_time, else processing time. Default 0: never.
	TTL time.Duration `yaml:"ttl"`
	// Values are the named aggregates, e.g. "count: count()",
	// "sum: sum(n)", in output order. Required (at least one).
	Values []AggregateValue `yaml:"values"`
}

// EmitMode says when an aggregate emits.
type EmitMode string

const (
	EmitEveryRecord  EmitMode = "every_record"
	EmitOnCheckpoint EmitMode = "on_checkpoint"
)

// AggregateValue is one named aggregate: Func applied to Arg.
type AggregateValue struct {
	Name string
	Func AggregateFunc
	// Arg is the expression aggregated; empty for count.
	Arg string
}

// AggregateFunc is an aggregate function.
type AggregateFunc string

const (
	AggCount AggregateFunc = "count"
	AggSum   AggregateFunc = "sum"
	AggMin   AggregateFunc = "min"
	AggMax   AggregateFunc = "max"
	AggAvg   AggregateFunc = "avg"
	AggFirst AggregateFunc = "first"
	AggLast  AggregateFunc = "last"
)

// Sink writes results to a topic.
type Sink struct {
	// From names what the sink writes: a step id (or a source id, to
	// copy a source); several ids merge them. Default: the last step
	// (every source when there are no steps).
	From []string `yaml:"from"`
	// Topic to write. Required; must not be one of the sources' topics.
	Topic string `yaml:"topic"`
	// Key is an expression for the record key. Default: the group key
	// after key_by, otherwise no key.
	Key string `yaml:"key"`
	// Format of record values: json, raw, avro, protobuf or json_schema.
	// Default json.
	Format Format `yaml:"format"`
	// SchemaFile is a schema (.avsc, .proto, .json) to write with, instead
	// of the one derived from what the job writes.
	SchemaFile string `yaml:"schema_file"`
	// Subject and Version name a registered schema to write with,
	// instead of a derived one. Version 0 (unset) is the latest.
	Subject string `yaml:"subject"`
	Version int    `yaml:"version"`
	// SubjectStrategy names the subject a schema is registered under:
	// topic_name (<topic>-value) or record_name (the record's full name).
	// Default topic_name. Java client: value.subject.name.strategy.
	SubjectStrategy SubjectStrategy `yaml:"subject_strategy"`
	// AutoRegister registers the schema under its subject when it is not
	// there yet. Default true. Java client: auto.register.schemas.
	AutoRegister bool `yaml:"auto_register"`
	// DeadLetterTopic receives records that could not be decoded or
	// evaluated, with the reason in headers. Default "<name>-dead-letter".
	DeadLetterTopic string `yaml:"dead_letter_topic"`
	// Partitions of Topic when the job creates it (an existing topic is
	// left as it is). Default -1, the brokers' num.partitions.
	Partitions int `yaml:"partitions"`
	// ReplicationFactor of Topic and of DeadLetterTopic when the job
	// creates them. Default -1, the brokers' default.replication.factor.
	ReplicationFactor int `yaml:"replication_factor"`
	// Upsert makes the topic a changelog of the aggregate the sink reads:
	// each record is keyed by its group key, and a key whose state is
	// deleted (aggregate.ttl) gets a tombstone. Only for a sink of
	// aggregates. Default false. Kafka Streams: KTable.toStream() into a
	// compacted topic; Flink: the upsert-kafka sink.
	Upsert bool `yaml:"upsert"`
}

// Scale says whether the job runs as one process or shares its work among
// many through a Kafka consumer group.
type Scale struct {
	// Mode is single (one process owns every partition; a second one
	// fences the first) or group (every process started with the same
	// configuration and its own instance id joins the consumer group
	// named after the job, which deals out the source partitions and the
	// partitions of <name>-repartition). Default single. Moving a job
	// between modes goes through a savepoint. Kafka Streams: every
	// instance of an application.id.
	Mode ScaleMode `yaml:"mode"`
	// Partitions is the number of partitions of the internal repartition
	// and state topics in group mode: each owns a fixed range of key
	// groups, so it is the most processes that can share the keyed work.
	// Fixed for the job's life, like checkpoint.key_groups. Default 32,
	// at most checkpoint.key_groups.
	Partitions int `yaml:"partitions"`
	// SessionTimeout is how long the group waits for a process that
	// stopped answering before it deals the process's partitions to the
	// others. Default 10s; the brokers allow 6s to 30m by default
	// (group.min/max.session.timeout.ms). Kafka: session.timeout.ms.
	SessionTimeout time.Duration `yaml:"session_timeout"`
	// KeyByIsRecordKey says the input is already partitioned by the
	// group key: the key of every source record is its key_by value (as
	// text), and the record is in the partition Kafka's default
	// partitioner gives that key. Group mode then runs the keyed operator
	// where the record is read, with no repartition topic: each source
	// partition's keys are its state partition's (so scale.partitions
	// must equal the source topic's partition count). Checked for every
	// record: one whose key or partition does not fit is a dead letter
	// (code key_mismatch), never counted under another process's key.
	// Group mode only; one source topic. Event time, windows and joins
	// as of event time run: each process fires its windows at the least
	// watermark of the source partitions it reads, never past a record
	// its joins hold. Default false. Flink: DataStreamUtils.reinterpretAsKeyedStream (unchecked
	// there); Kafka Streams skips the repartition when the key is
	// unchanged.
	KeyByIsRecordKey bool `yaml:"key_by_is_record_key"`
}

// ScaleMode is Scale.Mode.
type ScaleMode string

const (
	ScaleSingle ScaleMode = "single"
	ScaleGroup  ScaleMode = "group"
)

// Admin is the HTTP listener for /metrics, health and the admin API.
type Admin struct {
	// Listen address, host:port. Default "127.0.0.1:8080". The value
	// "off" disables the listener: after loading, Listen is then empty.
	Listen string `yaml:"listen"`
	// Advertise is the host:port at which the job's other processes
	// reach this one's admin API (group mode: each process's UI shows
	// the whole job by asking the others). Default: Listen's host and
	// port, or, when Listen's host is unspecified (0.0.0.0, [::]), the
	// address the brokers see this process connect from. (Kafka
	// Streams: application.server.)
	Advertise string `yaml:"advertise"`
	// Token is the bearer token required by endpoints that change state
	// or cost (savepoints, profiles). Default: none, and those endpoints
	// are refused.
	Token string `yaml:"token" secret:"true"`
	// SavepointDir is the directory that savepoints taken over the admin
	// API go under: a request names a directory below it, and nothing
	// outside it is written. Relative to the working directory. Default
	// "./savepoints". (Flink: state.savepoints.dir.)
	SavepointDir string `yaml:"savepoint_dir"`
}

// Logging configures log/slog output.
type Logging struct {
	// Level: debug, info, warn or error. Default info.
	Level string `yaml:"level"`
	// Format: text or json. Default text.
	Format string `yaml:"format"`
}

// Window is a windowed aggregate per group key, in event time: every
// source needs EventTime. Exactly one of Tumbling, Hopping and Session is
// set. Kafka Streams windowedBy; Flink window(...).
type Window struct {
	// Tumbling is the size of fixed windows aligned to the epoch:
	// [k·size, (k+1)·size). More than 0, whole milliseconds.
	Tumbling time.Duration `yaml:"tumbling"`
	// Hopping is windows of Size starting every Advance.
	Hopping *Hopping `yaml:"hopping"`
	// Session is per-key windows of activity separated by Gap.
	Session *Session `yaml:"session"`
	// AllowedLateness: a window fires at the first checkpoint whose
	// watermark is at least its end plus this, and a record behind its
	// partition's watermark by more is late. Default 0. Flink
	// allowedLateness; Kafka Streams grace.
	AllowedLateness time.Duration `yaml:"allowed_lateness"`
	// Emit is on_window_close (one output per window, when it fires) or
	// every_update (the running value at each change). Default
	// on_window_close.
	Emit WindowEmit `yaml:"emit"`
	// LateRecords is side_output (late records to LateTopic) or drop.
	// Default side_output.
	LateRecords LateRecords `yaml:"late_records"`
	// LateTopic receives late records, unchanged, with headers naming the
	// window they missed. Default "<name>-late" with side_output, "" with
	// drop (where setting it is an error).
	LateTopic string `yaml:"late_topic"`
	// Values are the named aggregates, as Aggregate.Values. Required (at
	// least one).
	Values []AggregateValue `yaml:"values"`
}

// Hopping windows overlap: a record is in Size/Advance of them.
type Hopping struct {
	// Size of each window. More than 0, whole milliseconds.
	Size time.Duration `yaml:"size"`
	// Advance between the starts of two windows: more than 0, at most
	// Size, whole milliseconds.
	Advance time.Duration `yaml:"advance"`
}

// Session windows group a key's records less than Gap apart: a session
// is [first, last + Gap).
type Session struct {
	// Gap of inactivity that ends a session. More than 0, whole
	// milliseconds.
	Gap time.Duration `yaml:"gap"`
}

// WindowEmit says when a window emits.
type WindowEmit string

const (
	EmitOnWindowClose WindowEmit = "on_window_close"
	EmitEveryUpdate   WindowEmit = "every_update"
)

// LateRecords says what happens to a record too late for its windows.
type LateRecords string

const (
	LateSideOutput LateRecords = "side_output"
	LateDrop       LateRecords = "drop"
)

// Kind names the window's shape: "tumbling", "hopping", "session", or ""
// when none is set.
func (w Window) Kind() string {
	switch {
	case w.Tumbling != 0:
		return "tumbling"
	case w.Hopping != nil:
		return "hopping"
	case w.Session != nil:
		return "session"
	}
	return ""
}
