package savepoint

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestCorruptSavepoint damages a savepoint in every way we can think of:
// each gives an error that names the file and what is wrong, wraps the
// right sentinel, and never panics. Open catches what costs no reading
// (manifest, missing or cut files); Verify (and every Scan) the rest.
func TestCorruptSavepoint(t *testing.T) {
	src := filepath.Join(t.TempDir(), "sp")
	m := writeSavepoint(t, src, fillStores(t, "sums", 16, 2, 300), Options{})
	data0, data1 := m.Operator("sums").Files[0].Name, m.Operator("sums").Files[1].Name

	tests := []struct {
		name   string
		damage func(t *testing.T, dir string)
		is     error
		want   string // a regexp
	}{
		{"manifest missing", remove(ManifestFile), ErrNotSavepoint, `has no savepoint.json`},
		{"checksum file missing", remove(ChecksumFile), ErrCorrupt, `savepoint.json.sha256 is missing`},
		{"offset digit changed in the manifest", edit(ManifestFile, func(s string) string {
			return strings.Replace(s, `"offset": 1234`, `"offset": 1235`, 1)
		}), ErrCorrupt, `SHA-256 of savepoint.json is [0-9a-f]{64}, savepoint.json.sha256 says [0-9a-f]{64}: the manifest was changed or damaged`},
		{"manifest truncated", edit(ManifestFile, func(s string) string { return s[:len(s)/2] }), ErrCorrupt, `SHA-256 of savepoint.json is`},
		{"checksum file malformed", edit(ChecksumFile, func(string) string { return "nonsense\n" }), ErrCorrupt, `savepoint.json.sha256 is malformed`},
		{"data file missing", remove(data1), ErrCorrupt, `data file ` + data1 + ` of operator "sums" \(key groups \[8,16\)\) is missing`},
		{"data file truncated", edit(data0, func(s string) string { return s[:len(s)-1] }), ErrCorrupt,
			`data file ` + data0 + ` of operator "sums" is \d+ bytes, the manifest says \d+: truncated or damaged`},
		{"data file cut and padded to size", edit(data0, func(s string) string { return s[:60] + strings.Repeat("\x00", len(s)-60) }), ErrCorrupt,
			`data file ` + data0 + `, byte \d+: block at byte \d+: CRC-32C is [0-9a-f]{8}, the file says [0-9a-f]{8} \(damaged\)`},
		{"bit flipped in a block", flip(data0, 200), ErrCorrupt, `data file ` + data0 + `, byte \d+: block at byte \d+: CRC-32C is`},
		{"bit flipped in a header", flip(data1, 12), ErrCorrupt, `data file ` + data1 + `, byte \d+: header: CRC-32C is`},
		{"bit flipped in the magic", flip(data1, 1), ErrCorrupt, `does not start with the savepoint data magic`},
		{"data file of a newer version", flipBit(data1, 8, 1), ErrUnknownVersion, `data file ` + data1 + `: unknown savepoint format version 3, this build reads version 1`},
		{"wrong SHA-256 in the manifest", rewrite(func(s string) string {
			return regexp.MustCompile(`"sha256": "[0-9a-f]`).ReplaceAllString(s, `"sha256": "f`)
		}), ErrCorrupt, `data file ` + data0 + `: SHA-256 is [0-9a-f]{64}, the manifest says f`},
		{"wrong key count in the manifest", rewrite(func(s string) string {
			s = strings.Replace(s, `"keys": 300`, `"keys": 301`, 1)
			re := regexp.MustCompile(`("key_group_end": 8,\s+"keys": )(\d+)`)
			return re.ReplaceAllStringFunc(s, func(m string) string {
				sub := re.FindStringSubmatch(m)
				n, _ := strconv.Atoi(sub[2])
				return sub[1] + strconv.Itoa(n+1)
			})
		}), ErrCorrupt, `data file ` + data0 + ` holds (\d+) keys of \d+ bytes, the manifest says \d+ keys`},
		{"data files swapped", func(t *testing.T, dir string) {
			a, b := filepath.Join(dir, data0), filepath.Join(dir, data1)
			tmp := a + ".x"
			must(t, os.Rename(a, tmp), os.Rename(b, a), os.Rename(tmp, b))
		}, ErrCorrupt, `data file .* (is \d+ bytes, the manifest says|holds operator "sums", key groups \[8,16\) of 16; the manifest says operator "sums", key groups \[0,8\))`},
		{"newer manifest version", rewrite(func(s string) string {
			return strings.Replace(s, `"version": 1`, `"version": 3`, 1)
		}), ErrUnknownVersion, `unknown savepoint format version 3: this build reads versions 1 to 2; the savepoint was written by a newer pipeline`},
		{"version 2 without held records", rewrite(func(s string) string {
			return strings.Replace(s, `"version": 1`, `"version": 2`, 1)
		}), ErrCorrupt, `held: missing \(version 2 is the format of a savepoint with held records; one without is version 1\)`},
		{"unknown manifest field", rewrite(func(s string) string {
			return strings.Replace(s, `"version": 1,`, `"version": 1, "extra": true,`, 1)
		}), ErrCorrupt, `savepoint.json: json: unknown field "extra"`},
		{"not our format", rewrite(func(s string) string {
			return strings.Replace(s, FormatName, "something-else", 1)
		}), ErrNotSavepoint, `format "something-else"`},
		{"file name escapes the directory", rewrite(func(s string) string {
			return strings.Replace(s, `"name": "`+data0, `"name": "../`+data0, 1)
		}), ErrCorrupt, `files\[0\] "\.\./` + regexp.QuoteMeta(data0) + `": not a plain file name`},
		{"a worker's file left out of the manifest", rewrite(func(s string) string {
			return regexp.MustCompile(`(?s),\s*\{\s*"name": "`+regexp.QuoteMeta(data1)+`".*?\}`).ReplaceAllString(s, "")
		}), ErrCorrupt, `files cover key groups \[0,8\), not all 16: a worker's export is missing`},
		{"offsets with a partition gap", rewrite(func(s string) string {
			return strings.Replace(s, `"partition": 1`, `"partition": 2`, 1)
		}), ErrCorrupt, `offsets\[1\] numbers/2: want partition 1`},
		{"manifest is not JSON", rewrite(func(string) string { return "\x00\x01" }), ErrCorrupt, `savepoint.json: invalid character`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := copyDir(t, src)
			tc.damage(t, dir)
			err := func() error {
				r, err := Open(dir)
				if err != nil {
					return err
				}
				return r.Verify(nil)
			}()
			if err == nil {
				t.Fatal("damage went unnoticed")
			}
			if !errors.Is(err, tc.is) || !regexp.MustCompile(tc.want).MatchString(err.Error()) {
				t.Fatalf("got  %v\nwant %v matching %s", err, tc.is, tc.want)
			}
			t.Log(err)
		})
	}
}

func TestOpenNotSavepoint(t *testing.T) {
	base := t.TempDir()
	file := filepath.Join(base, "f")
	must(t, os.WriteFile(file, nil, 0o644))
	tmp := filepath.Join(base, "sp.tmp-123")
	must(t, os.Mkdir(tmp, 0o755))
	for _, tc := range []struct{ dir, want string }{
		{file, "is a file; a savepoint is a directory"},
		{tmp, "a .tmp- directory is a savepoint that was never committed"},
	} {
		if _, err := Open(tc.dir); !errors.Is(err, ErrNotSavepoint) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Open(%s): %v, want %q", tc.dir, err, tc.want)
		}
	}
	if _, err := Open(filepath.Join(base, "none")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Open of nothing: %v", err)
	}
}

func remove(name string) func(*testing.T, string) {
	return func(t *testing.T, dir string) { must(t, os.Remove(filepath.Join(dir, name))) }
}

func edit(name string, f func(string) string) func(*testing.T, string) {
	return func(t *testing.T, dir string) {
		p := filepath.Join(dir, name)
		b, err := os.ReadFile(p)
		must(t, err)
		must(t, os.WriteFile(p, []byte(f(string(b))), 0o644))
	}
}

// rewrite edits the manifest and writes a matching checksum file: damage
// the checksum cannot see, as a buggy writer would leave it.
func rewrite(f func(string) string) func(*testing.T, string) {
	return func(t *testing.T, dir string) {
		edit(ManifestFile, f)(t, dir)
		b, err := os.ReadFile(filepath.Join(dir, ManifestFile))
		must(t, err)
		must(t, os.WriteFile(filepath.Join(dir, ChecksumFile), checksumLine(b), 0o644))
	}
}

func flip(name string, at int) func(*testing.T, string) { return flipBit(name, at, 4) }

func flipBit(name string, at, bit int) func(*testing.T, string) {
	return edit(name, func(s string) string {
		b := []byte(s)
		b[at] ^= 1 << bit
		return string(b)
	})
}

func must(t *testing.T, errs ...error) {
	t.Helper()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}
