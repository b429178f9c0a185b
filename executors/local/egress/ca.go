package egress

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// Facts of the worker's certificate authority.
const (
	// CACertFile and CAKeyFile are the CA's files in its directory; the
	// key is 0600 and never bound into a sandbox.
	CACertFile = "ca.crt"
	CAKeyFile  = "ca.key"
	// CAValidity is how long a CA made at first start is valid.
	CAValidity = 10 * 365 * 24 * time.Hour
	// LeafValidity is how long a certificate the CA makes for one
	// registry is valid; a new one is made when less than a quarter is
	// left.
	LeafValidity = 7 * 24 * time.Hour
	// MaxLeafCerts bounds the certificates kept in memory (one per
	// registry host): past it the kept ones are dropped and made again.
	MaxLeafCerts = 256
)

// CA is the worker's own certificate authority: the proxy presents a
// certificate it signs for each registry whose TLS it terminates, and
// the sandbox trusts it through the CA bundle gilf writes. It is made at
// first start and kept (LoadOrCreateCA); it is safe for concurrent use.
type CA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte

	mu     sync.Mutex
	leaves map[string]*tls.Certificate
}

// LoadOrCreateCA loads the CA kept in dir, or makes one there (dir 0700,
// key 0600) when there is none. A half-written CA (one file without the
// other) is an error, never silently replaced: certificates made by it may
// still be trusted.
func LoadOrCreateCA(dir string) (*CA, error) {
	certPath, keyPath := filepath.Join(dir, CACertFile), filepath.Join(dir, CAKeyFile)
	certPEM, cerr := os.ReadFile(certPath)
	keyPEM, kerr := os.ReadFile(keyPath)
	switch {
	case cerr == nil && kerr == nil:
		return parseCA(certPEM, keyPEM)
	case errors.Is(cerr, fs.ErrNotExist) && errors.Is(kerr, fs.ErrNotExist):
	case cerr != nil && !errors.Is(cerr, fs.ErrNotExist):
		return nil, fmt.Errorf("egress CA: %w", cerr)
	case kerr != nil && !errors.Is(kerr, fs.ErrNotExist):
		return nil, fmt.Errorf("egress CA: %w", kerr)
	default:
		return nil, fmt.Errorf("egress CA in %s: one of %s and %s is missing; remove the other to make a new CA", dir, CACertFile, CAKeyFile)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("egress CA: %w", err)
	}
	certPEM, keyPEM, err := newCAPEM()
	if err != nil {
		return nil, err
	}
	// The key first, each written whole under a temporary name: a
	// crash leaves no certificate without its key.
	if err := writeFileAtomic(keyPath, keyPEM, 0o600); err != nil {
		return nil, fmt.Errorf("egress CA: %w", err)
	}
	if err := writeFileAtomic(certPath, certPEM, 0o644); err != nil {
		return nil, fmt.Errorf("egress CA: %w", err)
	}
	return parseCA(certPEM, keyPEM)
}

// newCAPEM makes a CA's certificate and key.
func newCAPEM() (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("egress CA key: %w", err)
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "gilf worker egress CA", Organization: []string{"gilf"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(CAValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, fmt.Errorf("egress CA certificate: %w", err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("egress CA key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), nil
}

// parseCA reads a CA's PEM certificate and key.
func parseCA(certPEM, keyPEM []byte) (*CA, error) {
	cb, _ := pem.Decode(certPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		return nil, errors.New("egress CA: not PEM")
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("egress CA certificate: %w", err)
	}
	k, err := x509.ParsePKCS8PrivateKey(kb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("egress CA key: %w", err)
	}
	key, ok := k.(*ecdsa.PrivateKey)
	if !ok || !key.PublicKey.Equal(cert.PublicKey) {
		return nil, errors.New("egress CA: the key does not belong to the certificate")
	}
	if !cert.IsCA || time.Now().After(cert.NotAfter) {
		return nil, errors.New("egress CA: the certificate is not a valid CA (expired?)")
	}
	return &CA{cert: cert, key: key, pem: certPEM, leaves: map[string]*tls.Certificate{}}, nil
}

// PEM is the CA's certificate, for the sandbox's CA bundle.
func (ca *CA) PEM() []byte { return ca.pem }

// Pool is a certificate pool holding only the CA (tests and clients).
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.cert)
	return p
}

// certFor returns a certificate for host (a name or an address), signed
// by the CA, made once and kept while it is valid.
func (ca *CA) certFor(host string) (*tls.Certificate, error) {
	ca.mu.Lock()
	defer ca.mu.Unlock()
	now := time.Now()
	if c, ok := ca.leaves[host]; ok && now.Before(c.Leaf.NotAfter.Add(-LeafValidity/4)) {
		return c, nil
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("egress leaf key: %w", err)
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: host},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(LeafValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if a, err := netip.ParseAddr(host); err == nil {
		tmpl.IPAddresses = append(tmpl.IPAddresses, a.AsSlice())
	} else {
		tmpl.DNSNames = []string{host}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, fmt.Errorf("egress leaf certificate: %w", err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("egress leaf certificate: %w", err)
	}
	c := &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}
	if len(ca.leaves) >= MaxLeafCerts {
		clear(ca.leaves)
	}
	ca.leaves[host] = c
	return c, nil
}

// randomSerial is a certificate serial number of 128 random bits.
func randomSerial() (*big.Int, error) {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, fmt.Errorf("certificate serial: %w", err)
	}
	return n, nil
}

// writeFileAtomic writes b to path through a temporary file in the same
// directory and a rename, so path is either absent or whole.
func writeFileAtomic(path string, b []byte, mode os.FileMode) (err error) {
	sum := sha256.Sum256([]byte(path))
	f, err := os.CreateTemp(filepath.Dir(path), fmt.Sprintf(".tmp-%x-*", sum[:4]))
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			os.Remove(f.Name())
		}
	}()
	if err := f.Chmod(mode); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}
