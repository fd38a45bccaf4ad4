package checkpoint

import (
	"errors"
	"strings"
	"testing"
)

func TestCompatible(t *testing.T) {
	rec := goldenRecord() // 128 key groups; operators aggregate-2, source-0
	tests := []struct {
		name        string
		rec         *Record
		fingerprint string
		keyGroups   int
		operators   []string
		want        []string // substrings of the error; nil: compatible
	}{
		{
			name: "same job", rec: rec, fingerprint: rec.ConfigFingerprint, keyGroups: 128,
			operators: []string{"source-0", "aggregate-2"},
		},
		{
			name: "changed config, same state layout", rec: rec, fingerprint: "sha256:other", keyGroups: 128,
			operators: []string{"aggregate-2", "source-0"},
		},
		{
			name: "a new operator starts empty", rec: rec, fingerprint: "sha256:other", keyGroups: 128,
			operators: []string{"aggregate-2", "source-0", "aggregate-5"},
		},
		{
			name: "key groups changed", rec: rec, fingerprint: rec.ConfigFingerprint, keyGroups: 64,
			operators: []string{"aggregate-2", "source-0"},
			want:      []string{"checkpoint 42 was taken with 128 key groups, the config has 64: key_groups cannot change for a job; restore from a savepoint or start a new job name"},
		},
		{
			name: "an operator with state is gone", rec: rec, fingerprint: "sha256:new", keyGroups: 128,
			operators: []string{"source-0", "aggregate-3"},
			want: []string{
				`checkpoint 42 holds state of operators ["aggregate-2"] that the config does not have (it has ["aggregate-3" "source-0"])`,
				"the config changed since checkpoint 42 (fingerprint sha256:9f2c4e1d, now sha256:new)",
			},
		},
		{
			name: "both at once", rec: rec, fingerprint: "", keyGroups: 256,
			operators: nil,
			want: []string{
				"taken with 128 key groups, the config has 256",
				`holds state of operators ["aggregate-2" "source-0"] that the config does not have (it has [])`,
			},
		},
		{
			name: "no record", rec: nil, keyGroups: 128,
			want: []string{"no checkpoint record"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Compatible(tt.rec, tt.fingerprint, tt.keyGroups, tt.operators)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("Compatible = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, ErrIncompatible) {
				t.Fatalf("Compatible = %v, want ErrIncompatible", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
			if tt.fingerprint == "" && strings.Contains(err.Error(), "fingerprint") {
				t.Errorf("names a fingerprint it was not given:\n%v", err)
			}
		})
	}
}
