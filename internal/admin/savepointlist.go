package admin

import (
	"cmp"
	"errors"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/eoflow/pipeline/checkpoint/savepoint"
	"github.com/eoflow/pipeline/engine"
)

// maxListed bounds GET /api/v1/savepoints: the newest this many.
const maxListed = 200

// SavepointsResponse is the answer to GET /api/v1/savepoints: the
// savepoints below admin.savepoint_dir, newest first.
type SavepointsResponse struct {
	// Dir is admin.savepoint_dir, absolute.
	Dir        string            `json:"dir"`
	Savepoints []ListedSavepoint `json:"savepoints"`
	// CanCreate: admin.token is set, so POST /api/v1/savepoints is on.
	CanCreate bool `json:"can_create"`
}

// ListedSavepoint is one savepoint: Name is its directory relative to
// Dir; Error says why a directory that looks like one cannot be read.
type ListedSavepoint struct {
	engine.SavepointInfo
	Name  string `json:"name"`
	Job   string `json:"job"`
	Error string `json:"error,omitempty"`
}

func (s *server) listSavepoints(w http.ResponseWriter, _ *http.Request) {
	root, err := filepath.Abs(s.savepointDir)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	resp := SavepointsResponse{Dir: root, Savepoints: []ListedSavepoint{}, CanCreate: s.token != ""}
	list, err := listSavepoints(root)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	resp.Savepoints = append(resp.Savepoints, list...)
	writeJSON(w, resp)
}

// listSavepoints finds the savepoints in root and in its directories one
// level down ("daily/sp-1"), as the API names them; symbolic links are
// not followed, unfinished savepoints (".tmp-") not listed. A missing root
// has none.
func listSavepoints(root string) ([]ListedSavepoint, error) {
	var out []ListedSavepoint
	var walk func(dir, prefix string, depth int) error
	walk = func(dir, prefix string, depth int) error {
		entries, err := os.ReadDir(dir)
		if errors.Is(err, fs.ErrNotExist) && depth == 0 {
			return nil
		}
		if err != nil {
			return err
		}
		for _, e := range entries {
			if !e.IsDir() || strings.Contains(e.Name(), ".tmp-") {
				continue
			}
			path, name := filepath.Join(dir, e.Name()), prefix+e.Name()
			if _, err := os.Lstat(filepath.Join(path, savepoint.ManifestFile)); err != nil {
				if depth == 0 {
					if err := walk(path, name+"/", depth+1); err != nil {
						return err
					}
				}
				continue
			}
			l := ListedSavepoint{Name: name}
			if sum, err := savepoint.Inspect(path); err != nil {
				l.Dir, l.Error = path, err.Error()
			} else {
				l.SavepointInfo, l.Job = engine.NewSavepointInfo(sum), sum.Job
			}
			out = append(out, l)
		}
		return nil
	}
	if err := walk(root, "", 0); err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b ListedSavepoint) int {
		return cmp.Or(b.Created.Compare(a.Created), cmp.Compare(a.Name, b.Name))
	})
	return out[:min(len(out), maxListed)], nil
}
