package kclient

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/eoflow/pipeline/config"
)

// Options returns the connection options for cfg: seed brokers, client id,
// and TLS and SASL when configured. Files named in the TLS settings are read
// here, so a missing certificate is reported before anything connects.
func Options(cfg config.Kafka) ([]kgo.Opt, error) {
	if len(cfg.Brokers) == 0 {
		return nil, errors.New("kafka.brokers: at least one seed broker is required")
	}
	opts := []kgo.Opt{kgo.SeedBrokers(cfg.Brokers...)}
	comp, err := compressor(cfg.Compression)
	if err != nil {
		return nil, err
	}
	opts = append(opts, kgo.WithCompressor(comp))
	if cfg.ClientID != "" {
		opts = append(opts, kgo.ClientID(cfg.ClientID))
	}
	tlsCfg, err := TLSConfig(cfg.TLS)
	if err != nil {
		return nil, err
	}
	if tlsCfg != nil {
		dialer := &tls.Dialer{NetDialer: &net.Dialer{Timeout: 10 * time.Second}, Config: tlsCfg}
		opts = append(opts, kgo.Dialer(dialer.DialContext))
	}
	switch cfg.SASL.Mechanism {
	case config.SASLNone:
	case config.SASLPlain:
		opts = append(opts, kgo.SASL(plain.Auth{User: cfg.SASL.Username, Pass: cfg.SASL.Password}.AsMechanism()))
	case config.SASLScramSHA256:
		opts = append(opts, kgo.SASL(scram.Auth{User: cfg.SASL.Username, Pass: cfg.SASL.Password}.AsSha256Mechanism()))
	case config.SASLScramSHA512:
		opts = append(opts, kgo.SASL(scram.Auth{User: cfg.SASL.Username, Pass: cfg.SASL.Password}.AsSha512Mechanism()))
	default:
		return nil, fmt.Errorf("kafka.sasl.mechanism: unknown mechanism %q", cfg.SASL.Mechanism)
	}
	return opts, nil
}

// ConcurrentTransactionsRetry is how soon a transactional producer retries
// a produce the broker refused with CONCURRENT_TRANSACTIONS. Under
// transaction version 2 (KIP-890, the default of Kafka 4 clusters) a
// produce adds its partition to the transaction itself, and the broker
// refuses it while the markers of the previous transaction are still
// being written: right after a checkpoint's commit, when the brokers are
// slow to write markers (a cold broker, many partitions, replication).
// franz-go retries such a batch after a metadata refresh, and refreshes
// at most once per MetadataMinAge, 5 s by default: one late marker then
// stalled the next epoch's outputs, the checkpoint and so the whole job
// for 5 s (measured at 256 output partitions: 54 s instead of 15 s for a
// million records). The Java producer retries after retry.backoff.ms,
// 100 ms, and so does this one: a retry comes at most 100 ms after the
// markers are written, and a refresh of the few topics a job writes costs
// the broker little. Every transactional client sets it as its
// kgo.MetadataMinAge (sink.NewTxn, sink.NewMemberTxn, datagen -resume).
const ConcurrentTransactionsRetry = 100 * time.Millisecond

// compressor is the producers' compressor for codec, made once and shared
// by every client of the job (franz-go's is safe for concurrent use).
// Not kgo.ProducerBatchCompression: franz-go deduplicates that option's
// codec list in place each time it builds a client, and a job builds
// clients from one option list on several goroutines at once.
func compressor(codec config.Compression) (kgo.Compressor, error) {
	var c kgo.CompressionCodec
	switch codec {
	case config.CompressionNone:
		return noCompression{}, nil
	case config.CompressionGzip:
		c = kgo.GzipCompression()
	case config.CompressionSnappy, "": // "": a configuration not loaded through config.Load
		c = kgo.SnappyCompression()
	case config.CompressionLZ4:
		c = kgo.Lz4Compression()
	case config.CompressionZstd:
		c = kgo.ZstdCompression()
	default:
		return nil, fmt.Errorf("kafka.compression: unknown codec %q", codec)
	}
	return kgo.DefaultCompressor(c)
}

// noCompression leaves every batch as it is: franz-go sends a batch
// uncompressed when the compressor returns nothing. (Its own compressor
// for "none" is nil, which it replaces with its snappy default.)
type noCompression struct{}

func (noCompression) Compress(*bytes.Buffer, []byte, ...kgo.CompressFlag) ([]byte, kgo.CompressionCodecType) {
	return nil, kgo.CodecNone
}

// TLSConfig builds the TLS configuration, or nil when TLS is off. Naming any
// file turns TLS on, as enabling it without files uses the system roots.
func TLSConfig(t config.TLS) (*tls.Config, error) {
	if !t.Enabled && t.CAFile == "" && t.CertFile == "" && t.KeyFile == "" {
		return nil, nil
	}
	cfg := &tls.Config{
		MinVersion:         tls.VersionTLS12,
		ServerName:         t.ServerName,
		InsecureSkipVerify: t.InsecureSkipVerify, //nolint:gosec // the user asked for it, by name
	}
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("kafka.tls.ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("kafka.tls.ca_file: %s holds no PEM certificate", t.CAFile)
		}
		cfg.RootCAs = pool
	}
	if (t.CertFile == "") != (t.KeyFile == "") {
		return nil, errors.New("kafka.tls: cert_file and key_file go together")
	}
	if t.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("kafka.tls.cert_file/key_file: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}
