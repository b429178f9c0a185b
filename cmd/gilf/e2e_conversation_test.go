package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/gilf-review/gilf/internal/shared"
	"github.com/gilf-review/gilf/review/github"
	"github.com/gilf-review/gilf/review/github/githubtest"
	"github.com/gilf-review/gilf/review/semantic/semantictest"
	"github.com/gilf-review/gilf/store"
)

// Heads of the three pushes; headA is the opened payload's.
const (
	headB = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	headC = "cccccccccccccccccccccccccccccccccccccccc"
)

// The pull request's whole diff at each head (index.js, new side lines
// 10-14) and what the compare API gives between heads.
const (
	patchA = "@@ -10,3 +10,4 @@ function deprecate(fn, msg) {\n   var warned = false;\n-  return fn;\n+  if (!msg) return fn;\n+  return wrap(fn);\n }"
	patchB = "@@ -10,3 +10,5 @@ function deprecate(fn, msg) {\n   var warned = false;\n-  return fn;\n+  if (typeof msg !== 'string') return fn;\n+  var h = open(msg);\n+  return wrap(fn, h);\n }"
	// compareAB is only what push B changed.
	compareAB = "@@ -11,2 +11,3 @@ function deprecate(fn, msg) {\n-  if (!msg) return fn;\n-  return wrap(fn);\n+  if (typeof msg !== 'string') return fn;\n+  var h = open(msg);\n+  return wrap(fn, h);\n }"
	patchC    = patchB + "\n+// rebased"
)

// finding is one model finding as JSON.
func finding(sev, path string, line int, title, body string) string {
	b, _ := json.Marshal(map[string]any{"severity": sev, "path": path, "line": line, "title": title, "body": body})
	return string(b)
}

func findings(fs ...string) string { return `{"findings":[` + strings.Join(fs, ",") + `]}` }

// syncPayload is the opened payload as a synchronize to head, updated at
// minute n (later pushes are newer updates).
func syncPayload(t *testing.T, p prPayload, head string, n int) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(p.body, &m); err != nil {
		t.Fatal(err)
	}
	m["action"] = "synchronize"
	pr := m["pull_request"].(map[string]any)
	pr["head"].(map[string]any)["sha"] = head
	pr["updated_at"] = fmt.Sprintf("2030-01-01T00:%02d:00Z", n)
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// suiteRerun is a check_suite rerequested for gilf's App at head (the
// Re-run all button).
func suiteRerun(p prPayload, head string) []byte {
	return fmt.Appendf(nil, `{"action":"rerequested","check_suite":{"id":77,"head_sha":%q,"app":{"id":%d}},"repository":{"full_name":%q},"installation":{"id":%d}}`,
		head, serveAppID, p.owner+"/"+p.repo, p.installationID)
}

// TestServeE2EConversation is issue 33's conversation through gilf serve,
// the stand-in GitHub and a model stand-in, over a re-run and three
// pushes:
//
//  1. head A: two findings, two threads;
//  2. Re-run of A: the model says the same; nothing is posted again;
//  3. a person replies in the second thread; push B (A is its ancestor):
//     the model is sent only the changes since A; the first finding's
//     code changed and the model no longer reports it: its thread is
//     resolved (once); the second is gone too but someone replied, so its
//     thread stays open with one note; a new finding gets a thread;
//  4. force-push C (B is not its ancestor): the whole pull request is
//     sent; the third finding is still there: kept, not posted again.
func TestServeE2EConversation(t *testing.T) {
	payload := openedPayload(t)
	headA := payload.headSHA
	realTarball, err := os.ReadFile(shared.Data(t, "repos", "util-deprecate.tar.gz"))
	if err != nil {
		t.Fatal(err)
	}
	key := newAppKey(t)
	srv := githubtest.New(t, githubtest.Options{
		AppID: serveAppID, PublicKey: &key.key.PublicKey, InstallationID: payload.installationID,
		Owner: payload.owner, Repo: payload.repo, Number: payload.number, HeadSHA: headA, BaseRef: payload.baseRef,
		Tarball: realTarball, Files: []string{"index.js"}, Patches: map[string]string{"index.js": patchA},
	})
	model := semantictest.New(t, "sk-test-conversation-0123456789")
	offByOne := finding("high", "index.js", 12, "Off by one", "the wrapper skips the last call")
	unchecked := finding("medium", "index.js", 11, "Unchecked message", "msg may be an object")
	leak := finding("high", "index.js", 13, "Handle leaks", "h is never closed")
	usage := semantictest.Usage{PromptTokens: 100, CompletionTokens: 10, TotalTokens: 110}
	model.Push(
		semantictest.Completion("test-model", findings(offByOne, unchecked), usage), // head A
		semantictest.Completion("test-model", findings(offByOne, unchecked), usage), // re-run of A
		semantictest.Completion("test-model", findings(leak), usage),                // head B
		semantictest.Completion("test-model", findings(leak), usage),                // head C
		semantictest.Completion("test-model", findings(leak), usage),                // /gilf review at C
	)
	dataDir := t.TempDir()
	p := startServe(t, serveEnv(t, srv, key, dataDir,
		"GILF_SEMANTIC_REVIEW_URL="+model.URL, "GILF_SEMANTIC_REVIEW_MODEL=test-model",
		"GILF_SEMANTIC_REVIEW_API_KEY=sk-test-conversation-0123456789"))
	db := openTestStore(t, dataDir)
	finished := func(s store.JobStatus) bool { return s.State != store.StateQueued && s.State != store.StateRunning }
	waitDone := func(id int64, reruns int) {
		t.Helper()
		st := waitJob(t, db, p, id, "done", func(s store.JobStatus) bool { return s.Reruns == reruns && finished(s) })
		if st.State != store.StateDone {
			t.Fatalf("job %d ended %s (%s)", id, st.State, st.LastError)
		}
	}
	threadOf := func(title string) githubtest.Thread {
		t.Helper()
		var found []githubtest.Thread
		for _, th := range srv.Threads() {
			if strings.Contains(th.Comments[0].Body, title) {
				found = append(found, th)
			}
		}
		if len(found) != 1 {
			t.Fatalf("%d threads for %q, want 1: %+v", len(found), title, srv.Threads())
		}
		return found[0]
	}

	summaryNow := func() string {
		for _, rv := range srv.Reviews() {
			if b, _ := rv["body"].(string); strings.Contains(b, github.SummaryMarker) {
				return b
			}
		}
		return ""
	}

	// 1. Head A.
	code, rep := deliver(t, p.url, newGUID(t), "pull_request", payload.body, signature(serveSecret, payload.body))
	if code != 202 || rep.Job == 0 {
		t.Fatalf("delivery answered %d %+v", code, rep)
	}
	jobA := rep.Job
	waitDone(jobA, 0)
	if n := len(srv.Threads()); n != 2 {
		t.Fatalf("head A: %d threads, want 2", n)
	}
	for _, th := range srv.Threads() {
		if github.FindingOf(th.Comments[0].Body) == "" {
			t.Errorf("thread %s has no fingerprint marker:\n%s", th.ID, th.Comments[0].Body)
		}
	}

	summaryA := summaryNow()

	// 2. Re-run of A: the same findings, no new comment.
	code, rep = deliver(t, p.url, newGUID(t), "check_suite", suiteRerun(payload, headA), signature(serveSecret, suiteRerun(payload, headA)))
	if code != 202 || rep.Job != jobA {
		t.Fatalf("re-run answered %d %+v", code, rep)
	}
	waitDone(jobA, 1)
	if n := len(srv.Threads()); n != 2 {
		t.Fatalf("after the re-run: %d threads, want still 2 (one comment per finding)", n)
	}
	comments := 0
	for _, th := range srv.Threads() {
		comments += len(th.Comments)
	}
	if comments != 2 {
		t.Errorf("after the re-run: %d comments, want 2", comments)
	}

	// 3. A person replies under "Unchecked message"; push B.
	first, second := threadOf("Off by one"), threadOf("Unchecked message")
	if !srv.HumanReply(second.Comments[0].ID, "octocat", "It is always a string here, see the caller.") {
		t.Fatal("reply not added")
	}
	// GitHub marks both threads outdated: push B rewrote their lines.
	srv.SetThreadLine(first.Comments[0].ID, 0)
	srv.SetThreadLine(second.Comments[0].ID, 0)
	srv.SetHeadSHA(headB)
	srv.SetPatches(map[string]string{"index.js": patchB})
	srv.SetComparison(headA, headB, githubtest.Comparison{Status: github.CompareAhead, Files: map[string]string{"index.js": compareAB}, Order: []string{"index.js"}})
	body := syncPayload(t, payload, headB, 1)
	code, rep = deliver(t, p.url, newGUID(t), "pull_request", body, signature(serveSecret, body))
	if code != 202 || rep.Job == 0 || rep.Job == jobA {
		t.Fatalf("push B answered %d %+v", code, rep)
	}
	waitDone(rep.Job, 0)
	reqs := model.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d model requests after push B, want 3", len(reqs))
	}
	sent := string(reqs[2].Raw)
	if !strings.Contains(sent, "@@ -11,2 +11,3 @@") || strings.Contains(sent, "@@ -10,3 +10,5 @@") ||
		!strings.Contains(sent, "changes since commit "+headA) || !strings.Contains(sent, "Off by one") {
		t.Errorf("push B: the model was not sent the compare diff since A with the earlier findings:\n%s", sent)
	}
	if got := srv.Resolutions(); len(got) != 1 || got[0] != first.ID {
		t.Errorf("push B: resolutions %v, want only %s (Off by one)", got, first.ID)
	}
	second = threadOf("Unchecked message")
	if second.Resolved || len(second.Comments) != 3 || !strings.Contains(second.Comments[2].Body, "no longer shows") {
		t.Errorf("push B: the thread with a person's reply must stay open with one note: %+v", second)
	}
	if th := threadOf("Handle leaks"); th.Resolved || len(th.Comments) != 1 {
		t.Errorf("push B: the new finding's thread %+v", th)
	}
	summaryB := summaryNow()
	for _, want := range []string{"The model read the commits since `" + headA[:7] + "`",
		"Resolved: 1 earlier finding no longer shows at this head:\n- ✅ Off by one · `index.js`",
		"Left open for the people in the thread: 1 earlier finding no longer shows at this head, but someone replied:\n- 💬 Unchecked message · `index.js`"} {
		if !strings.Contains(summaryB, want) {
			t.Errorf("push B: the summary lacks %q:\n%s", want, summaryB)
		}
	}

	// 4. Force-push C: B is not an ancestor.
	srv.SetHeadSHA(headC)
	srv.SetPatches(map[string]string{"index.js": patchC})
	srv.SetComparison(headB, headC, githubtest.Comparison{Status: github.CompareDiverged, Files: map[string]string{"index.js": "@@ -1 +1 @@\n-x\n+y"}, Order: []string{"index.js"}})
	body = syncPayload(t, payload, headC, 2)
	code, rep = deliver(t, p.url, newGUID(t), "pull_request", body, signature(serveSecret, body))
	if code != 202 || rep.Job == 0 {
		t.Fatalf("push C answered %d %+v", code, rep)
	}
	waitDone(rep.Job, 0)
	reqs = model.Requests()
	if len(reqs) != 4 {
		t.Fatalf("%d model requests after push C, want 4", len(reqs))
	}
	if sent := string(reqs[3].Raw); !strings.Contains(sent, "// rebased") || strings.Contains(sent, "changes since commit") {
		t.Errorf("push C: the model was not sent the whole pull request:\n%s", sent)
	}
	if n := len(srv.Threads()); n != 3 {
		t.Errorf("push C: %d threads, want 3 (the leak is kept, not posted again)", n)
	}
	if got := srv.Resolutions(); len(got) != 1 {
		t.Errorf("push C: resolutions %v, want still one (each thread resolved once)", got)
	}
	if second = threadOf("Unchecked message"); second.Resolved || len(second.Comments) != 3 {
		t.Errorf("push C: the note is said once and the thread stays open: %+v", second)
	}

	summary := summaryNow()
	for _, want := range []string{"<!-- gilf:semantic sha=" + headC + " -->", "not an ancestor of this head (a force-push or a rebase)",
		"1 finding is already in its thread"} {
		if !strings.Contains(summary, want) {
			t.Errorf("the summary lacks %q:\n%s", want, summary)
		}
	}

	// 5. /gilf review from a writer: head C again, the whole pull request
	// because the command asked for it (the job's reason carries it).
	srv.SetPermission("octocat", "write")
	cb := commentPayload(t, payload, 900, "octocat", "User", "/gilf review")
	code, _ = deliver(t, p.url, newGUID(t), "issue_comment", cb, signature(serveSecret, cb))
	if code != 202 {
		t.Fatalf("review command answered %d", code)
	}
	waitDone(rep.Job, 1)
	if reqs = model.Requests(); len(reqs) != 5 {
		t.Fatalf("%d model requests after /gilf review, want 5", len(reqs))
	}
	if s := summaryNow(); !strings.Contains(s, "The model read the whole pull request: a command asked for a review of the whole pull request.") ||
		len(srv.Threads()) != 3 {
		t.Errorf("after /gilf review: %d threads, summary:\n%s", len(srv.Threads()), s)
	}
	t.Logf("GitHub requests of the conversation over 5 runs: %d review-thread pages, %d resolutions, %d compares, %d review listings, %d replies",
		srv.Count(githubtest.ListThreadsQuery), srv.Count(githubtest.ResolveThreadOp), srv.Count(githubtest.CompareCommits),
		srv.Count(githubtest.ListReviews), srv.Count(githubtest.ReplyComment))
	if *conversationDump != "" {
		dumpConversation(t, *conversationDump, srv, summaryA, summaryB, summary)
	}
}

// conversationDump, when set, is where TestServeE2EConversation writes
// what the pull request shows at the end.
var conversationDump = flag.String("conversation-dump", "", "write the conversation test's pull request view to this file")

// dumpConversation writes what the pull request shows (the summary and
// each thread) as markdown, for docs/conversation.md's rendering.
func dumpConversation(t *testing.T, path string, srv *githubtest.Server, summaries ...string) {
	t.Helper()
	var b strings.Builder
	for i, s := range summaries {
		fmt.Fprintf(&b, "# Summary after push %d\n\n%s\n\n---\n\n", i+1, s)
	}
	b.WriteString("## Review threads after push 3\n\n")
	for _, th := range srv.Threads() {
		state := "open"
		if th.Resolved {
			state = "resolved"
		}
		fmt.Fprintf(&b, "### `%s` line %d — %s\n\n", th.Path, th.Line, state)
		for _, c := range th.Comments {
			fmt.Fprintf(&b, "**%s**:\n\n%s\n\n", c.Author, c.Body)
		}
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}
