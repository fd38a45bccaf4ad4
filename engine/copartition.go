package engine

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/operator"
)

// A group-mode job whose input is already partitioned by the group key
// (scale.key_by_is_record_key) does not repartition: the owner of source
// partition p runs the keyed operator on p's records, and keeps their
// state in partition p of <job>-group-state. That is right only if every
// key is in one source partition, the one whose state holds it: the key
// of each record must be its key_by value, and the record must be in the
// partition Kafka's default partitioner (murmur2 of the key) gives that
// key, the partition its state is placed in (shuffle.place). Both are
// checked for every record that reaches a keyed operator; one that fails
// is a dead letter (key_mismatch), never state kept by the wrong process.
// The state topic must have as many partitions as the source topic
// (checkCopartitioned, at start).

// checkKey is the dead letter of rec, read by a job that does not
// repartition, whose key_by value is groupKey; nil when rec is where its
// key belongs.
func (s *shuffle) checkKey(rec *kgo.Record, groupKey string) *operator.RecordError {
	const step = "scale.key_by_is_record_key"
	if rec.Key == nil || string(rec.Key) != groupKey {
		return &operator.RecordError{Step: step, Code: operator.CodeKeyMismatch,
			Reason: fmt.Sprintf("the record key %q is not its key_by value %q, but the job reads the input as partitioned by it", rec.Key, groupKey)}
	}
	if p := kafkaPartition(rec.Key, s.partitions); p != rec.Partition {
		return &operator.RecordError{Step: step, Code: operator.CodeKeyMismatch,
			Reason: fmt.Sprintf("the record is in partition %d, but Kafka's default partitioner puts its key in partition %d of %d: the job's state for the key is there", rec.Partition, p, s.partitions)}
	}
	return nil
}

// kafkaPartition is the partition of n that Kafka's default partitioner
// (Java's and franz-go's, for a record with a key) gives key: the
// positive murmur2 hash of the key, modulo n.
func kafkaPartition(key []byte, n int) int32 {
	return int32((uint32(murmur2(key)) & 0x7fffffff) % uint32(n))
}

// murmur2 is Kafka's murmur2 (org.apache.kafka.common.utils.Utils.murmur2).
func murmur2(data []byte) int32 {
	const (
		seed uint32 = 0x9747b28c
		m    uint32 = 0x5bd1e995
		r           = 24
	)
	n := len(data)
	h := seed ^ uint32(n)
	for i := 0; i+4 <= n; i += 4 {
		k := uint32(data[i]) | uint32(data[i+1])<<8 | uint32(data[i+2])<<16 | uint32(data[i+3])<<24
		k *= m
		k ^= k >> r
		k *= m
		h *= m
		h ^= k
	}
	tail := n &^ 3
	switch n & 3 {
	case 3:
		h ^= uint32(data[tail+2]) << 16
		fallthrough
	case 2:
		h ^= uint32(data[tail+1]) << 8
		fallthrough
	case 1:
		h ^= uint32(data[tail])
		h *= m
	}
	h ^= h >> 13
	h *= m
	h ^= h >> 15
	return int32(h)
}

// checkCopartitioned refuses a job that does not repartition when its
// source topic does not have scale.partitions partitions: partition p's
// keys are state partition p's. The job stops (ErrUnfit): a restart
// cannot change it.
func checkCopartitioned(ctx context.Context, adm *kadm.Client, s *shuffle, sources []string) error {
	if len(sources) != 1 {
		// config.Validate refuses it; not reached.
		return fmt.Errorf("scale.key_by_is_record_key needs one source topic, the job reads %d", len(sources))
	}
	topic := sources[0]
	md, err := adm.Metadata(ctx, topic)
	if err != nil {
		return fmt.Errorf("describing the source topic %s: %w", topic, err)
	}
	td, ok := md.Topics[topic]
	if !ok || td.Err != nil {
		return fmt.Errorf("describing the source topic %s: %v", topic, td.Err)
	}
	if n := len(td.Partitions); n != s.partitions {
		return fmt.Errorf("%w: scale.key_by_is_record_key: the source topic %s has %d partitions but scale.partitions is %d: they must be equal (the keys of source partition p are kept in state partition p); set scale.partitions: %d", ErrUnfit, topic, n, s.partitions, n)
	}
	return nil
}
