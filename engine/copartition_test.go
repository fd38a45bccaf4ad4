package engine

import (
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestKafkaPartitionIsTheDefaultPartitioners: a job that does not
// repartition keeps a key's state in the partition Kafka's default
// partitioner puts the key in: Java's murmur2 (the vectors of Kafka's
// UtilsTest) and franz-go's default for keyed records agree with it.
func TestKafkaPartitionIsTheDefaultPartitioners(t *testing.T) {
	for key, want := range map[string]int32{
		"21": -973932308, "foobar": -790332482, "a-little-bit-long-string": -985981536,
		"a-little-bit-longer-string": -1486304829, "lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971, "abc": 479470107,
	} {
		if got := murmur2([]byte(key)); got != want {
			t.Errorf("murmur2(%q) = %d, Kafka's is %d", key, got, want)
		}
	}
	franz := kgo.StickyKeyPartitioner(nil).ForTopic("t")
	for _, n := range []int{1, 3, 8, 32} {
		for i := range 2000 {
			key := []byte("k" + strconv.Itoa(i))
			if got, want := kafkaPartition(key, n), int32(franz.Partition(&kgo.Record{Key: key}, n)); got != want {
				t.Fatalf("key %s of %d partitions: partition %d, franz-go's %d", key, n, got, want)
			}
		}
	}
}
