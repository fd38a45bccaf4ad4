package sink

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func TestDeadLetterKeepsRecordAndSaysWhy(t *testing.T) {
	src := &kgo.Record{Topic: "in", Partition: 3, Offset: 42, Key: []byte("k"), Value: []byte("{not json"), Timestamp: time.UnixMilli(7)}
	dl := DeadLetter("job-dead-letter", src, "decode", "source", "invalid character 'n'")
	if dl.Topic != "job-dead-letter" || string(dl.Key) != "k" || string(dl.Value) != "{not json" || !dl.Timestamp.Equal(src.Timestamp) {
		t.Fatalf("dead letter lost the original record: %+v", dl)
	}
	for key, want := range map[string]string{
		HeaderReason: "invalid character 'n'", HeaderCode: "decode", HeaderStep: "source",
		HeaderTopic: "in", HeaderPartition: "3", HeaderOffset: "42",
	} {
		if got := Header(dl, key); got != want {
			t.Errorf("header %s = %q, want %q", key, got, want)
		}
	}
	if Header(dl, "absent") != "" {
		t.Error("an absent header must read as empty")
	}
}
