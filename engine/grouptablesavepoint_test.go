package engine

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/checkpoint"
	"github.com/eoflow/pipeline/checkpoint/savepoint"
	"github.com/eoflow/pipeline/internal/kread"
)

// A group-mode job started from a single-mode savepoint of a job with a
// table: the import commits the table's position to the group with the
// sources' offsets (the member on duty for each table partition carries
// it on from there), and the aggregate continues from the savepoint's
// state with the table's values as of then.
func TestGroupModeFromSavepointCarriesTablePositions(t *testing.T) {
	e := newBrokerTableEnv(t)
	sp, _ := e.savepointAfterTableUpdates(e.config(nil))
	if len(sp.Manifest().Tables) != 1 {
		t.Fatalf("the savepoint's tables: %+v", sp.Manifest().Tables)
	}

	e.env["JOB_NAME"] += "-group"
	group := e.config(func(s string) string {
		return strings.Replace(s, "mode: ${SCALE_MODE:-single}", "mode: group\n  partitions: 2", 1)
	})
	g := startWith(t, group, WithInstanceID("a"), WithSavepointRestore(sp, savepoint.RestoreOptions{}))
	e.write("orders", `{"id":3,"customer":"c2","n":4}`, `{"id":4,"customer":"c3","n":8}`)
	want := map[string]string{
		"gold":   `{"key":"gold","count":2,"sum":5}`,
		"silver": `{"key":"silver","count":1,"sum":2}`,
		"none":   `{"key":"none","count":1,"sum":8}`,
	}
	deadline := time.Now().Add(time.Minute)
	for got := e.lastPerKey("totals-by-tier"); fmt.Sprint(got) != fmt.Sprint(want); got = e.lastPerKey("totals-by-tier") {
		if time.Now().After(deadline) {
			t.Fatalf("outputs %v, want %v\n%s", got, want, g.logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}

	// The import's checkpoint record (the member's) holds the table's
	// position as the savepoint has it, and the group's committed
	// position of the table is there or later.
	var imported *checkpoint.Record
	if err := kread.All(context.Background(), e.conn, checkpoint.TopicName(group.Name), func(r *kgo.Record) error {
		if r.Value == nil || imported != nil {
			return nil
		}
		if rec, err := checkpoint.DecodeRecord(r.Value); err == nil && rec.Savepoint == sp.ID() {
			imported = rec
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if imported == nil {
		t.Fatalf("no checkpoint record of %s imports savepoint %s", group.Name, sp.ID())
	}
	if got := savepoint.TablesOf(imported.Tables); fmt.Sprint(got) != fmt.Sprint(sp.Manifest().Tables) {
		t.Fatalf("the import's checkpoint record holds tables %v; the savepoint %v", got, sp.Manifest().Tables)
	}
	committed, err := kadm.NewClient(e.prod).FetchOffsetsForTopics(context.Background(), group.Name, e.topic("customers"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tbl := range sp.Manifest().Tables {
		for _, o := range tbl.Offsets {
			c, ok := committed.Lookup(e.topic("customers"), o.Partition)
			if !ok || c.At < o.Offset {
				t.Errorf("customers/%d: the group committed %+v (found %v); the savepoint read to %d", o.Partition, c, ok, o.Offset)
			}
		}
	}
	if err := g.finish(); err != nil {
		t.Fatal(err)
	}
	if logs := g.logs.String(); !strings.Contains(logs, "imported savepoint") {
		t.Errorf("no import logged:\n%s", logs)
	}
}
