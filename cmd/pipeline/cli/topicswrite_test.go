package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/internal/kread"
)

// pipeline topics write: key TAB value, a value alone, a tombstone; keys
// partitioned as Kafka's default partitioner does, so that one key's
// records stay in order in one partition.
func TestTopicsWrite(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(4, "customers"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	brokers := strings.Join(c.ListenAddrs(), ",")
	in := "c1\t{\"tier\":\"gold\"}\nc2\t{\"tier\":\"silver\"}\n{\"no\":\"key\"}\nc1\t\nc1\t{\"tier\":\"platinum\"}\n"
	var out, errOut bytes.Buffer
	if code := writeRecords([]string{"customers", "--brokers", brokers}, strings.NewReader(in), &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	if !strings.Contains(errOut.String(), "5 records to customers") {
		t.Errorf("stderr %q", errOut.String())
	}
	type rec struct {
		partition  int32
		key, value string
		null       bool
	}
	var got []rec
	if err := kread.All(context.Background(), []kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...)}, "customers", func(r *kgo.Record) error {
		got = append(got, rec{r.Partition, string(r.Key), string(r.Value), r.Value == nil})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	var c1 []rec
	for _, r := range got {
		switch r.key {
		case "c1":
			c1 = append(c1, r)
		case "":
			if r.value != `{"no":"key"}` || r.null {
				t.Errorf("the line without a tab: %+v", r)
			}
		}
	}
	if len(got) != 5 || len(c1) != 3 {
		t.Fatalf("read back %+v", got)
	}
	if c1[0].partition != c1[1].partition || c1[1].partition != c1[2].partition {
		t.Errorf("one key in several partitions: %+v", c1)
	}
	if c1[0].value != `{"tier":"gold"}` || !c1[1].null || c1[2].value != `{"tier":"platinum"}` {
		t.Errorf("c1's records, in order: %+v; want gold, a tombstone, platinum", c1)
	}

	// --partition puts every record in one partition.
	errOut.Reset()
	if code := writeRecords([]string{"customers", "--brokers", brokers, "--partition", "3"}, strings.NewReader("a\t1\nb\t2\n"), &out, &errOut); code != 0 {
		t.Fatalf("--partition: exit %d: %s", code, errOut.String())
	}
	n := 0
	kread.All(context.Background(), []kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...)}, "customers", func(r *kgo.Record) error {
		if r.Partition == 3 && (string(r.Key) == "a" || string(r.Key) == "b") {
			n++
		}
		return nil
	}, 3)
	if n != 2 {
		t.Errorf("--partition 3: %d of 2 records there", n)
	}
}
