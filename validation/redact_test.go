package validation

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// A value with bytes that every encoding changes: space, slash, plus,
// question mark, quote, and non-ASCII.
const testSecretValue = "s3cr3t/v+lue? \"x\"\u00e9~99"

func testSecrets() []Secret { return []Secret{{Name: "GILF_TOKEN", Value: testSecretValue}} }

// redactAll runs in through a Redactor in writes of the given sizes.
func redactAll(t *testing.T, in []byte, secrets []Secret, chunks ...int) (string, int) {
	t.Helper()
	var out bytes.Buffer
	r := NewRedactor(&out, secrets)
	for i := 0; len(in) > 0; i++ {
		k := len(in)
		if len(chunks) > 0 {
			k = min(chunks[i%len(chunks)], len(in))
		}
		n, err := r.Write(in[:k])
		if err != nil || n != k {
			t.Fatalf("Write = %d, %v; want %d, nil", n, err, k)
		}
		in = in[k:]
	}
	if err := r.Flush(); err != nil {
		t.Fatal(err)
	}
	return out.String(), r.Redactions()
}

// assertNoSecret fails when out still holds the value in any form the
// Redactor knows, or the raw value itself.
func assertNoSecret(t *testing.T, out string, secrets []Secret) {
	t.Helper()
	for _, s := range secrets {
		if len(s.Value) >= MinSecretLength && strings.Contains(out, s.Value) {
			t.Errorf("output holds the value of %s", s.Name)
		}
	}
	if hits := ScanSecrets([]byte(out), secrets); len(hits) != 0 {
		t.Errorf("output still holds secrets: %+v", hits)
	}
}

func embeddedBase64(enc *base64.Encoding, prefix int) string {
	b := append(bytes.Repeat([]byte{'P'}, prefix), testSecretValue...)
	return enc.EncodeToString(append(b, "-and-more-bytes-after"...))
}

func TestRedactorEncodings(t *testing.T) {
	v := []byte(testSecretValue)
	tests := []struct {
		name string
		form string
	}{
		{"raw", testSecretValue},
		{"base64 padded", base64.StdEncoding.EncodeToString(v)},
		{"base64 unpadded", base64.RawStdEncoding.EncodeToString(v)},
		{"base64url padded", base64.URLEncoding.EncodeToString(v)},
		{"base64url unpadded", base64.RawURLEncoding.EncodeToString(v)},
		{"query escape", url.QueryEscape(testSecretValue)},
		{"path escape", url.PathEscape(testSecretValue)},
		{"hex lower", hex.EncodeToString(v)},
		{"hex upper", strings.ToUpper(hex.EncodeToString(v))},
		{"base64 embedded at offset 0", embeddedBase64(base64.StdEncoding, 0)},
		{"base64 embedded at offset 1", embeddedBase64(base64.StdEncoding, 1)},
		{"base64 embedded at offset 2", embeddedBase64(base64.StdEncoding, 2)},
		{"base64url embedded at offset 4", embeddedBase64(base64.URLEncoding, 4)},
		{"base64url embedded at offset 5", embeddedBase64(base64.URLEncoding, 5)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := "env: " + tc.form + " :end\n"
			out, n := redactAll(t, []byte(in), testSecrets())
			if n != 1 {
				t.Errorf("Redactions() = %d, want 1 (output %q)", n, out)
			}
			if !strings.Contains(out, "[REDACTED:GILF_TOKEN]") || !strings.HasPrefix(out, "env: ") || !strings.HasSuffix(out, " :end\n") {
				t.Errorf("output %q: want the form replaced by [REDACTED:GILF_TOKEN] and the rest kept", out)
			}
			if strings.Contains(out, tc.form) {
				t.Errorf("output %q still holds the encoded value", out)
			}
			assertNoSecret(t, out, testSecrets())
		})
	}
}

func TestRedactorSplitAcrossWrites(t *testing.T) {
	in := []byte("before " + testSecretValue + " middle " + base64.StdEncoding.EncodeToString([]byte(testSecretValue)) + " after")
	want := "before [REDACTED:GILF_TOKEN] middle [REDACTED:GILF_TOKEN] after"
	for i := 0; i <= len(in); i++ {
		var out bytes.Buffer
		r := NewRedactor(&out, testSecrets())
		for _, part := range [][]byte{in[:i], in[i:]} {
			if _, err := r.Write(part); err != nil {
				t.Fatal(err)
			}
		}
		if err := r.Flush(); err != nil {
			t.Fatal(err)
		}
		if out.String() != want || r.Redactions() != 2 {
			t.Fatalf("split at %d: got %q (%d redactions), want %q (2)", i, out.String(), r.Redactions(), want)
		}
	}
	if got, n := redactAll(t, in, testSecrets(), 1); got != want || n != 2 {
		t.Errorf("byte by byte: got %q (%d), want %q (2)", got, n, want)
	}
}

func TestRedactorMinSecretLength(t *testing.T) {
	tests := []struct {
		name  string
		value string
		want  int
	}{
		{"one under the minimum is not scanned", strings.Repeat("k", MinSecretLength-1), 0},
		{"exactly the minimum is scanned", strings.Repeat("k", MinSecretLength), 1},
		{"empty is not scanned", "", 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			secrets := []Secret{{Name: "S", Value: tc.value}}
			in := "x " + tc.value + " y"
			out, n := redactAll(t, []byte(in), secrets)
			if n != tc.want {
				t.Errorf("Redactions() = %d, want %d", n, tc.want)
			}
			if tc.want == 0 && out != in {
				t.Errorf("output %q, want the input unchanged", out)
			}
		})
	}
}

func TestRedactorCountAndNames(t *testing.T) {
	secrets := []Secret{
		{Name: "A", Value: "alpha-secret-1"},
		{Name: "B", Value: "bravo-secret-22"},
		{Name: "SHORT", Value: "abc"},
	}
	in := "alpha-secret-1 bravo-secret-22 abc alpha-secret-1alpha-secret-1 " + hex.EncodeToString([]byte("bravo-secret-22"))
	out, n := redactAll(t, []byte(in), secrets, 5)
	want := "[REDACTED:A] [REDACTED:B] abc [REDACTED:A][REDACTED:A] [REDACTED:B]"
	if out != want || n != 5 {
		t.Errorf("got %q (%d), want %q (5)", out, n, want)
	}
}

func TestRedactorLongestFormWins(t *testing.T) {
	// One secret's value is a prefix of another's: the longer is replaced
	// whole rather than leaving its end behind.
	secrets := []Secret{{Name: "SHORT", Value: "prefix-value"}, {Name: "LONG", Value: "prefix-value-and-more"}}
	out, n := redactAll(t, []byte("[prefix-value-and-more] [prefix-value]"), secrets)
	if want := "[[REDACTED:LONG]] [[REDACTED:SHORT]]"; out != want || n != 2 {
		t.Errorf("got %q (%d), want %q (2)", out, n, want)
	}
}

type countingWriter struct {
	writes int
	buf    bytes.Buffer
}

func (w *countingWriter) Write(p []byte) (int, error) {
	w.writes++
	return w.buf.Write(p)
}

func TestRedactorPassThrough(t *testing.T) {
	for _, tc := range []struct {
		name    string
		secrets []Secret
	}{
		{"no secrets", nil},
		{"only short secrets", []Secret{{Name: "PORT", Value: "8080"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var w countingWriter
			r := NewRedactor(&w, tc.secrets)
			in := []byte("output with nothing held back")
			if n, err := r.Write(in); err != nil || n != len(in) {
				t.Fatalf("Write = %d, %v", n, err)
			}
			if w.buf.String() != string(in) || w.writes != 1 {
				t.Errorf("downstream got %q in %d writes before Flush, want the input in 1", w.buf.String(), w.writes)
			}
		})
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("disk gone") }

func TestRedactorWriteError(t *testing.T) {
	for _, secrets := range [][]Secret{nil, testSecrets()} {
		r := NewRedactor(failingWriter{}, secrets)
		_, err := r.Write(bytes.Repeat([]byte("x"), 200))
		if err == nil {
			err = r.Flush()
		}
		if err == nil || !strings.Contains(err.Error(), "disk gone") {
			t.Errorf("secrets %d: err = %v, want the writer's error", len(secrets), err)
		}
	}
}

func TestScanSecrets(t *testing.T) {
	secrets := []Secret{{Name: "A", Value: "alpha-secret-1"}, {Name: "B", Value: "bravo-secret-22"}}
	in := []byte("xx alpha-secret-1 yy " + base64.StdEncoding.EncodeToString([]byte("bravo-secret-22")) + " " + url.QueryEscape("alpha-secret-1"))
	got := ScanSecrets(in, secrets)
	want := []SecretHit{
		{Name: "A", Offset: 3, Encoding: EncodingRaw},
		{Name: "B", Offset: 21, Encoding: EncodingBase64},
		{Name: "A", Offset: 42, Encoding: EncodingRaw},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ScanSecrets mismatch (-want +got):\n%s", diff)
	}
	if got := ScanSecrets(in, []Secret{{Name: "S", Value: "xx"}}); got != nil {
		t.Errorf("a short secret was scanned: %+v", got)
	}
}

// TestRedactorRandom plants secrets in every encoding into random text,
// writes it in random pieces and checks that no form survives and the
// count is exact.
func TestRedactorRandom(t *testing.T) {
	secrets := []Secret{
		{Name: "TOKEN", Value: "ghs_16C7e42F292c6912E7710c838347Ae178B4a"},
		{Name: "KEY", Value: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"},
	}
	rng := rand.New(rand.NewPCG(7, 11))
	for i := range 200 {
		var in bytes.Buffer
		planted := 0
		for range 1 + rng.IntN(6) {
			for range rng.IntN(40) {
				in.WriteByte(" \nabcxyz019.,"[rng.IntN(13)])
			}
			s := secrets[rng.IntN(len(secrets))]
			forms := secretForms(s.Value)
			in.WriteString(forms[rng.IntN(len(forms))].value)
			in.WriteByte(' ')
			planted++
		}
		var chunks []int
		for range 5 {
			chunks = append(chunks, 1+rng.IntN(60))
		}
		out, n := redactAll(t, in.Bytes(), secrets, chunks...)
		if n != planted {
			t.Fatalf("case %d: %d redactions, want %d\nin:  %q\nout: %q", i, n, planted, in.String(), out)
		}
		assertNoSecret(t, out, secrets)
	}
}

// naiveScan is the obvious leftmost-longest search the matcher must agree
// with.
func naiveScan(b []byte, m *secretMatcher) []SecretHit {
	var hits []SecretHit
	for i := 0; i < len(b); {
		var best *secretPattern
		for j := range m.pats {
			p := &m.pats[j]
			if bytes.HasPrefix(b[i:], p.value) && (best == nil || len(p.value) > len(best.value)) {
				best = p
			}
		}
		if best == nil {
			i++
			continue
		}
		hits = append(hits, SecretHit{Name: best.name, Offset: i, Encoding: best.encoding})
		i += len(best.value)
	}
	return hits
}

// TestSecretMatcherAgreesWithNaiveScan checks the skipping search against
// the obvious one on a small alphabet, where near-misses are common.
func TestSecretMatcherAgreesWithNaiveScan(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	word := func(n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = "abAB01+/=%"[rng.IntN(10)]
		}
		return string(b)
	}
	for i := range 300 {
		var secrets []Secret
		for j := range 1 + rng.IntN(3) {
			secrets = append(secrets, Secret{Name: fmt.Sprint("S", j), Value: word(MinSecretLength + rng.IntN(12))})
		}
		m := compileSecrets(secrets)
		var in bytes.Buffer
		for range 20 {
			in.WriteString(word(rng.IntN(8)))
			if rng.IntN(2) == 0 {
				in.Write(m.pats[rng.IntN(len(m.pats))].value)
			}
		}
		if diff := cmp.Diff(naiveScan(in.Bytes(), m), ScanSecrets(in.Bytes(), secrets)); diff != "" {
			t.Fatalf("case %d: ScanSecrets differs from the naive scan (-naive +got):\n%s", i, diff)
		}
	}
}

// A variable's value that is the path of an existing file is no secret;
// anything else that starts with "/" may be.
func TestPathToFile(t *testing.T) {
	dir := t.TempDir()
	bundle := filepath.Join(dir, "ca-certificates.crt")
	if err := os.WriteFile(bundle, []byte("-----BEGIN CERTIFICATE-----\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for v, want := range map[string]bool{
		bundle:       true,
		dir:          false, // a directory
		bundle + "x": false, // no such file
		dir + "/../" + filepath.Base(dir) + "/ca-certificates.crt": false, // not clean
		dir + "//ca-certificates.crt":                              false,
		"/3kQ+aZ9b/c8dEfGh==":                                      false, // base64 that starts with a slash
		"relative/ca.crt":                                          false,
		"/":                                                        false,
		bundle + " ":                                               false,
		"/" + strings.Repeat("a", MaxPathValueBytes): false,
	} {
		if got := PathToFile(v); got != want {
			t.Errorf("PathToFile(%q) = %v, want %v", v, got, want)
		}
	}
}

// Every variable that sets an npm credential is a secret, in any case and
// for any registry; other npm settings are not.
func TestLooksSecretNpmAuth(t *testing.T) {
	for name, want := range map[string]bool{
		"NPM_CONFIG_//registry.npmjs.org/:_authToken": true,
		"npm_config_//registry.npmjs.org/:_authtoken": true,
		"npm_config_//npm.example.com/private/:_auth": true,
		"npm_config_//npm.example.com/:_password":     true,
		"npm_config__authToken":                       true,
		"NPM_CONFIG__AUTH":                            true,
		"npm_config__password":                        true,
		"npm_config_//registry.npmjs.org/:username":   false,
		"npm_config_//registry.npmjs.org/:email":      false,
		"npm_config_registry":                         false,
		"npm_config_cache":                            false,
	} {
		if got := LooksSecret(name); got != want {
			t.Errorf("LooksSecret(%q) = %v, want %v", name, got, want)
		}
	}
}
