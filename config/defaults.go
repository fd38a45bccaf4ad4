package config

import (
	"fmt"
	"time"
)

// The defaults, as documented on each field in config.go and in docs/configuration.md.
const (
	DefaultTransactionTimeout = 60 * time.Second
	DefaultCheckpointInterval = time.Second
	DefaultCheckpointTimeout  = 30 * time.Second
	DefaultKeyGroups          = 128
	DefaultReplicationFactor  = -1
	DefaultPartitions         = -1 // the brokers' num.partitions
	DefaultAdminListen        = "127.0.0.1:8080"
	DefaultSavepointDir       = "./savepoints"
	DefaultScalePartitions    = 32
	DefaultSessionTimeout     = 10 * time.Second
	DefaultRegistryTimeout    = 10 * time.Second
	// AdminOff is the admin.listen value that disables the listener;
	// after loading, Admin.Listen is then empty.
	AdminOff = "off"
	// MaxKeyGroups bounds checkpoint.key_groups (Flink's max parallelism
	// has the same bound).
	MaxKeyGroups = 32768
)

// applyDefaults fills what the file left out. A string is left out when
// empty (so `${VAR}` with VAR unset means "the default"); a number or
// duration when it was not written at all (set reports that), because 0
// is a meaningful value for some of them and an error for others.
func applyDefaults(c *Config, set func(path string) bool) {
	if c.Guarantee == "" {
		c.Guarantee = ExactlyOnce
	}
	if c.Kafka.ClientID == "" {
		c.Kafka.ClientID = "pipeline-" + c.Name
	}
	if c.Kafka.Compression == "" {
		c.Kafka.Compression = CompressionSnappy
	}
	if !set("kafka.transaction_timeout") {
		c.Kafka.TransactionTimeout = DefaultTransactionTimeout
	}
	if !set("checkpoint.interval") {
		c.Checkpoint.Interval = DefaultCheckpointInterval
	}
	if !set("checkpoint.timeout") {
		c.Checkpoint.Timeout = DefaultCheckpointTimeout
	}
	if !set("checkpoint.key_groups") {
		c.Checkpoint.KeyGroups = DefaultKeyGroups
	}
	if c.Scale.Mode == "" {
		c.Scale.Mode = ScaleSingle
	}
	if !set("scale.partitions") {
		c.Scale.Partitions = min(DefaultScalePartitions, max(1, c.Checkpoint.KeyGroups))
	}
	if !set("scale.session_timeout") {
		c.Scale.SessionTimeout = DefaultSessionTimeout
	}
	if !set("checkpoint.replication_factor") {
		c.Checkpoint.ReplicationFactor = DefaultReplicationFactor
	}
	for i := range c.Sources {
		s := &c.Sources[i]
		if s.ID == "" {
			s.ID = fmt.Sprintf("source-%d", i)
		}
		if s.Start.Kind == "" {
			s.Start.Kind = StartEarliest
		}
		if s.Format == "" {
			s.Format = FormatJSON
		}
		if s.KeyFormat == "" {
			s.KeyFormat = FormatRaw
		}
		if s.Envelope == "" {
			s.Envelope = EnvelopeNone
		}
	}
	for i := range c.Tables {
		t := &c.Tables[i]
		if t.Format == "" {
			t.Format = FormatJSON
		}
		if t.KeyFormat == "" {
			t.KeyFormat = FormatRaw
		}
		if t.Mode == "" {
			t.Mode = TableBroadcast
		}
	}
	if !set("schema_registry.timeout") {
		c.SchemaRegistry.Timeout = DefaultRegistryTimeout
	}
	for i := range c.Steps {
		s := &c.Steps[i]
		if s.ID == "" {
			s.ID = fmt.Sprintf("%s-%d", s.Kind(), i)
		}
		if s.Join != nil && s.Join.How == "" {
			s.Join.How = JoinInner
		}
		if j := s.Join; j.Interval() {
			if j.LateRecords == "" {
				j.LateRecords = LateSideOutput
			}
			if j.LateTopic == "" && j.LateRecords == LateSideOutput {
				j.LateTopic = c.Name + "-late"
			}
		}
		if s.Aggregate != nil && s.Aggregate.Emit == "" {
			s.Aggregate.Emit = EmitEveryRecord
		}
		if w := s.Window; w != nil {
			if w.Emit == "" {
				w.Emit = EmitOnWindowClose
			}
			if w.LateRecords == "" {
				w.LateRecords = LateSideOutput
			}
			if w.LateTopic == "" && w.LateRecords == LateSideOutput {
				w.LateTopic = c.Name + "-late"
			}
		}
	}
	for i := range c.Sinks {
		s := &c.Sinks[i]
		if s.Format == "" {
			s.Format = FormatJSON
		}
		if s.DeadLetterTopic == "" {
			s.DeadLetterTopic = c.Name + "-dead-letter"
		}
		if s.SubjectStrategy == "" {
			s.SubjectStrategy = TopicNameStrategy
		}
		if !set(fmt.Sprintf("sinks[%d].auto_register", i)) {
			s.AutoRegister = true
		}
		if !set(fmt.Sprintf("sinks[%d].partitions", i)) {
			s.Partitions = DefaultPartitions
		}
		if !set(fmt.Sprintf("sinks[%d].replication_factor", i)) {
			s.ReplicationFactor = DefaultReplicationFactor
		}
	}
	if c.Admin.SavepointDir == "" {
		c.Admin.SavepointDir = DefaultSavepointDir
	}
	switch c.Admin.Listen {
	case "":
		c.Admin.Listen = DefaultAdminListen
	case AdminOff:
		c.Admin.Listen = ""
	}
	if c.Logging.Level == "" {
		c.Logging.Level = "info"
	}
	if c.Logging.Format == "" {
		c.Logging.Format = "text"
	}
}
