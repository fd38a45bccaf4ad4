package kclient

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/config"
	"github.com/eoflow/pipeline/internal/testkit/kafkatest"
)

// Every SASL mechanism the config offers authenticates against a real
// broker's SASL listener; a wrong password is refused.
func TestSASLAgainstARealBroker(t *testing.T) {
	c := kafkatest.StartClusterWith(t, kafkatest.Options{Nodes: 1, SASL: true})
	topic := kafkatest.Topic(t, "sasl")
	kafkatest.CreateTopic(t, c.Bootstrap(), topic, 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	for _, mech := range []config.SASLMechanism{config.SASLPlain, config.SASLScramSHA256, config.SASLScramSHA512} {
		opts, err := Options(config.Kafka{
			Brokers:  c.SASLBootstrap(),
			ClientID: "kclient-test",
			SASL:     config.SASL{Mechanism: mech, Username: kafkatest.SASLUser, Password: kafkatest.SASLPassword},
		})
		if err != nil {
			t.Fatal(err)
		}
		cl, err := kgo.NewClient(append(opts, kgo.DefaultProduceTopic(topic))...)
		if err != nil {
			t.Fatal(err)
		}
		if err := cl.ProduceSync(ctx, kgo.StringRecord(string(mech))).FirstErr(); err != nil {
			t.Errorf("%s: produce over SASL: %v", mech, err)
		}
		cl.Close()
	}

	opts, err := Options(config.Kafka{
		Brokers: c.SASLBootstrap(),
		SASL:    config.SASL{Mechanism: config.SASLScramSHA256, Username: kafkatest.SASLUser, Password: "wrong"},
	})
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	shortCtx, cancelShort := context.WithTimeout(ctx, 15*time.Second)
	defer cancelShort()
	_, err = kadm.NewClient(cl).BrokerMetadata(shortCtx)
	if err == nil || !strings.Contains(strings.ToLower(err.Error()), "auth") {
		t.Fatalf("a wrong password: %v, want an authentication error", err)
	}
}
