package webhook

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gilf-review/gilf/internal/shared"
	"github.com/gilf-review/gilf/validation"
)

// FuzzClassify feeds arbitrary bytes to the payload decoder and the action
// table: they never panic, and whatever they accept as a job or a re-run
// is well formed (a valid repo, a positive PR or job id, a hex head sha).
func FuzzClassify(f *testing.F) {
	for _, dir := range []string{"pull_request", "ping", "installation", "installation_repositories", "push", "check_run", "check_suite", "issue_comment"} {
		files, err := filepath.Glob(filepath.Join(shared.Data(f, "webhooks", dir), "*.json"))
		if err != nil {
			f.Fatal(err)
		}
		for _, p := range files {
			b, err := os.ReadFile(p)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(dir, b)
		}
	}
	f.Add("pull_request", []byte(`{"action":"edited","changes":{"base":null},"pull_request":{}}`))
	f.Add("pull_request", []byte(`{"action":"opened","pull_request":{"head":{"repo":null}}}`))
	f.Add("pull_request", []byte(`[]`))
	f.Add("check_run", []byte(`{"action":"rerequested","check_run":{"id":4,"external_id":"12.3","head_sha":"`+strings.Repeat("a", 40)+
		`","app":{"id":2}},"repository":{"full_name":"o/r"},"installation":{"id":1}}`))
	f.Add("check_run", []byte(`{"action":"rerequested","check_run":{"external_id":"012","app":null}}`))
	f.Add("check_suite", []byte(`{"action":"rerequested","check_suite":{"id":1,"head_sha":"`+strings.Repeat("b", 40)+
		`","app":{"id":2}},"repository":{"full_name":"o/r"}}`))
	f.Add("check_suite", []byte(`{"action":"rerequested","check_suite":null}`))
	f.Fuzz(func(t *testing.T, event string, body []byte) {
		p, err := decodePayload(body)
		if err != nil {
			return
		}
		for _, app := range []int64{0, 2, 29310} {
			d := classify(event, p, rules{appID: app, commands: true, slug: "gilf"})
			if d.status == "" || d.code == 0 {
				t.Fatalf("empty decision %+v", d)
			}
			if j := d.job; j != nil {
				if d.status != validation.DeliveryQueued || !validRepo(j.Repo) || j.PR <= 0 || !validSHA(j.HeadSHA) ||
					j.HeadRepo == "" || len(j.BaseRef) > MaxRefLen {
					t.Fatalf("malformed job %+v from %q", j, body)
				}
			}
			if c := d.cancel; c != nil && c.InstallationID == 0 {
				t.Fatalf("cancellation without installation from %q", body)
			}
			if r := d.rerun; r != nil {
				if app == 0 || d.status != validation.DeliveryQueued || !validRepo(r.Repo) || !validSHA(r.HeadSHA) ||
					r.JobID < 0 || (event == "check_run") != (r.JobID > 0) || d.job != nil {
					t.Fatalf("malformed re-run %+v (app %d) from %q", r, app, body)
				}
			}
		}
	})
}

func TestValidRepoAndSHA(t *testing.T) {
	for _, tt := range []struct {
		s    string
		repo bool
	}{
		{"o/r", true}, {"Codertocat/Hello-World", true}, {"a.b/c_d-e", true},
		{"o/" + strings.Repeat("r", MaxRepoNameLen-2), true}, {"o/" + strings.Repeat("r", MaxRepoNameLen-1), false},
		{"/r", false}, {"o/", false}, {"o/r/x", false}, {"o r/x", false}, {"../../etc", false}, {"", false},
	} {
		if got := validRepo(tt.s); got != tt.repo {
			t.Errorf("validRepo(%q) = %v", tt.s, got)
		}
	}
	for _, tt := range []struct {
		s  string
		ok bool
	}{
		{"ec26c3e57ca3a959ca5aad62de7213c562f8c821", true},
		{"EC26C3E57CA3A959CA5AAD62DE7213C562F8C821", false},
		{"ec26c3e57ca3a959ca5aad62de7213c562f8c82", false},
		{"ec26c3e57ca3a959ca5aad62de7213c562f8c821ec26c3e57ca3a959ca5aad62", true},
	} {
		if got := validSHA(tt.s); got != tt.ok {
			t.Errorf("validSHA(%q) = %v", tt.s, got)
		}
	}
}

func TestBaseRefLimit(t *testing.T) {
	pr := func(ref string) payload {
		return payload{Action: "opened", Installation: &idRef{ID: 1}, Repository: &repoRef{FullName: "o/r"},
			PullRequest: &prRef{Number: 1, HeadSHA: strings.Repeat("a", 40), HeadRepo: &repoRef{FullName: "o/r"}, BaseRef: ref}}
	}
	if d := classify("pull_request", pr(strings.Repeat("b", MaxRefLen)), rules{}); d.job == nil {
		t.Fatalf("ref at the limit: %+v", d)
	}
	if d := classify("pull_request", pr(strings.Repeat("b", MaxRefLen+1)), rules{}); d.status != validation.DeliveryInvalid {
		t.Fatalf("ref over the limit: %+v", d)
	}
}
