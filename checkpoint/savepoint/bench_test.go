package savepoint

import (
	"path/filepath"
	"strconv"
	"testing"

	"github.com/eoflow/pipeline/state"
)

// benchStores holds 100,000 keys like parity-sum's (a short key, a
// 21-byte AggregateState) on 4 workers of 128 key groups.
func benchStores(b *testing.B) ([]*state.Store[[]byte], int64) {
	const groups, workers, n = 128, 4, 100_000
	stores := make([]*state.Store[[]byte], workers)
	for w := range stores {
		stores[w], _ = state.New[[]byte]("sums", groups, state.RangeFor(w, workers, groups), state.BytesCodec{})
	}
	value := []byte("\x01\x02\x05count\x03\x01\x01\x03\x03sum\x04\x01\x02\x01\x0c")
	var size int64
	for i := range n {
		k := []byte("key-" + strconv.Itoa(i))
		stores[state.WorkerOf(state.KeyGroupOf(k, groups), workers, groups)].Put(k, value)
		size += int64(len(k) + len(value))
	}
	return stores, size
}

// BenchmarkWrite: 4 workers export at once, then Commit (fsyncs included).
func BenchmarkWrite(b *testing.B) {
	stores, size := benchStores(b)
	b.SetBytes(size)
	b.ReportAllocs()
	for b.Loop() {
		export(b, filepath.Join(b.TempDir(), "sp"), stores)
	}
}

// export writes stores as a savepoint at dir, each from its goroutine,
// with the default block size.
func export(b *testing.B, dir string, stores []*state.Store[[]byte]) {
	w, err := Create(dir, testMeta(128), Options{})
	if err != nil {
		b.Fatal(err)
	}
	op, _ := w.Aggregate("sums", sumsDesc())
	errs := make(chan error, len(stores))
	for _, s := range stores {
		go func() { errs <- op.WriteAll(s.Range(), s.All()) }()
	}
	for range stores {
		if err := <-errs; err != nil {
			b.Fatal(err)
		}
	}
	if _, err := w.Commit(); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkRestore: one worker of 4 restores its range into a store.
func BenchmarkRestore(b *testing.B) {
	stores, _ := benchStores(b)
	dir := filepath.Join(b.TempDir(), "sp")
	export(b, dir, stores)
	r, err := Open(dir)
	if err != nil {
		b.Fatal(err)
	}
	rng := stores[0].Range()
	b.SetBytes(int64(r.Manifest().Operator("sums").Bytes) / 4)
	b.ReportAllocs()
	for b.Loop() {
		s, _ := state.New[[]byte]("sums", 128, rng, state.BytesCodec{})
		rs, _ := state.NewRestorer(128, rng)
		rs.Register(s)
		if _, err := r.Restore(rs, rng, []string{"sums"}); err != nil {
			b.Fatal(err)
		}
	}
}
