package cli

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

const topicsReadSynopsis = `  pipeline topics read [-c FILE] [--brokers LIST] TOPIC [--from-beginning] [--committed=false] [--count N] [--format json|text]
      print a topic's records: key and value (text, tab-separated), or one
      JSON object per record with its partition, offset, timestamp and
      headers (json). With --from-beginning it reads from the start and
      exits at the end offsets as of its start (like kcat -e); without, it
      prints the records written from now on, until Ctrl-C. --count N exits
      after N records. Only committed records by default, as the job's
      readers see its results (read_committed)`

// readRecords is `pipeline topics read`.
func readRecords(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("pipeline topics read", topicsReadSynopsis)
	var cluster clusterFlags
	cluster.register(fs)
	fromBeginning := fs.Bool("from-beginning", false, "start at each partition's first record, and exit at the end offsets listed when starting (unless --count asks for more)")
	committed := fs.Bool("committed", true, "only records of committed transactions, as the job's read_committed readers see them; --committed=false also prints records of open and aborted transactions (read_uncommitted)")
	count := fs.Int64("count", 0, "exit after `N` records (0: no limit)")
	format := fs.String("format", "text", "`text`: key TAB value per line; json: one object per record with topic, partition, offset, timestamp, key, value and headers")
	names, code, ok := parseFlags(fs, args, true, stdout, stderr)
	if !ok {
		return code
	}
	if len(names) != 1 {
		fmt.Fprintln(stderr, "pipeline topics read: want one TOPIC")
		return exitUsage
	}
	if *format != "text" && *format != "json" {
		fmt.Fprintf(stderr, "pipeline topics read: --format %q: want json or text\n", *format)
		return exitUsage
	}
	if *count < 0 {
		fmt.Fprintln(stderr, "pipeline topics read: --count is at least 0")
		return exitUsage
	}
	opts, ok := cluster.options(stdout, stderr)
	if !ok {
		return exitFail
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	r := topicReader{topic: names[0], committed: *committed, fromBeginning: *fromBeginning, count: *count, json: *format == "json"}
	out := bufio.NewWriter(stdout)
	n, err := r.read(ctx, opts, out)
	if ferr := out.Flush(); err == nil {
		err = ferr
	}
	isolation := "committed records only"
	if !*committed {
		isolation = "committed and uncommitted records"
	}
	switch {
	case errors.Is(err, errInterrupted) && *count > 0:
		fmt.Fprintf(stderr, "pipeline topics read: interrupted after %d of %d records\n", n, *count)
		return exitFail
	case errors.Is(err, errInterrupted):
		fmt.Fprintf(stderr, "pipeline topics read: %d records of %s (%s)\n", n, r.topic, isolation)
	case err != nil:
		fmt.Fprintf(stderr, "pipeline topics read %s: %v\n", r.topic, err)
		return exitFail
	default:
		fmt.Fprintf(stderr, "pipeline topics read: %d records of %s (%s)\n", n, r.topic, isolation)
	}
	return exitOK
}

var errInterrupted = errors.New("interrupted")

// topicReader reads one topic, every partition, and prints its records.
type topicReader struct {
	topic         string
	committed     bool
	fromBeginning bool
	count         int64
	json          bool
}

// read prints records to w until count of them are printed, or, reading
// from the beginning without a count, until every partition reached the
// end offset it had when the read started: its last stable offset when
// committed. A committed reader never sees the transaction markers that
// often end a log (nor aborted records), so it also asks for control
// records and counts them as reaching the end, printing only data records
// (internal/kread reads the job's own topics the same way).
func (r topicReader) read(ctx context.Context, conn []kgo.Opt, w *bufio.Writer) (int64, error) {
	admCl, err := kgo.NewClient(conn...)
	if err != nil {
		return 0, err
	}
	defer admCl.Close()
	adm := kadm.NewClient(admCl)
	listCtx, cancel := context.WithTimeout(ctx, topicsTimeout)
	defer cancel()
	topics, err := adm.ListTopics(listCtx, r.topic)
	if err != nil {
		return 0, err
	}
	if td, ok := topics[r.topic]; !ok || errors.Is(td.Err, kerr.UnknownTopicOrPartition) {
		return 0, fmt.Errorf("no such topic (pipeline topics list shows the cluster's topics)")
	} else if td.Err != nil {
		return 0, td.Err
	}
	listEnds := adm.ListEndOffsets
	if r.committed {
		listEnds = adm.ListCommittedOffsets
	}
	ends, err := listEnds(listCtx, r.topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return 0, fmt.Errorf("listing end offsets: %w", err)
	}
	starts, err := adm.ListStartOffsets(listCtx, r.topic)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return 0, fmt.Errorf("listing start offsets: %w", err)
	}
	// Where each partition starts, and (from the beginning) where it ends.
	assign := map[int32]kgo.Offset{}
	remaining := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if !r.fromBeginning {
			assign[o.Partition] = kgo.NewOffset().At(o.Offset)
			return
		}
		start, _ := starts.Lookup(r.topic, o.Partition)
		assign[o.Partition] = kgo.NewOffset().At(start.Offset)
		if o.Offset > start.Offset {
			remaining[o.Partition] = o.Offset
		}
	})
	untilEnd := r.fromBeginning && r.count == 0
	if untilEnd && len(remaining) == 0 {
		return 0, nil // nothing to read
	}
	isolation := kgo.ReadUncommitted()
	if r.committed {
		isolation = kgo.ReadCommitted()
	}
	cl, err := kgo.NewClient(append(append([]kgo.Opt{}, conn...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{r.topic: assign}),
		kgo.FetchIsolationLevel(isolation),
		kgo.KeepControlRecords(),
	)...)
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	var printed int64
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return printed, errInterrupted
		}
		var fetchErr error
		fs.EachError(func(t string, p int32, err error) {
			fetchErr = fmt.Errorf("reading partition %d: %w", p, err)
		})
		if fetchErr != nil {
			return printed, fetchErr
		}
		done := false
		fs.EachRecord(func(rec *kgo.Record) {
			if done {
				return
			}
			end, open := remaining[rec.Partition]
			if untilEnd && !open {
				return // this partition is read to its end
			}
			if !rec.Attrs.IsControl() && (!untilEnd || rec.Offset < end) {
				if err := r.print(w, rec); err != nil {
					fetchErr, done = err, true
					return
				}
				printed++
				if r.count > 0 && printed == r.count {
					done = true
					return
				}
			}
			if open && rec.Offset >= end-1 {
				delete(remaining, rec.Partition)
			}
		})
		if fetchErr != nil {
			return printed, fetchErr
		}
		if done || (untilEnd && len(remaining) == 0) {
			return printed, nil
		}
		if err := w.Flush(); err != nil {
			return printed, err
		}
	}
}

// print writes one record in the reader's format.
func (r topicReader) print(w *bufio.Writer, rec *kgo.Record) error {
	if !r.json {
		_, err := fmt.Fprintf(w, "%s\t%s\n", rec.Key, rec.Value)
		return err
	}
	headers := make([]jsonHeader, 0, len(rec.Headers))
	for _, h := range rec.Headers {
		headers = append(headers, jsonHeader{Key: h.Key, Value: newJSONBytes([]byte(h.Value))})
	}
	line, err := json.Marshal(jsonRecord{
		Topic: rec.Topic, Partition: rec.Partition, Offset: rec.Offset,
		Timestamp: rec.Timestamp.UTC().Format(time.RFC3339Nano),
		Key:       newJSONBytes(rec.Key), Value: newJSONBytes(rec.Value), Headers: headers,
	})
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", line)
	return err
}

// jsonRecord is a record as `topics read --format json` prints it.
type jsonRecord struct {
	Topic     string       `json:"topic"`
	Partition int32        `json:"partition"`
	Offset    int64        `json:"offset"`
	Timestamp string       `json:"timestamp"`
	Key       jsonBytes    `json:"key"`
	Value     jsonBytes    `json:"value"`
	Headers   []jsonHeader `json:"headers"`
}

type jsonHeader struct {
	Key   string    `json:"key"`
	Value jsonBytes `json:"value"`
}

// jsonBytes prints bytes as a JSON string when they are UTF-8 text,
// {"base64": "..."} otherwise (a JSON string cannot hold other bytes), and
// null for a null key or value.
type jsonBytes struct {
	b    []byte
	null bool
}

func newJSONBytes(b []byte) jsonBytes { return jsonBytes{b: b, null: b == nil} }

func (j jsonBytes) MarshalJSON() ([]byte, error) {
	switch {
	case j.null:
		return []byte("null"), nil
	case utf8.Valid(j.b):
		return json.Marshal(string(j.b))
	}
	return json.Marshal(map[string]string{"base64": base64.StdEncoding.EncodeToString(j.b)})
}
