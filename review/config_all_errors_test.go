package review

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestRepoConfigEveryErrorAtOnce: a file with a typo'd key, a value of
// the wrong kind, a mode out of range and a secret in the env lists all
// four, in line order — a schema error no longer hides the rest — and a
// key is never reported twice.
func TestRepoConfigEveryErrorAtOnce(t *testing.T) {
	f := ParseRepoConfig([]byte(`execution:
  mode: sometimes
  brnches: [main]
review:
  drafts: maybe
validation:
  env:
    GITHUB_TOKEN: x
`))
	var got []string
	for _, e := range f.Errors {
		got = append(got, e.Key)
	}
	want := []string{"execution.mode", "execution.brnches", "review.drafts", "validation.env.GITHUB_TOKEN"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("errors (-want +got):\n%s\n%s", diff, f.Problems())
	}
	if !f.Found || len(f.Errors) == 0 {
		t.Fatalf("found %v with %d errors", f.Found, len(f.Errors))
	}
}
