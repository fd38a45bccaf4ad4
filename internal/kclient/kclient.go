package kclient

import (
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
	switch cfg.Compression {
	case config.CompressionNone:
		opts = append(opts, kgo.ProducerBatchCompression(kgo.NoCompression()))
	case config.CompressionGzip:
		opts = append(opts, kgo.ProducerBatchCompression(kgo.GzipCompression()))
	case config.CompressionSnappy, "": // "": a configuration not loaded through config.Load
		opts = append(opts, kgo.ProducerBatchCompression(kgo.SnappyCompression()))
	case config.CompressionLZ4:
		opts = append(opts, kgo.ProducerBatchCompression(kgo.Lz4Compression()))
	case config.CompressionZstd:
		opts = append(opts, kgo.ProducerBatchCompression(kgo.ZstdCompression()))
	default:
		return nil, fmt.Errorf("kafka.compression: unknown codec %q", cfg.Compression)
	}
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
