//go:build unix

package state

import (
	"fmt"
	"syscall"
)

// allocBytes returns n zeroed bytes outside the Go heap: an anonymous
// private mapping. The garbage collector neither scans nor counts it, so a
// large state does not raise the heap's target (with GOGC=100 the heap
// grows to twice what is live before a cycle: on the heap, every byte of
// state would cost two of memory). Free it with freeBytes, exactly once.
func allocBytes(n int) []byte {
	if n == 0 {
		return nil
	}
	b, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		// Out of address space or memory: as fatal as a failed make.
		panic(fmt.Sprintf("state: mapping %d bytes for keyed state: %v", n, err))
	}
	return b
}

// freeBytes returns memory from allocBytes to the system. Nothing may
// refer to it afterwards: it is unmapped, and a read would fault.
func freeBytes(b []byte) {
	if cap(b) == 0 {
		return
	}
	if err := syscall.Munmap(b[:cap(b)]); err != nil {
		panic(fmt.Sprintf("state: unmapping keyed state: %v", err))
	}
}
