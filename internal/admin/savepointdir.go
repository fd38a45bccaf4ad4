package admin

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// errOutside marks a savepoint directory the API refuses (400): one that
// would leave admin.savepoint_dir, or that cannot be made below it.
var errOutside = errors.New("savepoint directory refused")

// savepointTarget maps the dir of a savepoint request to the directory the
// job writes, below root (admin.savepoint_dir):
//
//   - a relative dir names a directory below root: "sp-1", "daily/sp-1";
//   - an absolute dir is accepted if it lies below root (as root is
//     written, or as its symbolic links resolve), so a path that
//     `pipeline savepoint create` was given on the job's machine works;
//   - anything else is refused: "..", an absolute path elsewhere, root
//     itself, a parent directory that is missing (only root and the
//     savepoint's own directory are created), a parent whose symbolic
//     links lead outside root, and a savepoint directory that is itself a
//     symbolic link.
//
// The answer has every symbolic link resolved, so the job writes exactly
// where this checked. (Someone who can change links inside root while a
// savepoint is taken can still redirect it; the API's callers cannot.)
func savepointTarget(root, dir string) (string, error) {
	refuse := func(format string, args ...any) (string, error) {
		return "", fmt.Errorf("%w: %s", errOutside, fmt.Sprintf(format, args...))
	}
	absRoot, err := filepath.Abs(root)
	if err != nil {
		return "", fmt.Errorf("admin.savepoint_dir %s: %w", root, err)
	}
	// The configured directory itself is the operator's choice: make it.
	if err := os.MkdirAll(absRoot, 0o750); err != nil {
		return "", fmt.Errorf("admin.savepoint_dir: %w", err)
	}
	realRoot, err := filepath.EvalSymlinks(absRoot)
	if err != nil {
		return "", fmt.Errorf("admin.savepoint_dir: %w", err)
	}

	rel := dir
	if filepath.IsAbs(dir) {
		rel = ""
		for _, base := range []string{absRoot, realRoot} {
			if r, err := filepath.Rel(base, filepath.Clean(dir)); err == nil && filepath.IsLocal(r) {
				rel = r
				break
			}
		}
		if rel == "" {
			return refuse("%s is outside admin.savepoint_dir (%s): name a directory below it, e.g. \"sp-1\"", dir, absRoot)
		}
	} else if !filepath.IsLocal(dir) {
		return refuse("%q leaves admin.savepoint_dir (%s): name a directory below it, e.g. \"sp-1\"", dir, absRoot)
	}
	rel = filepath.Clean(rel)
	if rel == "." {
		return refuse("%q is admin.savepoint_dir (%s) itself: name a directory below it, e.g. \"sp-1\"", dir, absRoot)
	}

	parent := filepath.Join(realRoot, filepath.Dir(rel))
	realParent, err := filepath.EvalSymlinks(parent)
	if errors.Is(err, os.ErrNotExist) {
		return refuse("%s does not exist: only the savepoint's own directory is created, so create %s first", parent, filepath.Dir(rel))
	}
	if err != nil {
		return refuse("%s: %v", parent, err)
	}
	if r, err := filepath.Rel(realRoot, realParent); err != nil || !filepath.IsLocal(r) {
		return refuse("%q leads outside admin.savepoint_dir (%s) through a symbolic link, to %s", dir, absRoot, realParent)
	}
	if fi, err := os.Stat(realParent); err != nil || !fi.IsDir() {
		return refuse("%s is not a directory", parent)
	}
	target := filepath.Join(realParent, filepath.Base(rel))
	if fi, err := os.Lstat(target); err == nil && fi.Mode()&os.ModeSymlink != 0 {
		return refuse("%s is a symbolic link: a savepoint is never written through one", target)
	}
	return target, nil
}
