package main

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gilf-review/gilf/internal/shared"
	"github.com/gilf-review/gilf/review/github/githubtest"
	"github.com/gilf-review/gilf/store"
	"github.com/gilf-review/gilf/validation"
)

// commentPayload derives the real issue_comment created payload: a
// comment on the pull request of p by login (a User, or a Bot).
func commentPayload(t *testing.T, p prPayload, id int64, login, userType, body string) []byte {
	t.Helper()
	b, err := os.ReadFile(shared.Data(t, "webhooks", "issue_comment", "created.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	m["repository"].(map[string]any)["full_name"] = p.owner + "/" + p.repo
	m["installation"] = map[string]any{"id": p.installationID}
	issue := m["issue"].(map[string]any)
	issue["number"] = p.number
	issue["pull_request"] = map[string]any{"url": "https://api.github.com/repos/" + p.owner + "/" + p.repo + "/pulls/1"}
	c := m["comment"].(map[string]any)
	c["id"], c["body"] = id, body
	user := c["user"].(map[string]any)
	user["login"], user["type"] = login, userType
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestServeE2ECommands: commands in comments through gilf serve. A
// writer's /gilf rerun runs the head again (👀 on the comment); a
// reader's gets a short reply and runs nothing; a bot's is ignored; the
// budget (2 runs per hour) refuses the command that would be the third
// run, saying when; explain posts a step's excerpt; help lists the
// commands.
func TestServeE2ECommands(t *testing.T) {
	payload := openedPayload(t)
	realTarball, err := os.ReadFile(shared.Data(t, "repos", "util-deprecate.tar.gz"))
	if err != nil {
		t.Fatal(err)
	}
	key := newAppKey(t)
	srv := fakeGitHub(t, key, payload, realTarball)
	srv.SetPermission("writer", "write")
	srv.SetPermission("reader", "read")
	dataDir := t.TempDir()
	p := startServe(t, serveEnv(t, srv, key, dataDir, "GILF_GITHUB_APP_SLUG=gilf-review", "GILF_COMMAND_RUNS_PER_HOUR=2"))
	db := openTestStore(t, dataDir)

	code, rep := deliver(t, p.url, newGUID(t), "pull_request", payload.body, signature(serveSecret, payload.body))
	if code != 202 || rep.Job == 0 {
		t.Fatalf("delivery answered %d %+v", code, rep)
	}
	job := rep.Job
	waitJob(t, db, p, job, "done", func(s store.JobStatus) bool { return s.State == store.StateDone })

	// command posts a comment and waits until the worker answered it.
	command := func(id int64, login, userType, body string) store.StoredDelivery {
		t.Helper()
		b := commentPayload(t, payload, id, login, userType, body)
		guid := newGUID(t)
		code, rep := deliver(t, p.url, guid, "issue_comment", b, signature(serveSecret, b))
		if code != 202 || rep.Job != 0 {
			t.Fatalf("comment answered %d %+v", code, rep)
		}
		deadline := time.Now().Add(serveJobBound)
		for {
			d, err := db.Delivery(t.Context(), guid)
			if err != nil {
				t.Fatal(err)
			}
			if d.Status != validation.DeliveryQueued && d.Status != validation.DeliveryRunning {
				return d
			}
			if time.Now().After(deadline) {
				t.Fatalf("command %q not answered within %v: %+v\n%s", body, serveJobBound, d.Delivery, p.stderr.String())
			}
			time.Sleep(servePoll)
		}
	}
	reruns := func() int { return state(t, db, job).Reruns }

	// A reader: a reply, no reaction, no run.
	d := command(101, "reader", "User", "/gilf rerun")
	if d.Status != validation.DeliveryDone || !strings.Contains(d.Reason, "refused: @reader has read permission") {
		t.Errorf("reader's command recorded %q %q", d.Status, d.Reason)
	}
	if c := srv.IssueComments(); len(c) != 1 || !strings.Contains(c[0], "@reader gilf takes commands only from people with write access") {
		t.Errorf("comments after the reader's command: %q", c)
	}
	if r := srv.Reactions(); len(r) != 0 || reruns() != 0 {
		t.Errorf("the reader's command reacted %v or re-ran (%d)", r, reruns())
	}

	// A bot (gilf itself included): recorded by intake, nothing else.
	d = command(102, "gilf-review[bot]", "Bot", "/gilf rerun")
	if d.Status != validation.DeliveryIgnored || !strings.Contains(d.Reason, "by a bot") {
		t.Errorf("a bot's command recorded %q %q", d.Status, d.Reason)
	}

	// A writer, by mention: 👀, and the head runs again (run 2 of 2).
	d = command(103, "writer", "User", "@gilf-review rerun")
	if d.Status != validation.DeliveryDone || !strings.Contains(d.Reason, "rerun: job") {
		t.Errorf("writer's command recorded %q %q", d.Status, d.Reason)
	}
	if r := srv.Reactions(); len(r) != 1 || r[0] != (githubtest.Reaction{CommentID: 103, Content: "eyes"}) {
		t.Errorf("reactions %+v, want 👀 on comment 103", r)
	}
	st := waitJob(t, db, p, job, "re-run and done", func(s store.JobStatus) bool { return s.Reruns == 1 && s.State == store.StateDone })
	if !strings.Contains(st.Reason, "re-run asked by @writer in a comment") {
		t.Errorf("job reason %q", st.Reason)
	}
	if n := srv.Count(githubtest.GetPermission); n != 2 {
		t.Errorf("permission asked %d times, want 2 (reader, writer): the bot is never asked", n)
	}

	// The budget: two runs in the hour, the third is refused with when.
	d = command(104, "writer", "User", "/gilf review")
	if d.Status != validation.DeliveryDone || !strings.Contains(d.Reason, "over budget: 2 runs in the last hour") {
		t.Errorf("the command over the budget recorded %q %q", d.Status, d.Reason)
	}
	comments := srv.IssueComments()
	if last := comments[len(comments)-1]; !strings.Contains(last, "gilf runs at most 2 per pull request per hour. It can run again after") {
		t.Errorf("the budget's reply: %q", last)
	}
	if reruns() != 1 {
		t.Errorf("the command over the budget re-ran the job (%d re-runs)", reruns())
	}

	// explain and help run nothing: not limited by the run budget.
	d = command(105, "writer", "User", "/gilf explain test")
	comments = srv.IssueComments()
	if last := comments[len(comments)-1]; d.Status != validation.DeliveryDone || !strings.Contains(last, "**`test`**") || !strings.Contains(last, "npm run test") {
		t.Errorf("explain: %q %q, reply %q", d.Status, d.Reason, last)
	}
	command(106, "writer", "User", "/gilf")
	comments = srv.IssueComments()
	if last := comments[len(comments)-1]; !strings.Contains(last, "`@gilf-review <command>`") || !strings.Contains(last, "`explain <step>`") {
		t.Errorf("help: %q", last)
	}
	if r := srv.Reactions(); len(r) != 3 {
		t.Errorf("reactions %+v, want one per accepted command (103, 105, 106) and none for the refused ones", r)
	}
}

func state(t *testing.T, db *store.DB, id int64) store.JobStatus {
	t.Helper()
	st, err := db.JobState(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return st
}
