package main

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/gilf-review/gilf/internal/shared"
	"github.com/gilf-review/gilf/webhook"
)

// TestSignerMatchesSign: the signer's signature of every delivery the
// generator sends is webhook.Sign's, with prefixes (one pull request,
// 500, MaxPrefixPRs) and without (MaxPrefixPRs+1), from goroutines
// sharing the prefixes; and a delivery hashes less than 1% of its body
// (the head sha is its last member), so the prefix is worth keeping.
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
			if rest := len(tmpl.body) - s.cut; s.prefix != nil && rest*100 >= len(tmpl.body) {
				t.Errorf("a delivery hashes %d of its %d bytes, want less than 1%%", rest, len(tmpl.body))
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

// TestPayloadHeadSHALast: the template is the real payload (padded, with
// the markers), as JSON equal to json.Marshal's, with the head sha as its
// last member; marshalLast refuses a path that is not there.
func TestPayloadHeadSHALast(t *testing.T) {
	path := filepath.Join(shared.Dir(t), "data", "webhooks", "pull_request", "opened.json")
	tmpl, err := buildPayload(path, DefaultSize)
	if err != nil {
		t.Fatal(err)
	}
	if len(tmpl.body) != DefaultSize {
		t.Errorf("template is %d bytes, want %d", len(tmpl.body), DefaultSize)
	}
	if want := `"sha":"` + strings.Repeat("f", 40) + `"}}}`; !bytes.HasSuffix(tmpl.body, []byte(want)) {
		t.Errorf("template ends %q, want %q", tmpl.body[len(tmpl.body)-60:], want)
	}
	var got, want map[string]any
	if err := json.Unmarshal(tmpl.body, &got); err != nil {
		t.Fatal(err)
	}
	plain, err := json.Marshal(got) // sorted keys: the same members, json.Marshal's way
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(plain, &want); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) || len(plain) != len(tmpl.body) {
		t.Errorf("template is not json.Marshal's encoding reordered: %d bytes against %d", len(tmpl.body), len(plain))
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var orig map[string]any
	if err := json.Unmarshal(raw, &orig); err != nil {
		t.Fatal(err)
	}
	if g, o := got["repository"], orig["repository"]; !reflect.DeepEqual(g, o) {
		t.Error("the template's repository differs from the payload's")
	}
	for _, bad := range [][]string{{"pull_request", "nope"}, {"action", "x"}} {
		if _, err := marshalLast(orig, bad); err == nil {
			t.Errorf("marshalLast(%v) = nil error, want one", bad)
		}
	}
}
