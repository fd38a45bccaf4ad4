package engine

import (
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/eoflow/pipeline/checkpoint"
	"github.com/eoflow/pipeline/checkpoint/savepoint"
)

// A group-mode job refuses to start from a savepoint that holds records
// a join as of event time held (its members restore from Kafka, where
// those records are not), before anything changes on the cluster; the
// same job in single mode takes it.
func TestGroupModeRefusesASavepointWithHeldRecords(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "held")
	w, err := savepoint.Create(dir, savepoint.Meta{Job: "held", CheckpointID: 3, Created: time.Unix(1, 0), KeyGroups: 128}, savepoint.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Source("numbers", []checkpoint.SourceOffset{{Topic: "in", Partition: 0, Offset: 5}}); err != nil {
		t.Fatal(err)
	}
	if err := w.SetHeld([]savepoint.HeldRecord{{Topic: "in", Partition: 0, Offset: 4, At: 100}}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	r, err := savepoint.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{"group", "single"} {
		env := map[string]string{"KAFKA_BROKERS": "127.0.0.1:9", "JOB_NAME": "held", "INPUT_TOPIC": "in", "OUTPUT_TOPIC": "out",
			"GUARANTEE": "exactly_once", "CHECKPOINT_INTERVAL": "1s", "ADMIN_LISTEN": "off", "SCALE_MODE": mode}
		j, err := New(parseConfig(t, []byte(paritySumYAML), env), slog.New(slog.NewTextHandler(io.Discard, nil)), WithSavepointRestore(r, savepoint.RestoreOptions{}))
		if err != nil {
			t.Fatal(err)
		}
		err = j.refuseHeldRestore()
		switch {
		case mode == "single" && err != nil:
			t.Fatalf("single mode: %v", err)
		case mode == "group" && (!errors.Is(err, savepoint.ErrIncompatible) || !strings.Contains(err.Error(), "holds 1 records that a join as of event time held")):
			t.Fatalf("group mode: %v, want a refusal", err)
		}
	}
}
