package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/eoflow/pipeline/config"
)

// Why a job stopped is said once, readable: a refusal of several lines
// as plain text after a text log line (not also as one line of \n
// escapes); in a JSON log, as the record's err field only, so every line
// of stderr stays JSON.
func TestReportStopSaysWhyOnce(t *testing.T) {
	refusal := errors.New("checkpoint does not fit the job's configuration (checkpoint 7 of job \"j\", restarting):\n" +
		"  - operator \"sums\": value \"sum\" was sum(n), the config has sum(n * 2)\n" +
		"    fix: put back the key_by and values the checkpoint was taken with")

	var text bytes.Buffer
	reportStop(newLogger(config.Logging{}, &text), config.Logging{}, refusal, &text)
	out := text.String()
	if n := strings.Count(out, "does not fit the job's configuration"); n != 1 {
		t.Errorf("text log: the refusal is there %d times, want once:\n%s", n, out)
	}
	if strings.Contains(out, `\n`) || !strings.Contains(out, "pipeline run: "+refusal.Error()+"\n") {
		t.Errorf("text log: want the refusal as plain lines:\n%s", out)
	}

	var js bytes.Buffer
	reportStop(newLogger(config.Logging{Format: "json"}, &js), config.Logging{Format: "json"}, refusal, &js)
	lines := strings.Split(strings.TrimSpace(js.String()), "\n")
	var rec struct{ Msg, Err string }
	if len(lines) != 1 || json.Unmarshal([]byte(lines[0]), &rec) != nil || rec.Err != refusal.Error() {
		t.Errorf("json log: want one record with the refusal as err, got:\n%s", js.String())
	}
}
