package main

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gilf-review/gilf/webhook"
)

func TestAllowlistSettings(t *testing.T) {
	a, err := allowlist("octo-org, Codertocat\tother_1", "12 345")
	if err != nil {
		t.Fatal(err)
	}
	want := webhook.Allowlist{Accounts: []string{"octo-org", "Codertocat", "other_1"}, Installations: []int64{12, 345}}
	if diff := cmp.Diff(want, a); diff != "" {
		t.Errorf("allowlist (-want +got):\n%s", diff)
	}
	if a, err := allowlist("", ""); err != nil || len(a.Accounts)+len(a.Installations) != 0 {
		t.Errorf("unset: %+v, %v; want empty (everyone allowed)", a, err)
	}
	for _, bad := range [][2]string{{"octo/org", ""}, {"", "0"}, {"", "-3"}, {"", "12a"}} {
		if _, err := allowlist(bad[0], bad[1]); err == nil {
			t.Errorf("allowlist(%q, %q) accepted", bad[0], bad[1])
		}
	}
}

func TestTrustedProxiesSetting(t *testing.T) {
	got, err := trustedProxies("10.1.2.3/8, 192.168.1.7\t::1 ::ffff:10.9.9.9")
	if err != nil {
		t.Fatal(err)
	}
	var s []string
	for _, p := range got {
		s = append(s, p.String())
	}
	// Masked, and single addresses as one-address prefixes.
	if diff := cmp.Diff([]string{"10.0.0.0/8", "192.168.1.7/32", "::1/128", "10.9.9.9/32"}, s); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if n := badSignatureLimit(0); n >= 0 {
		t.Errorf("GILF_BAD_SIGNATURE_LIMIT=0 gives webhook limit %d, want negative (off)", n)
	}
	if n := badSignatureLimit(30); n != 30 {
		t.Errorf("limit %d, want 30", n)
	}
}
