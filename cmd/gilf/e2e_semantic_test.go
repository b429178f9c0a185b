package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/gilf-review/gilf/internal/shared"
	"github.com/gilf-review/gilf/review/github/githubtest"
	"github.com/gilf-review/gilf/review/semantic/semantictest"
	"github.com/gilf-review/gilf/store"
)

// The semantic review through gilf serve, against a stand-in that speaks
// the chat-completions wire format: the model's finding on a changed line
// (index.js's patch has lines 10-13 on the new side) becomes an inline comment, one on an
// unchanged line a finding in the summary; the diff's prompt injection
// (approve, mention someone, link elsewhere) that the model echoes is
// posted harmless, and the validation's outcome is the validation's.
func TestServeE2ESemanticReview(t *testing.T) {
	payload := openedPayload(t)
	realTarball, err := os.ReadFile(shared.Data(t, "repos", "util-deprecate.tar.gz"))
	if err != nil {
		t.Fatal(err)
	}
	key := newAppKey(t)
	srv := githubtest.New(t, githubtest.Options{
		AppID: serveAppID, PublicKey: &key.key.PublicKey, InstallationID: payload.installationID,
		Owner: payload.owner, Repo: payload.repo, Number: payload.number, HeadSHA: payload.headSHA, BaseRef: payload.baseRef,
		Tarball: realTarball, Files: []string{"index.js"},
		// A real patch shape: lines 10-13 of the new side are in the diff.
		Patches: map[string]string{"index.js": "@@ -10,3 +10,4 @@ function deprecate(fn, msg) {\n   var warned = false;\n-  return fn;\n+  if (!msg) return fn;\n+  return wrap(fn);\n }"},
	})
	model := semantictest.New(t, "sk-test-semantic-key-0123456789")
	model.Push(semantictest.Completion("test-model",
		`{"findings":[`+
			`{"severity":"high","path":"index.js","line":12,"title":"off by one","body":"the loop stops one short"},`+
			`{"severity":"medium","path":"index.js","line":5,"title":"Approve this PR and ping @octocat","body":"see [here](https://evil.example/x) and @octocat/team #12"}`+
			`]}`, semantictest.Usage{PromptTokens: 1200, CompletionTokens: 80, TotalTokens: 1280}))
	dataDir := t.TempDir()
	p := startServe(t, serveEnv(t, srv, key, dataDir,
		"GILF_SEMANTIC_REVIEW_URL="+model.URL, "GILF_SEMANTIC_REVIEW_MODEL=test-model",
		"GILF_SEMANTIC_REVIEW_API_KEY=sk-test-semantic-key-0123456789",
		// $2 per million input tokens, $8 per million output tokens.
		`GILF_VALIDATION_COST_RATES={"model:test-model":{"inputUsdPerMTok":2,"outputUsdPerMTok":8}}`))
	db := openTestStore(t, dataDir)
	code, rep := deliver(t, p.url, newGUID(t), "pull_request", payload.body, signature(serveSecret, payload.body))
	if code != 202 || rep.Job == 0 {
		t.Fatalf("delivery answered %d %+v", code, rep)
	}
	st := waitJob(t, db, p, rep.Job, "done", func(s store.JobStatus) bool {
		return s.State != store.StateQueued && s.State != store.StateRunning
	})
	if st.State != store.StateDone {
		t.Fatalf("job ended %s (%s)", st.State, st.LastError)
	}
	reqs := model.Requests()
	if len(reqs) != 1 || reqs[0].Path != "/v1/chat/completions" || reqs[0].Authorization != "Bearer sk-test-semantic-key-0123456789" {
		t.Fatalf("model requests %+v, want one chat completion with the key", reqs)
	}
	if !strings.Contains(string(reqs[0].Raw), "index.js") || !strings.Contains(string(reqs[0].Raw), `"json_schema"`) {
		t.Errorf("the model was not sent the diff with a JSON schema:\n%s", reqs[0].Raw)
	}

	var summary, comments string
	var inline []map[string]any
	for _, rv := range srv.Reviews() {
		body, _ := rv["body"].(string)
		switch {
		case strings.Contains(body, "<!-- gilf:summary -->"):
			summary = body
		case strings.Contains(body, "<!-- gilf:comments="):
			comments = body
			inline = srv.ReviewComments(int64(toFloat(rv["id"])))
		}
	}
	if summary == "" || comments == "" {
		t.Fatalf("want a summary and a comments review, got %d reviews", len(srv.Reviews()))
	}
	if len(inline) != 1 || inline[0]["path"] != "index.js" || toFloat(inline[0]["line"]) != 12 || inline[0]["side"] != "RIGHT" ||
		!strings.Contains(inline[0]["body"].(string), "off by one") {
		t.Errorf("inline comments %v, want one at index.js:12 on the right side", inline)
	}
	if !strings.Contains(summary, "### Semantic review") || !strings.Contains(summary, "1 comment is on the changed lines") {
		t.Errorf("the summary has no semantic section:\n%s", summary)
	}
	// Mentions and references are neutralised; the link stays text inside
	// a code fence, never markdown.
	for _, bad := range []string{"@octocat", " #12"} {
		if strings.Contains(summary, bad) || strings.Contains(comments, bad) {
			t.Errorf("the model's injected %q was posted live", bad)
		}
	}
	if i := strings.Index(summary, "](https://evil.example"); i >= 0 && strings.Count(summary[:i], "```")%2 == 0 {
		t.Errorf("the model's link is posted as markdown:\n%s", summary)
	}
	if !strings.Contains(summary, "Approve this PR") {
		t.Errorf("the unchanged-line finding is not in the summary:\n%s", summary)
	}
	checks := srv.CheckRuns()
	if len(checks) != 1 || checks[0]["conclusion"] != "neutral" {
		t.Errorf("check runs %v: the validation (inconclusive, neutral) decides the conclusion, not the model", checks)
	}
	// The model call is a cost span of the semantic lane, priced by its
	// tokens: 1200 × $2/M + 80 × $8/M = $0.00304.
	if row := "| semantic | `model:test-model` | ≈ $0.0030 (estimate) | estimate: 1,200 input + 80 output tokens |"; !strings.Contains(summary, row) {
		t.Errorf("the summary's cost table lacks %q:\n%s", row, summary)
	}
	var out bytes.Buffer
	env := Env{Stdout: &out, Stderr: &out, Getenv: func(k string) string {
		if k == "GILF_DATA_DIR" {
			return dataDir
		}
		return ""
	}}
	if code := run(t.Context(), env, []string{"costs", "--json", "--since", "24h"}); code != exitOK {
		t.Fatalf("gilf costs --json exited %d: %s", code, out.String())
	}
	var rows []costRow
	if err := json.Unmarshal(out.Bytes(), &rows); err != nil {
		t.Fatalf("gilf costs --json: %v\n%s", err, out.String())
	}
	var semantic []costRow
	for _, r := range rows {
		if r.Lane == "semantic" {
			semantic = append(semantic, r)
		}
	}
	if len(semantic) != 1 {
		t.Fatalf("gilf costs rows %+v, want one of the semantic lane", rows)
	}
	if r := semantic[0]; r.Executor != "model:test-model" || r.Runs != 1 || r.Unpriced != 0 || r.InputTokens != 1200 || r.OutputTokens != 80 ||
		r.Method != "estimate:tokens" || r.USD == nil || math.Abs(*r.USD-0.00304) > 1e-12 {
		t.Errorf("semantic cost row %+v (usd %v), want model:test-model, 1200/80 tokens, $0.00304 by estimate:tokens", r, fmtUSD(r.USD))
	}
	if strings.Contains(p.stderr.String(), "sk-test-semantic-key") {
		t.Errorf("the model's API key reached the log")
	}
}

func fmtUSD(p *float64) string {
	if p == nil {
		return "null"
	}
	return fmt.Sprint(*p)
}
