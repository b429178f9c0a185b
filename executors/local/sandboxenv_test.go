package local

import (
	"context"
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

	"github.com/gilf-review/gilf/executors"
	"github.com/gilf-review/gilf/validation"
)

// testCA makes a CA certificate and a localhost server certificate it
// signed, as PEM, generated at test time.
func testCA(t *testing.T) (caPEM, certPEM, keyPEM []byte) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ca := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "gilf test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	leaf := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "localhost"}, DNSNames: []string{"localhost"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leaf, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leafDER}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
}

// The operator's CA bundle reaches the sandbox read-only, and node trusts
// it: an https server inside the sandbox, with a certificate only that CA
// signed, is reached without a certificate error. The variables name it
// for node, OpenSSL, npm and yarn.
func TestSandboxCAFile(t *testing.T) {
	caPEM, certPEM, keyPEM := testCA(t)
	caFile := filepath.Join(t.TempDir(), "corp-ca.pem")
	if err := os.WriteFile(caFile, caPEM, 0o600); err != nil { // readable by the worker only
		t.Fatal(err)
	}
	e := newExec(t, Options{CAFile: caFile, NoGitWorkTree: true})
	dir := repo(t, map[string]string{
		"cert.pem": string(certPEM),
		"key.pem":  string(keyPEM),
		"tls.js": `const https = require('https'), fs = require('fs');
const srv = https.createServer({cert: fs.readFileSync('cert.pem'), key: fs.readFileSync('key.pem')}, (q, r) => r.end('trusted'));
srv.listen(0, '127.0.0.1', () => {
  https.get({host: '127.0.0.1', servername: 'localhost', port: srv.address().port, path: '/'}, res => {
    let b = ''; res.on('data', d => b += d); res.on('end', () => { console.log(b); srv.close(); });
  }).on('error', err => { console.log('error: ' + err.code); process.exit(1); });
});`,
	})
	res := runPlan(t, e, dir,
		shStep("test", `node tls.js`, time.Minute),
		shStep("lint", `for v in NODE_EXTRA_CA_CERTS SSL_CERT_FILE npm_config_cafile GIT_SSL_CAINFO; do eval echo "$v=\$$v"; done; cat "$SSL_CERT_FILE"; echo x >> "$SSL_CERT_FILE" && echo writable`, time.Minute),
	)
	if s := res.Steps[0]; s.Status != validation.StatusPassed || !strings.Contains(s.Output.Head, "trusted") {
		t.Errorf("https with the operator's CA: %s %q", s.Status, s.Output.Head)
	}
	out := res.Steps[1].Output.Head
	for _, v := range []string{"NODE_EXTRA_CA_CERTS", "SSL_CERT_FILE", "npm_config_cafile", "GIT_SSL_CAINFO"} {
		if !strings.Contains(out, v+"="+SandboxCAFile+"\n") {
			t.Errorf("%s does not name %s:\n%s", v, SandboxCAFile, out)
		}
	}
	if !strings.Contains(out, string(caPEM)) {
		t.Errorf("the sandbox's CA file is not the operator's:\n%s", out)
	}
	if strings.Contains(out, "writable") {
		t.Errorf("the sandbox could write its CA file")
	}

	// Without the CA, the same server is refused: the test can fail.
	plain := newExec(t, Options{NoGitWorkTree: true, SandboxUID: e.opts.SandboxUID + 1, SandboxGID: e.opts.SandboxGID + 1})
	res = runPlan(t, plain, dir, shStep("test", `node tls.js`, time.Minute))
	if s := res.Steps[0]; s.Status == validation.StatusPassed || !strings.Contains(s.Output.Head, "error: ") {
		t.Errorf("https without the CA: %s %q, want a certificate error", s.Status, s.Output.Head)
	}
}

func TestReadCAFileLimits(t *testing.T) {
	caPEM, _, _ := testCA(t)
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// PEM allows text around its blocks: pad to the exact limit.
	pad := func(n int) []byte {
		return append(append([]byte{}, caPEM...), []byte(strings.Repeat("#", n-len(caPEM)))...)
	}
	if _, err := ReadCAFile(write("at-limit.pem", pad(MaxCAFileBytes))); err != nil {
		t.Errorf("a bundle of exactly MaxCAFileBytes: %v", err)
	}
	if _, err := ReadCAFile(write("over.pem", pad(MaxCAFileBytes+1))); err == nil || !strings.Contains(err.Error(), "limit") {
		t.Errorf("a bundle one byte over MaxCAFileBytes: %v, want the limit named", err)
	}
	if _, err := ReadCAFile(write("empty.pem", []byte("not a certificate\n"))); err == nil {
		t.Error("a file with no certificate was accepted")
	}
	if _, err := ReadCAFile(dir); err == nil {
		t.Error("a directory was accepted")
	}
	if _, err := New(nil, Options{WorkRoot: workRoot(t), CAFile: filepath.Join(dir, "missing.pem")}); err == nil {
		t.Error("New accepted a missing CA file")
	}
}

// The checkout is a git work tree when the steps run: one commit of its
// content naming the head revision, no remote; git runs read-only from
// the host's /usr. A checkout that is one already is left alone.
func TestGitWorkTree(t *testing.T) {
	e := newExec(t, Options{})
	dir := repo(t, map[string]string{
		"package.json":    "{}",
		"src/a.js":        "1\n",
		".gitignore":      "dist/\n",
		"dist/bundle.js":  "committed although ignored\n",
		"with space/b.js": "2\n",
	})
	const sha = "0123456789abcdef0123456789abcdef01234567"
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := e.Run(ctx, executors.Request{Dir: dir, Labels: map[string]string{"head_sha": sha}, Plan: validation.Plan{Steps: []validation.Step{
		shStep("test", `git rev-parse --is-inside-work-tree && git ls-files && echo "remotes:$(git remote)" && git log --format=%s && git status --porcelain | wc -l`, time.Minute),
	}}})
	if err != nil {
		t.Fatal(err)
	}
	out := res.Steps[0].Output.Head
	for _, want := range []string{"true\n", "package.json\n", "src/a.js\n", "dist/bundle.js\n", "with space/b.js\n", "remotes:\n", "gilf: the checkout of " + sha + "\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("git in the sandbox lacks %q:\n%s", want, out)
		}
	}
	if !strings.HasSuffix(out, "\n0\n") {
		t.Errorf("the work tree is not clean after the commit:\n%s", out)
	}
	if !hasNote(res.Notes, "the checkout is a git work tree") {
		t.Errorf("notes %q do not say the checkout was made a work tree", res.Notes)
	}

	// Off: no .git in the sandbox.
	off := newExec(t, Options{NoGitWorkTree: true, SandboxUID: e.opts.SandboxUID + 1, SandboxGID: e.opts.SandboxGID + 1})
	r := runPlan(t, off, dir, shStep("test", `test -e .git && echo has-git || echo no-git`, time.Minute))
	if !strings.Contains(r.Steps[0].Output.Head, "no-git") {
		t.Errorf("NoGitWorkTree still made a work tree: %q", r.Steps[0].Output.Head)
	}
}

func hasNote(notes []string, sub string) bool {
	for _, n := range notes {
		if strings.Contains(n, sub) {
			return true
		}
	}
	return false
}

// With the repository's clone URL in the run's labels, the work tree has
// it as origin: `git remote -v` works without a network. It has no
// origin/<base ref>, not even with base_ref among the labels: the base
// commit is not in the checkout, and a branch at the head's commit would
// make `git diff origin/<base>` silently empty. A URL with credentials is
// never set.
func TestGitWorkTreeRemote(t *testing.T) {
	e := newExec(t, Options{})
	dir := repo(t, map[string]string{"package.json": "{}"})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := e.Run(ctx, executors.Request{Dir: dir,
		Labels: map[string]string{"clone_url": "https://github.com/o/r.git", "base_ref": "release/1.x"},
		Plan: validation.Plan{Steps: []validation.Step{
			shStep("test", `git remote -v && echo "remote refs: [$(git for-each-ref refs/remotes)]" && { git rev-parse -q --verify origin/release/1.x || echo no-base-branch; }`, time.Minute),
		}}})
	if err != nil {
		t.Fatal(err)
	}
	out := res.Steps[0].Output.Head
	for _, want := range []string{"origin\thttps://github.com/o/r.git (fetch)\n", "remote refs: []\n", "no-base-branch\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("git in the sandbox lacks %q:\n%s", want, out)
		}
	}
	if res.Steps[0].Status != validation.StatusPassed || !hasNote(res.Notes, "remote origin https://github.com/o/r.git (nothing fetched, no base branch)") {
		t.Errorf("step %s, notes %q", res.Steps[0].Status, res.Notes)
	}
	for _, labels := range []map[string]string{
		{"clone_url": "https://x-access-token:ghs_secret@github.com/o/r.git"},
		{"clone_url": "https://github.com/o/r.git?token=1"},
		{"clone_url": "git@github.com:o/r.git"},
		{"clone_url": "https://github.com/o/r.git; rm -rf /"},
	} {
		if url := GitRemote(labels); url != "" {
			t.Errorf("GitRemote(%q) = %q, want none", labels["clone_url"], url)
		}
	}
}
