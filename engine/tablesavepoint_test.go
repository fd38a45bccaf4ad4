package engine

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/checkpoint"
	"github.com/eoflow/pipeline/checkpoint/kstore"
	"github.com/eoflow/pipeline/checkpoint/savepoint"
	"github.com/eoflow/pipeline/config"
	"github.com/eoflow/pipeline/internal/kread"
)

// checkpointRecords are every checkpoint record of job, in the order
// written (member and mode records left out).
func (e *tableEnv) checkpointRecords(job string) []*checkpoint.Record {
	e.t.Helper()
	var out []*checkpoint.Record
	if err := kread.All(context.Background(), e.conn, checkpoint.TopicName(job), func(r *kgo.Record) error {
		if r.Value == nil || strings.Contains(string(r.Key), "#") {
			return nil
		}
		rec, err := checkpoint.DecodeRecord(r.Value)
		if err != nil {
			return err
		}
		out = append(out, rec)
		return nil
	}); err != nil && !errors.Is(err, kerr.UnknownTopicOrPartition) {
		// A job just started may not have created its checkpoint topic
		// yet (or the broker not told every client of it): no record yet.
		e.t.Fatal(err)
	}
	return out
}

// A savepoint holds where each table stood at its checkpoint, as the
// checkpoint does, and a job started from it carries that position on:
// the checkpoint record of the import holds it (under the topic's new
// name after --remap-topic), and a table whose topic then ends before it
// (recreated, truncated, or not copied whole to where the job moved) is
// reported. A table read from another topic without a remap starts
// without the position, which the restore notes.
func TestSavepointCarriesTablePositions(t *testing.T) {
	e := newTableEnv(t)
	cfg := e.config(nil)
	sp, dir := e.savepointAfterTableUpdates(cfg)
	final, err := kstore.Latest(context.Background(), e.conn, cfg.Name)
	if err != nil || final == nil {
		t.Fatalf("latest checkpoint: %v %v", final, err)
	}
	m := sp.Manifest()
	if got, want := fmt.Sprint(m.Tables), fmt.Sprint(savepoint.TablesOf(final.Tables)); len(final.Tables) != 1 || got != want {
		t.Fatalf("the savepoint's tables: %s; its checkpoint %d's: %s", got, final.ID, want)
	}
	if sum := sp.Summary().String(); !strings.Contains(sum, "tables\n  customers\n    customers/0: ") {
		t.Errorf("inspect does not show the table's position:\n%s", sum)
	}

	// Moved to a topic that holds less than the savepoint read: the
	// position carries over to it, and the short read is reported.
	adm := kadm.NewClient(e.prod)
	if _, err := adm.CreateTopic(context.Background(), 2, 1, nil, "customers-v2"); err != nil {
		t.Fatal(err)
	}
	e.write("customers-v2", "c1\t{\"tier\":\"gold\"}")
	moved := e.config(func(s string) string {
		s = strings.Replace(s, "${CUSTOMERS_TOPIC:-customers}", "customers-v2", 1)
		return strings.Replace(s, "${JOB_NAME:-orders-enrich}", "orders-enrich-moved", 1)
	})
	opts := savepoint.RestoreOptions{RemapTopics: map[string]string{"customers": "customers-v2"}}
	r := startWith(t, moved, WithSavepointRestore(sp, opts))
	e.write("orders", `{"id":3,"customer":"c1","n":4}`)
	e.awaitCheckpointOf(moved.Name)
	if err := r.finish(); err != nil {
		t.Fatal(err)
	}
	recs := e.checkpointRecords(moved.Name)
	imported := recs[0]
	want := final.Tables[0]
	want.Topic = "customers-v2"
	if imported.Savepoint != sp.ID() || fmt.Sprint(imported.Tables) != fmt.Sprint([]checkpoint.TableOffsets{want}) {
		t.Fatalf("the import's checkpoint record (savepoint %q) holds tables %+v; want %+v", imported.Savepoint, imported.Tables, want)
	}
	logs := r.logs.String()
	if !strings.Contains(logs, "the table's topic ends before where the job last read it") || !strings.Contains(logs, "read_at=\"savepoint "+dir) {
		t.Errorf("the short table topic was not reported against the savepoint:\n%s", logs)
	}
	if !strings.Contains(logs, `table \"customers\" resumes from topic \"customers\"'s position as topic \"customers-v2\"`) {
		t.Errorf("the restore did not note the table's remapped position:\n%s", logs)
	}

	// Another topic without a remap: read to its end, without the
	// savepoint's position, and noted.
	other := e.config(func(s string) string {
		s = strings.Replace(s, "${CUSTOMERS_TOPIC:-customers}", "customers-v2", 1)
		return strings.Replace(s, "${JOB_NAME:-orders-enrich}", "orders-enrich-other", 1)
	})
	r = startWith(t, other, WithSavepointRestore(sp, savepoint.RestoreOptions{}))
	e.awaitCheckpointOf(other.Name)
	if err := r.finish(); err != nil {
		t.Fatal(err)
	}
	if recs := e.checkpointRecords(other.Name); len(recs[0].Tables) != 0 {
		t.Errorf("the import's checkpoint record holds tables %+v; want none (another topic)", recs[0].Tables)
	}
	if logs := r.logs.String(); !strings.Contains(logs, "without the savepoint's position") || strings.Contains(logs, "ends before where the job last read it") {
		t.Errorf("another table topic without a remap:\n%s", logs)
	}
}

// awaitCheckpointOf waits for a checkpoint of job, after the one it
// started from, that has read the orders to their ends as of now.
func (e *tableEnv) awaitCheckpointOf(job string) {
	e.t.Helper()
	orders := e.ends("orders")
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		if recs := e.checkpointRecords(job); len(recs) > 1 && e.reached(recs[len(recs)-1], orders, nil) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	e.t.Fatalf("no checkpoint of %s reached orders %v", job, orders)
}

// savepointAfterTableUpdates runs the orders-enrich job cfg over three
// customers and two orders, updates one customer and deletes another,
// and stops it with a savepoint once a checkpoint has applied both: the
// savepoint and its directory.
func (e *tableEnv) savepointAfterTableUpdates(cfg *config.Config) (*savepoint.Reader, string) {
	e.t.Helper()
	e.write("customers", "c1\t{\"tier\":\"gold\"}", "c2\t{\"tier\":\"silver\"}", "c3\t{\"tier\":\"gold\"}")
	r := start(e.t, cfg)
	e.write("orders", `{"id":1,"customer":"c1","n":1}`, `{"id":2,"customer":"c2","n":2}`)
	e.awaitCheckpoint(cfg.Name)
	e.write("customers", "c2\t{\"tier\":\"gold\"}", "c3\t")
	e.awaitCheckpoint(cfg.Name)
	dir := filepath.Join(e.t.TempDir(), "sp")
	r.job.StopWithSavepoint(dir)
	if err := <-r.done; err != nil {
		e.t.Fatal(err)
	}
	return openSavepoint(e.t, dir), dir
}
