package sink

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// A member's producer places the records of its internal topics by their
// Partition field; those of a mixed topic (a join's repartition topic) by
// the key's murmur2 hash, as the Java client does, unless they have no key
// (the times reported to each partition); every other topic's by key.
func TestMemberPartitioner(t *testing.T) {
	p := MemberPartitioner([]string{"rep"}, []string{"join"})
	byKey := kgo.StickyKeyPartitioner(nil).ForTopic("any")
	for _, key := range []string{"gold", "customer-17", ""} {
		r := &kgo.Record{Key: []byte(key), Partition: 5}
		want := byKey.Partition(r, 6)
		if got := p.ForTopic("join").Partition(r, 6); got != want {
			t.Errorf("key %q in the mixed topic: partition %d, want %d (the key's)", key, got, want)
		}
		if got := p.ForTopic("rep").Partition(r, 6); got != 5 {
			t.Errorf("key %q in the internal topic: partition %d, want its own 5", key, got)
		}
	}
	for q := range int32(6) {
		r := &kgo.Record{Partition: q}
		if got := p.ForTopic("join").Partition(r, 6); got != int(q) {
			t.Errorf("a record without a key for partition %d of the mixed topic: partition %d", q, got)
		}
		if !p.ForTopic("join").RequiresConsistency(r) {
			t.Error("a mixed topic's record may be moved to another partition")
		}
	}
}
