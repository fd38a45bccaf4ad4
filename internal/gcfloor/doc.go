// Package gcfloor keeps the garbage collector's heap goal at or above a
// floor while the live heap is small.
//
// Go sets the next collection's heap goal at the live heap times
// (1 + GOGC/100): with the default GOGC of 100, twice what is live. A
// stream processor whose state is off the heap (state.Compact) has a
// small live heap, made of the records in flight, and allocates fast, so
// it collects many times a second: with 60 MB live and 470 MB allocated
// a second, about eight collections, a fifth of its CPU. Run raises GOGC
// after each collection so that the goal is at least the floor, and
// leaves it at the default once the live heap is large enough that
// twice it is above the floor. The memory it spends is bounded by the
// floor, and the pipeline pays for it by buffering less input
// (source.FetchMaxBytes): together they cut the keyed sum's CPU per
// record by about 9% at about the peak RSS it had before.
//
// A process whose environment sets GOGC or GOMEMLIMIT has chosen its own
// trade: the caller does not start Run then (Wanted). A memory limit set
// by debug.SetMemoryLimit still applies, as it always does, whatever the
// GOGC.
package gcfloor
