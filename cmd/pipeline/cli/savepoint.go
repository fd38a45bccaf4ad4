package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	neturl "net/url"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/eoflow/pipeline/checkpoint/savepoint"
	"github.com/eoflow/pipeline/config"
	"github.com/eoflow/pipeline/engine"
	"github.com/eoflow/pipeline/internal/admin"
)

const savepointUsage = `usage:
  pipeline savepoint create [-c FILE] [-admin URL] [-token TOKEN] [-timeout D] [--stop] DIR
` + createSynopsisBody + `
  pipeline savepoint inspect PATH
      what a savepoint holds, after verifying its manifest's checksum
`

const createSynopsisBody = `      ask the running job (its admin API) for a savepoint into DIR below the
      job's admin.savepoint_dir: a name such as sp-1 (or daily/sp-1 when daily
      exists), or an absolute path inside that directory on the job's
      machine; prints where it went once complete. With --stop the savepoint
      is the job's final checkpoint and the job stops (exit 0), as run
      --stop-with-savepoint does on a signal: the upgrade path`

// savepointCmd is `pipeline savepoint create|inspect`.
func savepointCmd(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, savepointUsage)
		return exitUsage
	}
	switch args[0] {
	case "create":
		return createSavepoint(args[1:], stdout, stderr)
	case "inspect":
		return inspectSavepoint(args[1:], stdout, stderr)
	}
	if isHelp(args[0]) {
		fmt.Fprint(stdout, savepointUsage)
		return exitOK
	}
	fmt.Fprintf(stderr, "pipeline savepoint: unknown command %q\n%s", args[0], savepointUsage)
	return exitUsage
}

func inspectSavepoint(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("pipeline savepoint inspect", "  pipeline savepoint inspect PATH\n      what a savepoint holds, after verifying its manifest's checksum")
	paths, code, ok := parseFlags(fs, args, true, stdout, stderr)
	if !ok {
		return code
	}
	if len(paths) != 1 {
		fs.SetOutput(stderr)
		fs.Usage()
		return exitUsage
	}
	s, err := savepoint.Inspect(paths[0])
	if err != nil {
		fmt.Fprintf(stderr, "pipeline savepoint inspect: %v\n", err)
		return exitFail
	}
	if err := s.WriteText(stdout); err != nil {
		fmt.Fprintf(stderr, "pipeline savepoint inspect: %v\n", err)
		return exitFail
	}
	return exitOK
}

// tokenEnv overrides admin.token for `savepoint create`, so the token need
// not be on the command line (where ps shows it).
const tokenEnv = "PIPELINE_ADMIN_TOKEN"

func createSavepoint(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("pipeline savepoint create", "  pipeline savepoint create [-c FILE] [-admin URL] [-token TOKEN] [-timeout D] [--stop] DIR\n"+createSynopsisBody)
	file := fs.String("c", "config.yaml", "the job's YAML file: where its admin API listens (admin.listen) and its token (admin.token)")
	addr := fs.String("admin", "", "the job's admin API, e.g. `http://127.0.0.1:8080` (default: from the job's file)")
	token := fs.String("token", "", "the admin API's bearer token (default: $"+tokenEnv+", else admin.token of the job's file)")
	timeout := fs.Duration("timeout", 30*time.Minute, "how long to wait for the savepoint to complete")
	stop := fs.Bool("stop", false, "stop the job with the savepoint as its final checkpoint (it exits 0), and answer once it stopped")
	dirs, code, ok := parseFlags(fs, args, true, stdout, stderr)
	if !ok {
		return code
	}
	if len(dirs) != 1 {
		fmt.Fprint(stderr, savepointUsage)
		return exitUsage
	}
	if *token == "" {
		*token = os.Getenv(tokenEnv)
	}
	origin := "it is -admin's: is the job running there?" // where the address came from, for a job not found there
	if *addr == "" || *token == "" {
		cfg, ok := loadConfig(*file, stdout, stderr)
		if !ok {
			return exitFail
		}
		if *token == "" {
			*token = cfg.Admin.Token
		}
		if *addr == "" {
			lo := adminListenOrigin(cfg)
			if cfg.Admin.Listen == "" {
				fmt.Fprintf(stderr, "pipeline savepoint create: %s turns the admin API off (%s): pass -admin URL\n", *file, lo)
				return exitFail
			}
			*addr = adminURL(cfg.Admin.Listen)
			origin = "it is " + lo.String()
			if lo.variable != "" {
				origin += fmt.Sprintf(": is the job running, and is $%s here what it was for the job? Set it as the job has it, or pass -admin URL", lo.variable)
			} else {
				origin += ": is the job running? Pass -admin URL if it listens elsewhere"
			}
		}
	}
	if *token == "" {
		fmt.Fprintf(stderr, "pipeline savepoint create: no token: the job's file has no admin.token, and neither -token nor $%s is set\n", tokenEnv)
		return exitFail
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	answer, err := requestSavepoint(ctx, *addr, *token, admin.SavepointRequest{Dir: dirs[0], Stop: *stop})
	switch {
	case errors.Is(err, errNoJob):
		fmt.Fprintf(stderr, "pipeline savepoint create: no job answers at %s: %v\n  %s\n", *addr, errors.Unwrap(err), origin)
		return exitFail
	case err != nil:
		fmt.Fprintf(stderr, "pipeline savepoint create: %v\n", err)
		return exitFail
	}
	info := answer.Savepoint
	fmt.Fprintf(stdout, "savepoint written: %s\n  id:         %s\n  checkpoint: %d\n  state:      %d keys, %d bytes\n",
		info.Dir, info.ID, info.CheckpointID, info.Keys, info.Bytes)
	if info.HeldRecords > 0 {
		fmt.Fprintf(stdout, "  held:       %d records of joins as of event time, restored with it\n", info.HeldRecords)
	}
	if answer.Stopped {
		fmt.Fprintf(stdout, "the job stopped after it (its final checkpoint); to start the job, changed or not, from it:\n  pipeline run -c FILE --from-savepoint %s\n", info.Dir)
	}
	if answer.Note != "" {
		fmt.Fprintf(stdout, "note: %s\n", answer.Note)
	}
	return exitOK
}

// adminURL is the URL of an admin API listening on listen: a wildcard host
// is reached on loopback.
func adminURL(listen string) string {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "http://" + listen
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port)
}

// errNoJob marks an admin address where no job's admin API answers
// (noJob says what did).
var errNoJob = errors.New("no job answers")

type noJob struct{ err error }

func (e noJob) Error() string        { return errNoJob.Error() + ": " + e.err.Error() }
func (e noJob) Is(target error) bool { return target == errNoJob }
func (e noJob) Unwrap() error        { return e.err }

// requestSavepoint is POST /api/v1/savepoints.
func requestSavepoint(ctx context.Context, base, token string, sr admin.SavepointRequest) (admin.SavepointResponse, error) {
	body, err := json.Marshal(sr)
	if err != nil {
		return admin.SavepointResponse{}, err
	}
	url := strings.TrimSuffix(base, "/") + "/api/v1/savepoints"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return admin.SavepointResponse{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		if ue := (*neturl.Error)(nil); errors.As(err, &ue) && ctx.Err() == nil {
			// Nothing listens there, or not HTTP: not the job.
			return admin.SavepointResponse{}, noJob{ue.Err}
		}
		return admin.SavepointResponse{}, fmt.Errorf("asking the job at %s: %w", base, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return admin.SavepointResponse{}, fmt.Errorf("reading the answer of %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		var e admin.ErrorResponse
		if json.Unmarshal(raw, &e) == nil && e.Error != "" {
			return admin.SavepointResponse{}, fmt.Errorf("%s (HTTP %d)", e.Error, resp.StatusCode)
		}
		// Not the admin API's answer: another server has the port.
		return admin.SavepointResponse{}, noJob{fmt.Errorf("%s answered %s: %.200s", url, resp.Status, raw)}
	}
	var ok admin.SavepointResponse
	if err := json.Unmarshal(raw, &ok); err != nil {
		return admin.SavepointResponse{}, fmt.Errorf("the answer of %s: %w", url, err)
	}
	return ok, nil
}

// restoreFlags are the flags of `run` (and `validate`) that start a job
// from a savepoint.
type restoreFlags struct {
	path         string
	allowDropped bool
	remap        remapFlag
}

func (r *restoreFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&r.path, "from-savepoint", "", "start from the savepoint at `PATH` instead of the job's own checkpoints")
	fs.BoolVar(&r.allowDropped, strings.TrimPrefix(savepoint.FlagAllowDroppedState, "--"), false,
		"with --from-savepoint: drop the savepoint's state that the configuration no longer takes (an aggregate removed, a topic no longer read)")
	fs.Var(&r.remap, strings.TrimPrefix(savepoint.FlagRemapTopic, "--"),
		"with --from-savepoint: the savepoint's topic `OLD=NEW` resumes as NEW; repeat for more topics")
}

func (r *restoreFlags) check() error {
	if r.path == "" && (r.allowDropped || len(r.remap) > 0) {
		return fmt.Errorf("%s and %s need --from-savepoint", savepoint.FlagAllowDroppedState, savepoint.FlagRemapTopic)
	}
	return nil
}

func (r *restoreFlags) options() savepoint.RestoreOptions {
	return savepoint.RestoreOptions{AllowDroppedState: r.allowDropped, RemapTopics: r.remap}
}

// plan opens the savepoint and checks it against cfg without a broker
// (partition counts are checked when the job starts).
func (r *restoreFlags) plan(cfg *config.Config) (*savepoint.Reader, *savepoint.RestorePlan, error) {
	sp, err := savepoint.Open(r.path)
	if err != nil {
		return nil, nil, err
	}
	plan, err := savepoint.CheckRestore(sp.Manifest(), savepoint.DescribeConfig(cfg), r.options())
	if err != nil {
		return nil, nil, err
	}
	return sp, plan, nil
}

// option is the runtime option that starts the job from the savepoint.
func (r *restoreFlags) option(cfg *config.Config) (engine.Option, error) {
	sp, _, err := r.plan(cfg)
	if err != nil {
		return nil, err
	}
	return engine.WithSavepointRestore(sp, r.options()), nil
}

// remapFlag collects --remap-topic OLD=NEW.
type remapFlag map[string]string

func (m *remapFlag) String() string {
	if m == nil || *m == nil {
		return ""
	}
	pairs := make([]string, 0, len(*m))
	for k, v := range *m {
		pairs = append(pairs, k+"="+v)
	}
	sort.Strings(pairs)
	return strings.Join(pairs, ",")
}

func (m *remapFlag) Set(v string) error {
	old, new, ok := strings.Cut(v, "=")
	if !ok || old == "" || new == "" {
		return errors.New("want OLD=NEW, e.g. orders=orders-v2")
	}
	if *m == nil {
		*m = remapFlag{}
	}
	if prev, dup := (*m)[old]; dup && prev != new {
		return fmt.Errorf("topic %s is remapped twice (to %s and %s)", old, prev, new)
	}
	(*m)[old] = new
	return nil
}
