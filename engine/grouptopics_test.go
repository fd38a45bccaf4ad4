package engine

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/eoflow/pipeline/internal/testkit/kafkatest"
)

// TestAwaitTopicsSeesATopicJustCreated: a client that looked a topic up
// before it existed sees it at the next ask after its creation, not once
// kadm's metadata cache expires (5 s, 25 asks): what made every
// group-mode start of a new job 5 s late.
func TestAwaitTopicsSeesATopicJustCreated(t *testing.T) {
	k := kafkatest.Broker(t)
	topic := kafkatest.Topic(t, "await")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	adm := kadm.NewClient(kafkatest.Client(t, k.Bootstrap()))
	if md, err := adm.Metadata(ctx, topic); err != nil {
		t.Fatal(err)
	} else if td, ok := md.Topics[topic]; ok && td.Err == nil {
		t.Fatalf("%s exists before it is created", topic)
	}
	kafkatest.CreateTopic(t, k.Bootstrap(), topic, 2, nil)
	_, asks, err := awaitTopics(ctx, adm, []string{topic})
	if err != nil {
		t.Fatal(err)
	}
	if asks > 5 {
		t.Fatalf("the topic was seen at ask %d after its creation: the metadata came from the cache", asks)
	}
}
