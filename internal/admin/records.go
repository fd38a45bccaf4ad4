package admin

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/config"
	"github.com/eoflow/pipeline/internal/kread"
)

// The tails of the dead-letter and late topics: their newest committed
// records, read with read_committed when asked, bounded, and shown
// safely (keys, values and headers cut to a length, bytes that are not
// UTF-8 escaped; the UI writes them as text, never as markup).

// RecordReader reads the newest committed records of a topic.
type RecordReader interface {
	// Tail returns the committed records among the last perPartition
	// offsets of every partition of topic.
	Tail(ctx context.Context, topic string, perPartition int) ([]*kgo.Record, error)
}

// KafkaRecords reads a topic of the job's cluster; conn are the job's
// connection options (kclient.Options).
type KafkaRecords struct{ Conn []kgo.Opt }

var _ RecordReader = KafkaRecords{}

// Tail reads with kread.Tail: two short-lived clients per call.
func (k KafkaRecords) Tail(ctx context.Context, topic string, perPartition int) ([]*kgo.Record, error) {
	var out []*kgo.Record
	err := kread.Tail(ctx, k.Conn, topic, int64(perPartition), func(r *kgo.Record) error {
		out = append(out, r)
		return nil
	})
	return out, err
}

// Limits of the tails: records per answer, and what is shown of each.
const (
	defaultTail  = 50
	maxTail      = 200
	maxValueShow = 1024 // bytes of a value shown
	maxKeyShow   = 256  // bytes of a key or a header value shown
	// tailFresh is how long an answer is reused: several viewers polling
	// read the topics once.
	tailFresh   = time.Second
	tailTimeout = 10 * time.Second
)

// tailKind is which topics a tail reads.
type tailKind int

const (
	deadLetters tailKind = 1 + iota
	lateRecords
)

// TailResponse is the answer to GET /api/v1/dead-letters and
// GET /api/v1/late-records.
type TailResponse struct {
	At time.Time `json:"at"`
	// Topics are the topics read: the sinks' dead-letter topics, or the
	// windows' late topics (none when every window drops late records).
	Topics []string `json:"topics"`
	// Records are the newest committed records of those topics, newest
	// first (by timestamp), at most limit.
	Records []TailRecord `json:"records"`
	// Errors say why a topic could not be read; its records are missing.
	Errors []string `json:"errors"`
}

// TailRecord is one record, shown safely: Key (null: none), Value and
// header values as text, cut to a length (Truncated), bytes that are not
// UTF-8 written \xNN (Escaped).
type TailRecord struct {
	Topic      string       `json:"topic"`
	Partition  int32        `json:"partition"`
	Offset     int64        `json:"offset"`
	Timestamp  time.Time    `json:"timestamp"`
	Key        *string      `json:"key"`
	Value      string       `json:"value"`
	KeyBytes   int          `json:"key_bytes"`
	ValueBytes int          `json:"value_bytes"`
	Truncated  bool         `json:"truncated"`
	Escaped    bool         `json:"escaped"`
	Headers    []TailHeader `json:"headers"`
}

// TailHeader is one record header.
type TailHeader struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// tails serves the tails, each read at most once per tailFresh.
type tails struct {
	r      RecordReader
	topics map[tailKind][]string
	now    func() time.Time
	mu     sync.Mutex // one read at a time
	cache  map[tailKey]TailResponse
}

type tailKey struct {
	kind  tailKind
	limit int
}

func newTails(cfg *config.Config, r RecordReader) *tails {
	t := &tails{r: r, topics: map[tailKind][]string{}, now: time.Now, cache: map[tailKey]TailResponse{}}
	for _, s := range cfg.Sinks {
		if !slices.Contains(t.topics[deadLetters], s.DeadLetterTopic) {
			t.topics[deadLetters] = append(t.topics[deadLetters], s.DeadLetterTopic)
		}
	}
	for _, s := range cfg.Steps {
		if w := s.Window; w != nil && w.LateTopic != "" && !slices.Contains(t.topics[lateRecords], w.LateTopic) {
			t.topics[lateRecords] = append(t.topics[lateRecords], w.LateTopic)
		}
	}
	return t
}

func (t *tails) serve(w http.ResponseWriter, r *http.Request, kind tailKind) {
	limit := defaultTail
	if q := r.URL.Query().Get("limit"); q != "" {
		n, err := strconv.Atoi(q)
		if err != nil || n < 1 || n > maxTail {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("limit must be a whole number from 1 to %d, got %q", maxTail, q))
			return
		}
		limit = n
	}
	if t.r == nil {
		writeError(w, http.StatusServiceUnavailable, "this process does not read its topics for the API")
		return
	}
	writeJSON(w, t.read(r.Context(), kind, limit))
}

func (t *tails) read(ctx context.Context, kind tailKind, limit int) TailResponse {
	t.mu.Lock()
	defer t.mu.Unlock()
	key := tailKey{kind, limit}
	if c, ok := t.cache[key]; ok && t.now().Sub(c.At) < tailFresh {
		return c
	}
	ctx, cancel := context.WithTimeout(ctx, tailTimeout)
	defer cancel()
	resp := TailResponse{Topics: append([]string{}, t.topics[kind]...), Records: []TailRecord{}, Errors: []string{}}
	var recs []*kgo.Record
	for _, topic := range resp.Topics {
		got, err := t.r.Tail(ctx, topic, limit)
		if err != nil {
			resp.Errors = append(resp.Errors, fmt.Sprintf("%s: %v", topic, err))
			continue
		}
		recs = append(recs, got...)
	}
	slices.SortFunc(recs, func(a, b *kgo.Record) int {
		return cmp.Or(b.Timestamp.Compare(a.Timestamp), cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition), cmp.Compare(b.Offset, a.Offset))
	})
	for _, rec := range recs[:min(len(recs), limit)] {
		resp.Records = append(resp.Records, showRecord(rec))
	}
	resp.At = t.now()
	if len(resp.Errors) == 0 {
		t.cache[key] = resp
	}
	return resp
}

func showRecord(r *kgo.Record) TailRecord {
	tr := TailRecord{
		Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Timestamp: r.Timestamp.UTC(),
		KeyBytes: len(r.Key), ValueBytes: len(r.Value), Headers: []TailHeader{},
	}
	show := func(b []byte, limit int) string {
		s, cut, escaped := showBytes(b, limit)
		tr.Truncated = tr.Truncated || cut
		tr.Escaped = tr.Escaped || escaped
		return s
	}
	if r.Key != nil {
		k := show(r.Key, maxKeyShow)
		tr.Key = &k
	}
	tr.Value = show(r.Value, maxValueShow)
	for _, h := range r.Headers {
		tr.Headers = append(tr.Headers, TailHeader{Key: show([]byte(h.Key), maxKeyShow), Value: show(h.Value, maxKeyShow)})
	}
	return tr
}

// showBytes is b as text of at most about limit bytes: UTF-8 as it is,
// any other byte as \xNN (escaped says there was one), cut at a
// character's boundary (cut says whether it was).
func showBytes(b []byte, limit int) (s string, cut, escaped bool) {
	out := make([]byte, 0, min(len(b), limit)+4)
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		piece := b[i : i+size]
		if r == utf8.RuneError && size <= 1 {
			piece, escaped = fmt.Appendf(nil, `\x%02x`, b[i]), true
		}
		if len(out)+len(piece) > limit {
			return string(out), true, escaped
		}
		out = append(out, piece...)
		i += size
	}
	return string(out), false, escaped
}
