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
