package state

import (
	"fmt"
	"strings"
	"testing"
)

// Pinned forever: these are the key groups of changelog records already
// written. A failure here means existing state would be restored into the
// wrong groups.
func TestKeyGroupOfPinned(t *testing.T) {
	tests := []struct {
		key                     string
		hash                    uint32
		g1, g128, g1000, gLimit KeyGroup
	}{
		{"", 0x00000000, 0, 0, 0, 0},
		{"a", 0x3c2569b2, 0, 50, 850, 27058},
		{"hello", 0x248bfa47, 0, 71, 351, 31303},
		{"user-42", 0xb972dad0, 0, 80, 80, 23248},
		{"order:2026-01-01:17", 0x151e5faa, 0, 42, 106, 24490},
		{"\x00\xff", 0xdd4ece94, 0, 20, 428, 20116},
	}
	for _, tt := range tests {
		k := []byte(tt.key)
		if got := murmur3(k, 0); got != tt.hash {
			t.Errorf("hash(%q) = %#08x, want %#08x", tt.key, got, tt.hash)
		}
		for _, c := range []struct {
			groups int
			want   KeyGroup
		}{{1, tt.g1}, {128, tt.g128}, {1000, tt.g1000}, {MaxKeyGroups, tt.gLimit}} {
			if got := KeyGroupOf(k, c.groups); got != c.want {
				t.Errorf("KeyGroupOf(%q, %d) = %d, want %d", tt.key, c.groups, got, c.want)
			}
		}
	}
}

// A coarse check that keys spread over groups: with 128 groups and 128k
// similar keys, every group gets within 25% of its share. FNV-1a, for
// instance, would fail this for keys differing only in high bits.
func TestKeyGroupOfSpreads(t *testing.T) {
	const groups, n = 128, 128 * 1024
	var count [groups]int
	for i := range n {
		count[KeyGroupOf(fmt.Appendf(nil, "user-%d", i), groups)]++
	}
	for kg, c := range count {
		if c < n/groups*3/4 || c > n/groups*5/4 {
			t.Errorf("group %d has %d keys, want about %d", kg, c, n/groups)
		}
	}
}

func TestKeyGroupOfPanicsOnBadCount(t *testing.T) {
	for _, groups := range []int{-1, 0, MaxKeyGroups + 1} {
		func() {
			defer func() {
				r := recover()
				if r == nil || !strings.Contains(fmt.Sprint(r), "key groups") {
					t.Errorf("KeyGroupOf(_, %d): recovered %v, want a panic naming key groups", groups, r)
				}
			}()
			KeyGroupOf([]byte("k"), groups)
		}()
	}
}

func TestCheckKeyGroups(t *testing.T) {
	tests := []struct {
		groups int
		ok     bool
	}{{-1, false}, {0, false}, {1, true}, {128, true}, {MaxKeyGroups, true}, {MaxKeyGroups + 1, false}}
	for _, tt := range tests {
		if err := CheckKeyGroups(tt.groups); (err == nil) != tt.ok {
			t.Errorf("CheckKeyGroups(%d) = %v, want ok=%v", tt.groups, err, tt.ok)
		}
	}
}
