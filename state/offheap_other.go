//go:build !unix

package state

// allocBytes returns n zeroed bytes. Without mmap they are on the Go heap
// (pointer-free, so never scanned, but counted in the heap's target).
func allocBytes(n int) []byte { return make([]byte, n) }

// freeBytes lets the garbage collector have b.
func freeBytes([]byte) {}
