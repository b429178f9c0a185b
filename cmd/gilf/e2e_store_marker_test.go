package main

import (
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/gilf-review/gilf/internal/shared"
	"github.com/gilf-review/gilf/review/github/githubtest"
	"github.com/gilf-review/gilf/store"
)

// utilDeprecateGitHub is a stand-in GitHub serving the opened payload's
// pull request with the real util-deprecate repository as its head.
func utilDeprecateGitHub(t *testing.T) (prPayload, appKey, *githubtest.Server) {
	t.Helper()
	payload := openedPayload(t)
	tb, err := os.ReadFile(shared.Data(t, "repos", "util-deprecate.tar.gz"))
	if err != nil {
		t.Fatal(err)
	}
	key := newAppKey(t)
	return payload, key, fakeGitHub(t, key, payload, tb)
}

// TestServeFreshStoreStillPosts: a database reset (a fresh data dir
// against the same GitHub) counts its jobs from 1 again. The older
// store's summary and check run for job 1 on the same pull request and
// head are not taken for the new store's: the new job 1 edits the
// summary to show itself, gets a check run of its own, and leaves the
// older check run as it was.
func TestServeFreshStoreStillPosts(t *testing.T) {
	payload, key, srv := utilDeprecateGitHub(t)
	var ids []string
	for i := range 2 {
		dataDir := t.TempDir()
		p := startServe(t, serveEnv(t, srv, key, dataDir))
		db := openTestStore(t, dataDir)
		id, err := db.StoreID(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
		code, rep := deliver(t, p.url, newGUID(t), "pull_request", payload.body, signature(serveSecret, payload.body))
		if code != 202 || rep.Job != 1 {
			t.Fatalf("store %d: delivery answered %d %+v, want 202 with job 1", i, code, rep)
		}
		st := waitJob(t, db, p, rep.Job, "done", func(s store.JobStatus) bool {
			return s.State != store.StateQueued && s.State != store.StateRunning
		})
		if st.State != store.StateDone {
			t.Fatalf("store %d: job ended %s (%q)", i, st.State, st.LastError)
		}
		if err := p.stop(t, syscall.SIGTERM); err != nil {
			t.Fatalf("stop: %v", err)
		}
	}
	if ids[0] == ids[1] {
		t.Fatalf("two fresh stores share the id %s", ids[0])
	}
	checks := srv.CheckRuns()
	if len(checks) != 2 {
		t.Fatalf("%d check runs, want one per store", len(checks))
	}
	for i, cr := range checks {
		if want := ids[i] + "-1"; cr["external_id"] != want || cr["status"] != "completed" {
			t.Errorf("check run %d: external_id %v status %v, want %s completed", i, cr["external_id"], cr["status"], want)
		}
	}
	reviews := srv.Reviews()
	if len(reviews) != 1 {
		t.Fatalf("%d reviews, want the one summary", len(reviews))
	}
	body, _ := reviews[0]["body"].(string)
	if !strings.Contains(body, "<!-- gilf:job="+ids[1]+"-1 -->") || !strings.Contains(body, "job="+ids[0]+"-1 title=") {
		t.Errorf("summary does not show the new store's job over the older one's:\n%s", body)
	}
}
