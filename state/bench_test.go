package state

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// benchKeys returns n distinct keys shaped like user ids.
func benchKeys(n int) [][]byte {
	keys := make([][]byte, n)
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "user-%08d", i)
	}
	return keys
}

func benchStore(b *testing.B) *Store[int64] {
	s, err := New[int64]("aggregate-1", 128, RangeFor(0, 1, 128), int64Codec{})
	if err != nil {
		b.Fatal(err)
	}
	return s
}

func BenchmarkKeyGroupOf(b *testing.B) {
	key := []byte("user-00012345")
	b.ReportAllocs()
	for b.Loop() {
		KeyGroupOf(key, 128)
	}
}

// One record of an aggregate: Get and Put of an existing key.
func BenchmarkGetPutExisting(b *testing.B) {
	s := benchStore(b)
	keys := benchKeys(1 << 16)
	for _, k := range keys {
		s.Put(k, 0)
	}
	s.Snapshot()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		k := keys[i&(len(keys)-1)]
		v, _ := s.Get(k)
		s.Put(k, v+1)
		i++
	}
}

// An epoch in which n keys change, then the barrier: Snapshot and the
// changelog records. "new" fills an empty store; "update" changes keys
// that exist.
func BenchmarkPutSnapshot(b *testing.B) {
	for _, n := range []int{100_000, 1_000_000} {
		keys := benchKeys(n)
		b.Run(fmt.Sprintf("new/keys=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				s := benchStore(b)
				for i, k := range keys {
					s.Put(k, int64(i))
				}
				_ = s.Snapshot().Records()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/key")
		})
		b.Run(fmt.Sprintf("update/keys=%d", n), func(b *testing.B) {
			s := benchStore(b)
			for _, k := range keys {
				s.Put(k, 0)
			}
			s.Snapshot()
			b.ReportAllocs()
			round := int64(0)
			for b.Loop() {
				round++
				for _, k := range keys {
					s.Put(k, round)
				}
				_ = s.Snapshot().Records()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/key")
		})
	}
}

// A restart: 1M changelog records into the empty store of one worker.
func BenchmarkRestore(b *testing.B) {
	const n = 1_000_000
	s := benchStore(b)
	for i, k := range benchKeys(n) {
		s.Put(k, int64(i))
	}
	log := s.Snapshot().Records()
	b.ReportAllocs()
	for b.Loop() {
		rs, err := NewRestorer(128, RangeFor(0, 1, 128))
		if err != nil {
			b.Fatal(err)
		}
		st := benchStore(b)
		if err := rs.Register(st); err != nil {
			b.Fatal(err)
		}
		for _, rec := range log {
			if err := rs.Add(rec); err != nil {
				b.Fatal(err)
			}
		}
		if st.Len() != n {
			b.Fatalf("restored %d keys", st.Len())
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/record")
}

// Restore of a worker that owns 1/8 of the groups: the other records are
// skipped after parsing their header.
func BenchmarkRestoreSkipOtherGroups(b *testing.B) {
	const n = 1_000_000
	s := benchStore(b)
	for i, k := range benchKeys(n) {
		s.Put(k, int64(i))
	}
	log := s.Snapshot().Records()
	b.ReportAllocs()
	for b.Loop() {
		r := RangeFor(3, 8, 128)
		rs, _ := NewRestorer(128, r)
		st, _ := New[int64]("aggregate-1", 128, r, int64Codec{})
		if err := rs.Register(st); err != nil {
			b.Fatal(err)
		}
		for _, rec := range log {
			if err := rs.Add(rec); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/record")
}

// The barrier of the keyed-sum benchmark's epochs in a Compact store: n
// keys, each changed in an order unrelated to where it is stored (as a
// stream's keys come), then the changelog records: SnapshotRecords, as an
// every_record aggregate takes them, and Snapshot().Records(), as an
// on_checkpoint one does. Reported per key of the snapshot alone; the puts
// run with the timer stopped.
func BenchmarkCompactSnapshot(b *testing.B) {
	for _, n := range []int{100_000, 1_000_000} {
		for _, how := range []string{"records", "delta"} {
			b.Run(fmt.Sprintf("%s/keys=%d", how, n), func(b *testing.B) {
				s, err := NewCompact("aggregate-1", 128, RangeFor(0, 1, 128), nil)
				if err != nil {
					b.Fatal(err)
				}
				keys := benchKeys(n)
				value := make([]byte, 29)
				for _, k := range keys {
					s.Put(k, value)
				}
				s.Snapshot()
				order := rand.New(rand.NewPCG(1, 2)).Perm(n)
				b.ReportAllocs()
				round := byte(0)
				for b.Loop() {
					b.StopTimer()
					round++
					value[0] = round
					for _, i := range order {
						s.Put(keys[i], value)
					}
					b.StartTimer()
					var recs []ChangelogRecord
					if how == "records" {
						recs = s.SnapshotRecords()
					} else {
						recs = s.Snapshot().Records()
					}
					if len(recs) != n {
						b.Fatalf("%d changelog records, want %d", len(recs), n)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/key")
			})
		}
	}
}
