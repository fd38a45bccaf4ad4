package kclient

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/config"
	"github.com/eoflow/pipeline/internal/testkit/kafkatest"
)

// pki is a test CA with a server certificate for 127.0.0.1 and a client
// certificate, as PEM files and strings.
type pki struct {
	caFile, clientCert, clientKey string
	caPEM, serverCert, serverKey  string
}

func newPKI(t *testing.T) pki {
	t.Helper()
	dir := t.TempDir()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	leaf := func(serial int64, usage x509.ExtKeyUsage, ips []net.IP) (certPEM, keyPEM string) {
		k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "leaf"},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}, IPAddresses: ips,
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &k.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		pk, _ := x509.MarshalPKCS8PrivateKey(k) // Kafka's PEM key store wants PKCS#8
		return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
			string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pk}))
	}
	p := pki{caPEM: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}))}
	p.serverCert, p.serverKey = leaf(2, x509.ExtKeyUsageServerAuth, []net.IP{net.ParseIP("127.0.0.1")})
	clientCert, clientKey := leaf(3, x509.ExtKeyUsageClientAuth, nil)
	write := func(name, content string) string {
		f := filepath.Join(dir, name)
		if err := os.WriteFile(f, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return f
	}
	p.caFile = write("ca.pem", p.caPEM)
	p.clientCert = write("client.pem", clientCert)
	p.clientKey = write("client-key.pem", clientKey)
	return p
}

// The TLS settings (CA file, client certificate and key) connect to a real
// broker's TLS listener that requires mutual TLS; without the client
// certificate the broker refuses.
func TestMutualTLSAgainstARealBroker(t *testing.T) {
	p := newPKI(t)
	c := kafkatest.StartClusterWith(t, kafkatest.Options{Nodes: 1, TLS: &kafkatest.TLSListener{
		CertChainPEM: p.serverCert, KeyPEM: p.serverKey, ClientCAPEM: p.caPEM,
	}})
	topic := kafkatest.Topic(t, "tls")
	kafkatest.CreateTopic(t, c.Bootstrap(), topic, 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	opts, err := Options(config.Kafka{
		Brokers: c.TLSBootstrap(),
		TLS:     config.TLS{CAFile: p.caFile, CertFile: p.clientCert, KeyFile: p.clientKey},
	})
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(append(opts, kgo.DefaultProduceTopic(topic))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(ctx, kgo.StringRecord("over mutual TLS")).FirstErr(); err != nil {
		t.Fatalf("produce over mutual TLS: %v", err)
	}

	noCert, err := Options(config.Kafka{Brokers: c.TLSBootstrap(), TLS: config.TLS{CAFile: p.caFile}})
	if err != nil {
		t.Fatal(err)
	}
	bad, err := kgo.NewClient(noCert...)
	if err != nil {
		t.Fatal(err)
	}
	defer bad.Close()
	shortCtx, cancelShort := context.WithTimeout(ctx, 10*time.Second)
	defer cancelShort()
	if _, err := kadm.NewClient(bad).BrokerMetadata(shortCtx); err == nil {
		t.Fatal("a client without a certificate got through a listener that requires one")
	}
}
