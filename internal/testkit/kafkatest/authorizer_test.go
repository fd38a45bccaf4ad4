package kafkatest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
)

// TestAuthorizerDeniesWhatIsNotGranted proves Options.Authorizer: SASLUser
// may not use a transactional id until a super user grants it WRITE on it.
func TestAuthorizerDeniesWhatIsNotGranted(t *testing.T) {
	c := StartClusterWith(t, Options{SASL: true, Authorizer: true})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	txnID := Topic(t, "acl") + "-txn"

	initProducer := func() error {
		cl := Client(t, c.SASLBootstrap(),
			kgo.SASL(plain.Auth{User: SASLUser, Pass: SASLPassword}.AsMechanism()))
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionalID = &txnID
		req.TransactionTimeoutMillis = 60000
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return err
		}
		return kerr.ErrorForCode(resp.ErrorCode)
	}
	if err := initProducer(); !errors.Is(err, kerr.TransactionalIDAuthorizationFailed) {
		t.Fatalf("without an ACL: %v, want TRANSACTIONAL_ID_AUTHORIZATION_FAILED", err)
	}

	admin := kadm.NewClient(Client(t, c.Bootstrap()))
	acl := kadm.NewACLs().Allow("User:"+SASLUser).AllowHosts().
		TransactionalIDs(txnID).Operations(kadm.OpWrite, kadm.OpDescribe)
	results, err := admin.CreateACLs(ctx, acl)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range results {
		if r.Err != nil {
			t.Fatalf("create ACL: %v", r.Err)
		}
	}
	if err := initProducer(); err != nil {
		t.Fatalf("with WRITE on the transactional id: %v", err)
	}
}
