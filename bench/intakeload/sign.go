package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"slices"
	"strconv"
)

// MaxPrefixPRs bounds the pull requests the signer keeps a hashed prefix
// for (about 200 bytes each); with more (-prs), every delivery is signed
// from its first byte.
const MaxPrefixPRs = 4096

// signer signs the generator's deliveries, byte for byte what
// webhook.Sign gives, for a fraction of its CPU: on this shared machine
// the generator's CPU is taken from the servers it measures, and signing
// a whole 25 KB body was about half of the generator's time per request
// (63–65 µs per answer at SQLite's rates; 34–45 µs with the signer).
//
// Every byte before the first head sha (cut) depends on the pull request
// number alone: the template puts the head sha last (buildPayload). The
// signer hashes that prefix once per pull request into an HMAC whose
// state each delivery clones, then hashes only the rest of its body.
type signer struct {
	secret []byte
	cut    int           // bytes of the body covered by a prefix
	prefix []hash.Cloner // by pull request index (n mod -prs); nil: no prefixes
}

// newSigner hashes the prefix of each of the prs pull requests of tmpl, up
// to MaxPrefixPRs.
func newSigner(tmpl template, secret []byte, prs int) (*signer, error) {
	s := &signer{secret: secret, cut: slices.Min(tmpl.heads)}
	if prs > MaxPrefixPRs {
		return s, nil
	}
	body := slices.Clone(tmpl.body)
	s.prefix = make([]hash.Cloner, prs)
	for k := range prs {
		tmpl.setPR(body, k)
		mac, ok := hmac.New(sha256.New, secret).(hash.Cloner)
		if !ok {
			return nil, fmt.Errorf("HMAC-SHA256 cannot be cloned here")
		}
		mac.Write(body[:s.cut])
		s.prefix[k] = mac
	}
	return s, nil
}

// sign returns the X-Hub-Signature-256 of body, which holds pull request
// index k (tmpl.setPR) and any head sha.
func (s *signer) sign(body []byte, k int) (string, error) {
	var mac hash.Hash
	rest := body
	if s.prefix != nil {
		c, err := s.prefix[k].Clone()
		if err != nil {
			return "", fmt.Errorf("clone HMAC: %w", err)
		}
		mac, rest = c, body[s.cut:]
	} else {
		mac = hmac.New(sha256.New, s.secret)
	}
	mac.Write(rest)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil)), nil
}

// setPR writes pull request index k's number (prBase + k) into body.
func (t template) setPR(body []byte, k int) {
	num := strconv.Itoa(prBase + k)
	for _, at := range t.prs {
		copy(body[at:], num)
	}
}
