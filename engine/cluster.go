package engine

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/eoflow/pipeline/config"
)

// ErrUnfit wraps a configuration the cluster cannot honour: restarting
// cannot help, so the job stops with the message.
var ErrUnfit = errors.New("the configuration does not fit the cluster")

// checkTransactionTimeout refuses a transaction timeout the brokers would
// reject (transaction.max.timeout.ms). The config loader already made sure
// it covers checkpoint.interval + checkpoint.timeout; here the other bound
// is checked, before any transaction starts, with the fix in the message.
func checkTransactionTimeout(ctx context.Context, adm *kadm.Client, cfg *config.Config) error {
	if !cfg.Guarantee.Checkpoints() {
		return nil
	}
	// Without ids the request describes only the cluster-wide dynamic
	// defaults, which hold the limit only if someone set it: ask each
	// broker for its effective value.
	md, err := adm.BrokerMetadata(ctx)
	if err != nil {
		return fmt.Errorf("listing brokers: %w", err)
	}
	described, err := adm.DescribeBrokerConfigs(ctx, md.Brokers.NodeIDs()...)
	if err != nil {
		return fmt.Errorf("reading the brokers' transaction.max.timeout.ms: %w", err)
	}
	limit := time.Duration(-1)
	for _, rc := range described {
		if rc.Err != nil {
			return fmt.Errorf("reading broker %s configs: %w", rc.Name, rc.Err)
		}
		for _, c := range rc.Configs {
			if c.Key != "transaction.max.timeout.ms" {
				continue
			}
			ms, err := strconv.ParseInt(c.MaybeValue(), 10, 64)
			if err != nil {
				return fmt.Errorf("broker %s: transaction.max.timeout.ms=%q: %w", rc.Name, c.MaybeValue(), err)
			}
			if d := time.Duration(ms) * time.Millisecond; limit < 0 || d < limit {
				limit = d
			}
		}
	}
	if limit < 0 {
		return nil // not described (an old or restricted broker): the first transaction will tell
	}
	need := cfg.Checkpoint.Interval + cfg.Checkpoint.Timeout
	if cfg.Kafka.TransactionTimeout > limit {
		return fmt.Errorf("%w: kafka.transaction_timeout is %v but the brokers allow at most %v (transaction.max.timeout.ms); "+
			"lower kafka.transaction_timeout to between %v (checkpoint.interval + checkpoint.timeout) and %v, or raise transaction.max.timeout.ms on the brokers",
			ErrUnfit, cfg.Kafka.TransactionTimeout, limit, need, limit)
	}
	return nil
}
