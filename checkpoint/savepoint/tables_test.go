package savepoint

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/eoflow/pipeline/checkpoint"
	"github.com/eoflow/pipeline/state"
)

// tableJob is baseJob with two tables joined.
var tableJob = strings.Replace(baseJob, "steps:\n", `tables:
  - {id: customers, topic: customers}
  - {id: regions, topic: regions}
steps:
  - {id: enrich, join: {table: customers, key: n, as: c, how: left}}
  - {id: place, join: {table: regions, key: n, as: r, how: left}}
`, 1)

// savepointWithTables is savepointOf(tableJob) with the tables at ts.
func savepointWithTables(t *testing.T, ts []checkpoint.TableOffsets) (*Manifest, string) {
	t.Helper()
	return savepointAt(t, tableJob, []checkpoint.SourceOffset{
		{Topic: "numbers", Partition: 0, Offset: 10}, {Topic: "more", Partition: 0, Offset: 20},
	}, ts)
}

// savepointAt writes a savepoint of the job yaml describes: its
// aggregates empty, its sources at offsets, its tables at ts.
func savepointAt(t *testing.T, yaml string, offsets []checkpoint.SourceOffset, ts []checkpoint.TableOffsets) (*Manifest, string) {
	t.Helper()
	d := DescribeConfig(parseConfig(t, yaml))
	dir := filepath.Join(t.TempDir(), "sp")
	w, err := Create(dir, d.Meta(42, testMeta(8).Created), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	for _, op := range d.Aggregates() {
		ow, err := w.Aggregate(op.ID, *op.Aggregate)
		if err != nil {
			t.Fatal(err)
		}
		if err := ow.WriteAll(state.Range{Start: 0, End: state.KeyGroup(d.KeyGroups)}, func(func(state.Entry) bool) {}); err != nil {
			t.Fatal(err)
		}
	}
	offs, err := d.SourceOffsets(offsets)
	if err != nil {
		t.Fatal(err)
	}
	for id, o := range offs {
		if err := w.Source(id, o); err != nil {
			t.Fatal(err)
		}
	}
	w.SetTables(ts)
	if _, err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	r, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	return r.Manifest(), dir
}

var savedTables = []checkpoint.TableOffsets{
	{ID: "regions", Topic: "regions", Offsets: []checkpoint.PartitionOffset{{Partition: 0, Offset: 3}}},
	{ID: "customers", Topic: "customers", Offsets: []checkpoint.PartitionOffset{{Partition: 0, Offset: 7}, {Partition: 1, Offset: 9}}},
}

// A savepoint holds each table's position, sorted by id, and reads it
// back; inspect shows it.
func TestTablesRoundTrip(t *testing.T) {
	m, dir := savepointWithTables(t, savedTables)
	if got := fmt.Sprint(m.Tables); got != "[{customers customers [{0 7} {1 9}]} {regions regions [{0 3}]}]" {
		t.Fatalf("tables read back: %s", got)
	}
	sum, err := Inspect(dir)
	if err != nil {
		t.Fatal(err)
	}
	if s := sum.String(); !strings.HasSuffix(s, "tables\n  customers\n    customers/0: 7\n    customers/1: 9\n  regions\n    regions/0: 3\n") {
		t.Errorf("inspect:\n%s", s)
	}
	// A savepoint of a job without tables has no "tables" field at all.
	m, _ = savepointWithTables(t, nil)
	b, err := encodeManifest(m)
	if err != nil {
		t.Fatal(err)
	}
	if m.Tables != nil || strings.Contains(string(b), "tables") {
		t.Errorf("a manifest without tables mentions them:\n%s", b)
	}
}

func TestValidateTables(t *testing.T) {
	for _, tc := range []struct {
		name string
		ts   []Table
		want string
	}{
		{"unsorted", []Table{{ID: "b", Topic: "b", Offsets: []TableOffset{{0, 1}}}, {ID: "a", Topic: "a", Offsets: []TableOffset{{0, 1}}}}, `tables[1] "a": not after "b"`},
		{"no topic", []Table{{ID: "a", Offsets: []TableOffset{{0, 1}}}}, `tables[0] "a": empty topic`},
		{"no offsets", []Table{{ID: "a", Topic: "a"}}, `tables[0] "a": no offsets`},
		{"partitions repeated", []Table{{ID: "a", Topic: "a", Offsets: []TableOffset{{1, 1}, {1, 2}}}}, `offsets[1]: partition 1 not after 1`},
		{"negative", []Table{{ID: "a", Topic: "a", Offsets: []TableOffset{{0, -1}}}}, `offsets[0]: partition 0, offset -1: negative`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs := validateTables(tc.ts)
			if len(errs) != 1 || !strings.Contains(errs[0].Error(), tc.want) {
				t.Fatalf("validateTables = %v; want one error with %q", errs, tc.want)
			}
		})
	}
}

// CheckRestore resumes a table from the savepoint's position when the
// configuration reads it from the same topic (after --remap-topic), and
// notes every other difference without refusing: a table has no state.
func TestCheckRestoreTables(t *testing.T) {
	m, _ := savepointWithTables(t, savedTables)
	for _, tc := range []struct {
		name      string
		yaml      string
		opts      RestoreOptions
		want      string // plan.Tables
		wantNotes []string
	}{
		{"same", tableJob, RestoreOptions{}, "[{customers customers [{0 7} {1 9}]} {regions regions [{0 3}]}]", nil},
		{"remapped", strings.Replace(tableJob, "topic: customers}", "topic: customers-v2}", 1),
			RestoreOptions{RemapTopics: map[string]string{"customers": "customers-v2"}},
			"[{customers customers-v2 [{0 7} {1 9}]} {regions regions [{0 3}]}]",
			[]string{`table "customers" resumes from topic "customers"'s position as topic "customers-v2"`}},
		{"another topic", strings.Replace(tableJob, "topic: customers}", "topic: customers-v2}", 1), RestoreOptions{},
			"[{regions regions [{0 3}]}]",
			[]string{`table "customers" was read from topic "customers" at the savepoint; the configuration reads it from "customers-v2": that topic is read to its end, without the savepoint's position (map the old topic to the new with --remap-topic customers=customers-v2 to keep it)`}},
		{"a table gone, one new", strings.NewReplacer("{id: regions, topic: regions}", "{id: zones, topic: zones}", "table: regions,", "table: zones,").Replace(tableJob), RestoreOptions{},
			"[{customers customers [{0 7} {1 9}]}]",
			[]string{`table "zones" has no position in the savepoint: it is read from topic "zones" to its end`,
				`table "regions" (topic "regions") of the savepoint is not in the configuration: its position is dropped (a table has no state to lose)`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan, err := CheckRestore(m, DescribeConfig(parseConfig(t, tc.yaml)), tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if got := fmt.Sprint(plan.Tables); got != tc.want {
				t.Errorf("plan.Tables = %s; want %s", got, tc.want)
			}
			for _, n := range tc.wantNotes {
				found := false
				for _, got := range plan.Notes {
					found = found || got == n
				}
				if !found {
					t.Errorf("notes %q lack %q", plan.Notes, n)
				}
			}
		})
	}
	// A remap may name a table's topic; one naming neither is refused,
	// listing the table topics too.
	_, err := CheckRestore(m, DescribeConfig(parseConfig(t, tableJob)), RestoreOptions{RemapTopics: map[string]string{"nope": "x"}})
	if err == nil || !strings.Contains(err.Error(), `the savepoint's topics are "customers", "more", "numbers" and "regions"`) {
		t.Errorf("a remap of an unknown topic: %v", err)
	}
}
