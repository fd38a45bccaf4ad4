package kclient

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/eoflow/pipeline/config"
)

func TestOptionsNeedBrokers(t *testing.T) {
	if _, err := Options(config.Kafka{}); err == nil || !strings.Contains(err.Error(), "kafka.brokers") {
		t.Fatalf("got %v, want an error naming kafka.brokers", err)
	}
}

func TestOptionsPerMechanism(t *testing.T) {
	base := config.Kafka{Brokers: []string{"127.0.0.1:9092"}, ClientID: "c"}
	plainOpts, err := Options(base)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []config.SASLMechanism{config.SASLPlain, config.SASLScramSHA256, config.SASLScramSHA512} {
		k := base
		k.SASL = config.SASL{Mechanism: m, Username: "u", Password: "p"}
		opts, err := Options(k)
		if err != nil {
			t.Fatalf("%s: %v", m, err)
		}
		if len(opts) != len(plainOpts)+1 {
			t.Errorf("%s: %d options, want one more than without SASL (%d)", m, len(opts), len(plainOpts))
		}
	}
	k := base
	k.SASL.Mechanism = "GSSAPI"
	if _, err := Options(k); err == nil {
		t.Error("an unknown mechanism must be refused")
	}
}

func TestTLSOffByDefault(t *testing.T) {
	cfg, err := TLSConfig(config.TLS{})
	if err != nil || cfg != nil {
		t.Fatalf("TLSConfig(zero) = %v, %v; want nil, nil", cfg, err)
	}
}

func TestTLSFiles(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := writeSelfSigned(t, dir)

	cfg, err := TLSConfig(config.TLS{CAFile: certFile, CertFile: certFile, KeyFile: keyFile, ServerName: "kafka"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.RootCAs == nil || len(cfg.Certificates) != 1 || cfg.ServerName != "kafka" {
		t.Fatalf("TLS config missing parts: roots %v, certs %d, server name %q", cfg.RootCAs != nil, len(cfg.Certificates), cfg.ServerName)
	}

	for name, tc := range map[string]struct {
		tls  config.TLS
		want string
	}{
		"missing ca":       {config.TLS{CAFile: filepath.Join(dir, "nope.pem")}, "kafka.tls.ca_file"},
		"ca without pem":   {config.TLS{CAFile: keyFileWithText(t, dir, "junk")}, "no PEM certificate"},
		"cert without key": {config.TLS{CertFile: certFile}, "go together"},
		"key is not a key": {config.TLS{CertFile: certFile, KeyFile: certFile}, "cert_file/key_file"},
	} {
		if _, err := TLSConfig(tc.tls); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error containing %q", name, err, tc.want)
		}
	}
}

func keyFileWithText(t *testing.T, dir, text string) string {
	p := filepath.Join(dir, "junk.pem")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func writeSelfSigned(t *testing.T, dir string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "kafka"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		DNSNames:     []string{"kafka"},
		IsCA:         true,
		KeyUsage:     x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}
