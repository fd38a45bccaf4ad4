package cli

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/twmb/franz-go/pkg/kgo"
)

const topicsWriteSynopsis = `  pipeline topics write [-c FILE] [--brokers LIST] TOPIC [--partition N]
      write one record per line of standard input: key TAB value (the text
      topics read prints), a line without a tab a value without a key, and
      key TAB with nothing after it a tombstone (a null value: a table
      deletes the key). A record with a key goes to the partition Kafka's
      default partitioner gives its key (as the Java client would), one
      without to any; --partition N puts every record in partition N.
      Idempotent, not transactional; it exits once every record is written`

// maxLine bounds one line of input: Kafka's default max.message.bytes.
const maxLine = 1 << 20

// writeRecords is `pipeline topics write`.
func writeRecords(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := newFlags("pipeline topics write", topicsWriteSynopsis)
	var cluster clusterFlags
	cluster.register(fs)
	partition := fs.Int("partition", -1, "write every record to partition `N` (default: by key, as Kafka's default partitioner)")
	names, code, ok := parseFlags(fs, args, true, stdout, stderr)
	if !ok {
		return code
	}
	if len(names) != 1 {
		fmt.Fprintln(stderr, "pipeline topics write: want one TOPIC")
		return exitUsage
	}
	opts, ok := cluster.options(stdout, stderr)
	if !ok {
		return exitFail
	}
	if *partition >= 0 {
		opts = append(opts, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	n, err := writeLines(ctx, opts, names[0], int32(*partition), stdin)
	if err != nil {
		fmt.Fprintf(stderr, "pipeline topics write %s: %v (%d records written before)\n", names[0], err, n)
		return exitFail
	}
	fmt.Fprintf(stderr, "pipeline topics write: %d records to %s\n", n, names[0])
	return exitOK
}

// writeLines writes a record per line of in to topic (partition p, or by
// key when p < 0) and returns how many it wrote.
func writeLines(ctx context.Context, conn []kgo.Opt, topic string, p int32, in io.Reader) (int, error) {
	cl, err := kgo.NewClient(conn...)
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), maxLine)
	var recs []*kgo.Record
	for line := 1; sc.Scan(); line++ {
		text := sc.Bytes()
		rec := &kgo.Record{Topic: topic, Partition: max(p, 0)}
		if k, v, ok := bytes.Cut(text, []byte("\t")); ok {
			rec.Key = bytes.Clone(k)
			if len(v) > 0 {
				rec.Value = bytes.Clone(v)
			}
		} else {
			rec.Value = bytes.Clone(text)
		}
		recs = append(recs, rec)
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("reading the input: %w", err)
	}
	for i, res := range cl.ProduceSync(ctx, recs...) {
		if res.Err != nil {
			return i, fmt.Errorf("line %d: %w", i+1, res.Err)
		}
	}
	return len(recs), nil
}
