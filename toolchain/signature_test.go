package toolchain

import (
	"testing"

	"github.com/gilf-review/gilf/validation"
)

// signedMessage is what npm signs for the fake's release.
func signedMessage(f *fakeRegistry) string {
	return fakePkg + "@" + fakeVersion + ":" + f.dist["integrity"].(string)
}

func TestSignatures(t *testing.T) {
	key := newSigner(t, fakeKeyID)
	other := newSigner(t, fakeKeyID) // the same keyid, another key
	for _, tt := range []struct {
		name      string
		configure func(t *testing.T, f *fakeRegistry)
		words     string // Tool.Integrity; "" wants an error
		err       string
	}{
		{
			name: "valid",
			configure: func(t *testing.T, f *fakeRegistry) {
				f.dist["signatures"] = []any{key.sign(t, signedMessage(f))}
				f.keys = keysBody(t, nil, key)
			},
			words: "sha512 integrity from the registry; registry signature verified (" + fakeKeyID + ")",
		},
		{
			name: "valid, by a key that expired",
			configure: func(t *testing.T, f *fakeRegistry) {
				f.dist["signatures"] = []any{key.sign(t, signedMessage(f))}
				f.keys = keysBody(t, "2025-01-29T00:00:00.000Z", key)
			},
			words: "sha512 integrity from the registry; registry signature verified (" + fakeKeyID + ", key expiry 2025-01-29)",
		},
		{
			name: "forged message",
			configure: func(t *testing.T, f *fakeRegistry) {
				f.dist["signatures"] = []any{key.sign(t, fakePkg+"@4.4.2:"+f.dist["integrity"].(string))}
				f.keys = keysBody(t, nil, key)
			},
			err: "does not verify",
		},
		{
			name: "forged key",
			configure: func(t *testing.T, f *fakeRegistry) {
				f.dist["signatures"] = []any{other.sign(t, signedMessage(f))}
				f.keys = keysBody(t, nil, key)
			},
			err: "does not verify",
		},
		{
			name: "not base64",
			configure: func(t *testing.T, f *fakeRegistry) {
				f.dist["signatures"] = []any{map[string]any{"keyid": fakeKeyID, "sig": "!!"}}
				f.keys = keysBody(t, nil, key)
			},
			err: "does not verify",
		},
		{
			name: "one of two forged",
			configure: func(t *testing.T, f *fakeRegistry) {
				second := newSigner(t, "SHA256:second")
				f.dist["signatures"] = []any{key.sign(t, signedMessage(f)), second.sign(t, "something else")}
				f.keys = keysBody(t, nil, key, second)
			},
			err: "by SHA256:second does not verify",
		},
		{
			name: "unknown keyid",
			configure: func(t *testing.T, f *fakeRegistry) {
				f.dist["signatures"] = []any{newSigner(t, "SHA256:unknown").sign(t, signedMessage(f))}
				f.keys = keysBody(t, nil, key)
			},
			err: "which the registry does not list",
		},
		{
			name: "no keys served",
			configure: func(t *testing.T, f *fakeRegistry) {
				f.dist["signatures"] = []any{key.sign(t, signedMessage(f))}
			},
			err: "serves no keys",
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(t, nil, func(f *fakeRegistry) { tt.configure(t, f) })
			c, dir := fakeCache(t, f, Options{})
			tool, err := c.Prepare(t.Context(), fakeRequest)
			if tt.err != "" {
				wantError(t, err, tt.err)
				notCached(t, dir)
				if n := f.tarballs.Load(); n != 0 {
					t.Errorf("%d tarball downloads, want none before the signature verifies", n)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tool.Integrity != tt.words {
				t.Errorf("Integrity = %q, want %q", tool.Integrity, tt.words)
			}
		})
	}
}

// The keys are fetched once per Cache.
func TestSignatureKeysOnce(t *testing.T) {
	key := newSigner(t, fakeKeyID)
	f := newFake(t, nil, func(f *fakeRegistry) {
		f.dist["signatures"] = []any{key.sign(t, signedMessage(f))}
		f.keys = keysBody(t, nil, key)
	})
	c, _ := fakeCache(t, f, Options{})
	for range 2 {
		// "" resolves in the registry every time; the entry is reused.
		if _, err := c.Prepare(t.Context(), validation.ToolRequest{Manager: validation.YarnBerry}); err != nil {
			t.Fatal(err)
		}
	}
	if got := f.requests.Load() - f.packuments.Load() - f.tarballs.Load(); got != 1 {
		t.Errorf("%d key requests, want 1", got)
	}
}
