package sink

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/eoflow/pipeline/internal/kclient"
	"github.com/eoflow/pipeline/internal/testkit/kafkatest"
)

// A produce the broker refuses with CONCURRENT_TRANSACTIONS (it is still
// writing the previous transaction's markers) is retried into the open
// transaction, which then commits everything once. The retry waits for a
// metadata refresh, so the producer refreshes at most
// kclient.ConcurrentTransactionsRetry apart instead of franz-go's 5 s.
func TestTxnRetriesConcurrentTransactions(t *testing.T) {
	const topic = "out"
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, topic))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var refuse, refused atomic.Int32
	c.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if refuse.Add(-1) < 0 {
			refuse.Store(0)
			return nil, nil, false
		}
		refused.Add(1)
		return refusedProduce(req.(*kmsg.ProduceRequest)), nil, true
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	txn, err := NewTxn([]kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...)}, "job", time.Minute, kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer txn.Close()
	if got := txn.cl.(*kgo.Client).OptValue(kgo.MetadataMinAge); got != kclient.ConcurrentTransactionsRetry {
		t.Fatalf("metadata min age %v, want %v", got, kclient.ConcurrentTransactionsRetry)
	}
	member, err := NewMemberTxn([]kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...)}, "job", "a", nil, nil, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	member.Close()
	if got := member.cl.(*kgo.Client).OptValue(kgo.MetadataMinAge); got != kclient.ConcurrentTransactionsRetry {
		t.Fatalf("group member's metadata min age %v, want %v", got, kclient.ConcurrentTransactionsRetry)
	}
	if err := txn.Fence(ctx); err != nil {
		t.Fatal(err)
	}
	epoch := func(values ...string) {
		t.Helper()
		if err := txn.Begin(ctx, 1); err != nil {
			t.Fatal(err)
		}
		for _, v := range values {
			txn.Produce(ctx, kgo.StringRecord(v))
		}
		if err := txn.Commit(ctx, 1); err != nil {
			t.Fatal(err)
		}
	}
	epoch("a", "b")
	refuse.Store(3) // the next transaction's first three produce requests
	epoch("c", "d")
	epoch("e")
	if refused.Load() == 0 {
		t.Fatal("no produce request was refused: the test checked nothing")
	}
	got := kafkatest.ReadUntil(ctx, t, c.ListenAddrs(), topic, kgo.ReadCommitted(), "e")
	if fmt.Sprint(got) != "[a b c d e]" {
		t.Fatalf("read_committed saw %v, want [a b c d e]", got)
	}
}

// refusedProduce answers req with CONCURRENT_TRANSACTIONS for every
// partition it writes.
func refusedProduce(req *kmsg.ProduceRequest) *kmsg.ProduceResponse {
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewProduceResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		for _, rp := range rt.Partitions {
			sp := kmsg.NewProduceResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.ErrorCode = kerr.ConcurrentTransactions.Code
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}
