package kclient

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/config"
	"github.com/eoflow/pipeline/internal/testkit/kafkatest"
)

func TestMain(m *testing.M) { kafkatest.Main(m) }

// kafka.compression is the codec of the batches on the broker: a reader
// sees each record's batch written with it.
func TestCompressionOnTheWire(t *testing.T) {
	k := kafkatest.Broker(t)
	want := map[config.Compression]uint8{ // Kafka's attribute codes
		config.CompressionNone: 0, config.CompressionGzip: 1, config.CompressionSnappy: 2,
		config.CompressionLZ4: 3, config.CompressionZstd: 4,
	}
	if len(want) != len(config.Compressions) {
		t.Fatalf("the test knows %d codecs, the configuration %d", len(want), len(config.Compressions))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, codec := range config.Compressions {
		t.Run(string(codec), func(t *testing.T) {
			topic := kafkatest.Topic(t, "codec")
			kafkatest.CreateTopic(t, k.Bootstrap(), topic, 1, nil)
			opts, err := Options(config.Kafka{Brokers: k.Bootstrap(), Compression: codec})
			if err != nil {
				t.Fatal(err)
			}
			cl := kafkatest.Client(t, k.Bootstrap(), append(opts, kgo.DefaultProduceTopic(topic))...)
			// Repetitive values, so that every codec compresses the batch
			// (the client sends a batch that would grow uncompressed).
			value := []byte(`{"user":"a","amount":1,"pad":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}`)
			recs := make([]*kgo.Record, 100)
			for i := range recs {
				recs[i] = &kgo.Record{Value: value}
			}
			if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
				t.Fatal(err)
			}
			rd := kafkatest.Client(t, k.Bootstrap(), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
			fs := rd.PollFetches(ctx)
			if err := fs.Err(); err != nil {
				t.Fatal(err)
			}
			recsRead := fs.Records()
			if len(recsRead) == 0 {
				t.Fatal("read nothing")
			}
			for _, r := range recsRead {
				if got := r.Attrs.CompressionType(); got != want[codec] {
					t.Fatalf("record %d: compression %d, want %d (%s)", r.Offset, got, want[codec], codec)
				}
			}
		})
	}
}

// The options are shared: a job makes its clients from one list, some at
// the same time (group mode), so no option may carry state a new client
// writes. kgo.ProducerBatchCompression did: franz-go deduplicates the
// codec list in place when it builds each client's compressor.
func TestOptionsSafeForConcurrentClients(t *testing.T) {
	for _, codec := range config.Compressions {
		opts, err := Options(config.Kafka{Brokers: []string{"127.0.0.1:1"}, Compression: codec}) // never dialled
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				cl, err := kgo.NewClient(opts...)
				if err != nil {
					t.Error(err)
					return
				}
				cl.Close()
			})
		}
		wg.Wait()
	}
}
