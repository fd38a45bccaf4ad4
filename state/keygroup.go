package state

import "fmt"

// KeyGroup is the unit keyed state is split into: every key belongs to
// exactly one of a job's G key groups, forever. Key groups, not keys, are
// assigned to workers, restored, and (later) moved between instances.
// Flink: key group; Kafka Streams: the partition of a changelog topic.
type KeyGroup uint16

// MaxKeyGroups is the largest key-group count a job may use (the most
// workers it can ever be spread over). It matches Flink's upper bound for
// pipeline.max-parallelism and the config's checkpoint.key_groups range.
const MaxKeyGroups = 1 << 15

// KeyGroupOf returns the key group of key among groups key groups:
//
//	murmur3_x86_32(key, seed 0) mod groups
//
// with the hash taken over the key's bytes exactly as given (no length
// prefix, no normalisation). This function is part of the persistent
// format (see murmur3) and must never change; a job's groups never changes
// either, because every checkpoint and changelog record is laid out by it.
//
// It panics if groups is not in [1, MaxKeyGroups]: that is a wiring bug
// that CheckKeyGroups reports as an error at configuration time.
func KeyGroupOf(key []byte, groups int) KeyGroup {
	return HashOf(key).Group(groups)
}

// Hash is a key's hash, murmur3_x86_32(key, seed 0): its remainder by the
// key-group count is the key's group (KeyGroupOf), and a Compact places
// the key by it. Whoever routes a key by its group has the hash already
// and can hand it on (Compact.SlotHashed, PrefetchHashed), so that a key
// is hashed once on its way instead of once per use.
type Hash uint32

// HashOf is key's Hash.
func HashOf(key []byte) Hash { return Hash(murmur3(key, 0)) }

// Group is the key group of the key with hash h among groups key groups.
// It panics like KeyGroupOf if groups is not in [1, MaxKeyGroups].
func (h Hash) Group(groups int) KeyGroup {
	if groups < 1 || groups > MaxKeyGroups {
		panic(fmt.Sprintf("state: KeyGroupOf with %d key groups, want 1..%d", groups, MaxKeyGroups))
	}
	return KeyGroup(uint32(h) % uint32(groups))
}

// CheckKeyGroups reports whether groups is a usable key-group count.
func CheckKeyGroups(groups int) error {
	if groups < 1 || groups > MaxKeyGroups {
		return fmt.Errorf("state: key-group count %d out of range 1..%d", groups, MaxKeyGroups)
	}
	return nil
}
