package main

import (
	"crypto/rand"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/gilf-review/gilf/internal/shared"
	"github.com/gilf-review/gilf/webhook"
)

// TestSignerMatchesSign: the signer's signature of every delivery the
// generator sends is webhook.Sign's, with prefixes (one pull request,
// 500, MaxPrefixPRs) and without (MaxPrefixPRs+1), from goroutines
// sharing the prefixes; and a delivery hashes less than half of its body
// (the padded pull_request.body is in the prefix), so the prefix is worth
// keeping.
func TestSignerMatchesSign(t *testing.T) {
	tmpl, err := buildPayload(filepath.Join(shared.Dir(t), "data", "webhooks", "pull_request", "opened.json"), DefaultSize)
	if err != nil {
		t.Fatal(err)
	}
	secret := make([]byte, 32)
	rand.Read(secret)
	for _, prs := range []int{1, 500, MaxPrefixPRs, MaxPrefixPRs + 1} {
		t.Run(fmt.Sprint(prs), func(t *testing.T) {
			s, err := newSigner(tmpl, secret, prs)
			if err != nil {
				t.Fatal(err)
			}
			if got := s.prefix != nil; got != (prs <= MaxPrefixPRs) {
				t.Fatalf("prefixes kept: %v, want %v", got, !got)
			}
			if rest := len(tmpl.body) - s.cut; s.prefix != nil && rest*2 >= len(tmpl.body) {
				t.Errorf("a delivery hashes %d of its %d bytes, want less than half", rest, len(tmpl.body))
			}
			var wg sync.WaitGroup
			for g := range 4 {
				wg.Go(func() {
					body := slices.Clone(tmpl.body)
					for i := range 50 {
						n := int64(g*1_000_003 + i*(prs/7+1) + 1)
						k := int(n % int64(prs))
						sha := fmt.Sprintf("%040x", n)
						for _, at := range tmpl.heads {
							copy(body[at:], sha)
						}
						tmpl.setPR(body, k)
						got, err := s.sign(body, k)
						if err != nil {
							t.Error(err)
							return
						}
						if want := webhook.Sign(secret, body); got != want {
							t.Errorf("delivery %d (pull request %d): signature %s, want %s", n, k, got, want)
							return
						}
					}
				})
			}
			wg.Wait()
		})
	}
}
