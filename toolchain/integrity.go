package toolchain

import (
	"bytes"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"strings"

	"github.com/gilf-review/gilf/validation"
)

// Digest algorithms. A tarball is hashed with all of them as it
// downloads: sha384 for SRI only, sha224 for corepack only.
const (
	algoSHA1   = "sha1"
	algoSHA224 = "sha224"
	algoSHA256 = "sha256"
	algoSHA384 = "sha384"
	algoSHA512 = "sha512"
)

// sriAlgos are the algorithms of an SRI integrity gilf checks, weakest
// first: the strongest one present is the one compared (SRI §3.3).
var sriAlgos = []string{algoSHA256, algoSHA384, algoSHA512}

// corepackAlgos are the algorithms of a corepack hash, and of the hex
// digests a cache entry records.
var corepackAlgos = []string{algoSHA1, algoSHA224, algoSHA256, algoSHA512}

// hasher computes every digest of one stream at once.
type hasher struct {
	w      io.Writer
	hashes map[string]hash.Hash
}

func newHasher() *hasher {
	h := &hasher{hashes: map[string]hash.Hash{
		algoSHA1: sha1.New(), algoSHA224: sha256.New224(), algoSHA256: sha256.New(),
		algoSHA384: sha512.New384(), algoSHA512: sha512.New(),
	}}
	ws := make([]io.Writer, 0, len(h.hashes))
	for _, x := range h.hashes {
		ws = append(ws, x)
	}
	h.w = io.MultiWriter(ws...)
	return h
}

func (h *hasher) Write(p []byte) (int, error) { return h.w.Write(p) }

// sums returns the digests so far, by algorithm.
func (h *hasher) sums() map[string][]byte {
	out := make(map[string][]byte, len(h.hashes))
	for algo, x := range h.hashes {
		out[algo] = x.Sum(nil)
	}
	return out
}

// hexDigests are the corepack algorithms' digests of one file, in hex.
type hexDigests struct {
	SHA1   string `json:"sha1"`
	SHA224 string `json:"sha224"`
	SHA256 string `json:"sha256"`
	SHA512 string `json:"sha512"`
}

func toHex(sums map[string][]byte) hexDigests {
	return hexDigests{
		SHA1: hex.EncodeToString(sums[algoSHA1]), SHA224: hex.EncodeToString(sums[algoSHA224]),
		SHA256: hex.EncodeToString(sums[algoSHA256]), SHA512: hex.EncodeToString(sums[algoSHA512]),
	}
}

// get returns the digest for a corepack algorithm.
func (d hexDigests) get(algo string) string {
	switch algo {
	case algoSHA1:
		return d.SHA1
	case algoSHA224:
		return d.SHA224
	case algoSHA256:
		return d.SHA256
	case algoSHA512:
		return d.SHA512
	}
	return ""
}

// valid reports whether every digest is lowercase hex of its length.
func (d hexDigests) valid() bool {
	for _, algo := range corepackAlgos {
		if !isHex(d.get(algo), hexLen(algo)) || strings.ToLower(d.get(algo)) != d.get(algo) {
			return false
		}
	}
	return true
}

// hexLen is the length in hex of a corepack algorithm's digest.
func hexLen(algo string) int {
	switch algo {
	case algoSHA1:
		return 2 * sha1.Size
	case algoSHA224:
		return 2 * sha256.Size224
	case algoSHA256:
		return 2 * sha256.Size
	case algoSHA512:
		return 2 * sha512.Size
	}
	return 0
}

func isHex(s string, n int) bool {
	if n == 0 || len(s) != n {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil
}

// corepackHash is a parsed packageManager hash, "<algo>.<hex>".
type corepackHash struct {
	algo string
	hex  string // lowercase
}

func (h corepackHash) String() string { return h.algo + "." + h.hex }

// parseCorepackHash parses the hash of a packageManager field; a hash
// gilf cannot check is a refusal, never ignored.
func parseCorepackHash(s string) (corepackHash, error) {
	algo, digest, ok := strings.Cut(s, ".")
	n := hexLen(algo)
	if !ok || n == 0 || !isHex(digest, n) {
		shown := s
		if len(shown) > 160 {
			shown = shown[:160] + "…"
		}
		return corepackHash{}, validation.Refuse(validation.CodePackageManagerUnavailable,
			"the packageManager hash %q is not <algorithm>.<hex> with algorithm sha1, sha224, sha256 or sha512", shown)
	}
	return corepackHash{algo: algo, hex: strings.ToLower(digest)}, nil
}

// sriEntry is one hash of an SRI integrity string.
type sriEntry struct {
	algo   string
	digest []byte
}

// parseSRI returns the entries of an SRI integrity string gilf can
// check, of its strongest algorithm only. Entries of other algorithms,
// malformed entries and options ("?…") are ignored, as SRI says.
func parseSRI(s string) []sriEntry {
	byAlgo := map[string][]sriEntry{}
	for _, tok := range strings.Fields(s) {
		tok, _, _ = strings.Cut(tok, "?")
		algo, b64, ok := strings.Cut(tok, "-")
		if !ok {
			continue
		}
		digest, err := base64.StdEncoding.DecodeString(b64)
		if err != nil || len(digest) != digestSize(algo) {
			continue
		}
		byAlgo[algo] = append(byAlgo[algo], sriEntry{algo: algo, digest: digest})
	}
	for i := len(sriAlgos) - 1; i >= 0; i-- {
		if e := byAlgo[sriAlgos[i]]; len(e) > 0 {
			return e
		}
	}
	return nil
}

func digestSize(algo string) int {
	switch algo {
	case algoSHA256:
		return sha256.Size
	case algoSHA384:
		return sha512.Size384
	case algoSHA512:
		return sha512.Size
	}
	return 0
}

// checkIntegrity compares a tarball's digests with what the registry
// says of it: its SRI integrity, else its sha1 shasum. It returns the
// words of what was checked. Nothing to check against is a refusal; a
// mismatch is an error (the bytes are not what the registry published).
func checkIntegrity(spec, integrity, shasum string, sums map[string][]byte) (string, error) {
	if entries := parseSRI(integrity); len(entries) > 0 {
		for _, e := range entries {
			if bytes.Equal(sums[e.algo], e.digest) {
				return e.algo + " integrity from the registry", nil
			}
		}
		return "", fmt.Errorf("%s: the tarball does not match its %s integrity from the registry", spec, entries[0].algo)
	}
	if shasum != "" {
		want, err := hex.DecodeString(shasum)
		if err != nil || len(want) != sha1.Size {
			return "", fmt.Errorf("%s: the registry's shasum %q is not a sha1 in hex", spec, truncate(shasum, 80))
		}
		if !bytes.Equal(sums[algoSHA1], want) {
			return "", fmt.Errorf("%s: the tarball does not match its sha1 shasum from the registry", spec)
		}
		return "sha1 shasum from the registry, which serves no sha256/sha384/sha512 integrity", nil
	}
	return "", validation.Refuse(validation.CodePackageManagerUnavailable,
		"%s has no integrity or shasum on the registry: its bytes cannot be checked", spec)
}

// checkCorepackHash compares the packageManager hash with the digests of
// what it covers and returns the words to add to Tool.Integrity.
func checkCorepackHash(spec string, want corepackHash, covered string, got hexDigests) (string, error) {
	have := got.get(want.algo)
	if have != want.hex {
		return "", validation.Refuse(validation.CodePackageManagerUnavailable,
			"%s: its %s does not match the packageManager hash %s (it hashes to %s.%s)", spec, covered, want, want.algo, have)
	}
	return fmt.Sprintf("; packageManager hash %s matches its %s", want, covered), nil
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
