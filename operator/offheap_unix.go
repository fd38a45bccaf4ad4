//go:build unix

package operator

import (
	"fmt"
	"syscall"
)

// mapBytes returns n zeroed bytes outside the Go heap: an anonymous
// private mapping, as state's keyed state uses (state/offheap_unix.go).
// The garbage collector neither scans nor counts it, so a large table
// does not raise the heap's target (with GOGC=100 the heap grows to twice
// what is live: on the heap, every byte of a table would cost two of
// memory). Free it with unmapBytes, exactly once.
func mapBytes(n int) []byte {
	b, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		// Out of address space or memory: as fatal as a failed make.
		panic(fmt.Sprintf("operator: mapping %d bytes for a table: %v", n, err))
	}
	return b
}

// unmapBytes returns memory from mapBytes to the system. Nothing may
// refer to it afterwards: a read would fault.
func unmapBytes(b []byte) {
	if err := syscall.Munmap(b[:cap(b)]); err != nil {
		panic(fmt.Sprintf("operator: unmapping a table: %v", err))
	}
}
