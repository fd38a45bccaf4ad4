//go:build !unix

package operator

// mapBytes returns n zeroed bytes. Without mmap they are on the Go heap
// (pointer-free: the collector does not scan them, but counts them).
func mapBytes(n int) []byte { return make([]byte, n) }

// unmapBytes lets the garbage collector have b.
func unmapBytes([]byte) {}
