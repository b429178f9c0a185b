package dashboard_test

import (
	"encoding/json"
	"io"
	"math"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gilf-review/gilf/dashboard"
)

type client struct {
	t    *testing.T
	base string
	c    *http.Client
}

func newClient(t *testing.T, base string) *client {
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &client{t: t, base: base, c: &http.Client{Jar: jar, Timeout: 10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// do sends a request; hdr are header name/value pairs.
func (c *client) do(method, path string, form url.Values, hdr ...string) (*http.Response, string) {
	c.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequestWithContext(c.t.Context(), method, c.base+path, body)
	if err != nil {
		c.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := c.c.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	return resp, string(b)
}

func (c *client) bearer(path string) (int, string) {
	c.t.Helper()
	resp, body := c.do(http.MethodGet, path, nil, "Authorization", "Bearer "+testToken)
	return resp.StatusCode, body
}

var csrfRe = regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`)

func csrfOf(t *testing.T, body string) string {
	t.Helper()
	m := csrfRe.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no csrf field in:\n%s", body)
	}
	return m[1]
}

// login signs c in through the form.
func (c *client) login() {
	c.t.Helper()
	_, body := c.do(http.MethodGet, "/dashboard/login", nil)
	resp, body := c.do(http.MethodPost, "/dashboard/login", url.Values{"csrf": {csrfOf(c.t, body)}, "token": {testToken}})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/dashboard" {
		c.t.Fatalf("login: %d %s\n%s", resp.StatusCode, resp.Header.Get("Location"), body)
	}
}

func TestNewRefusesShortToken(t *testing.T) {
	f := newFixture(t)
	_, err := dashboard.New(dashboard.Config{Token: "short", Reader: f.db, Queue: f.db, Logger: discard()})
	if err == nil {
		t.Fatal("a 5-byte token was accepted")
	}
}

func TestAuth(t *testing.T) {
	f := newFixture(t)
	srv := f.server(t)
	paths := []string{"/dashboard", "/dashboard/", "/dashboard/runs/" + strconv.FormatInt(f.failedRun, 10), "/dashboard/costs",
		"/dashboard/queue", "/dashboard/refusals", "/dashboard/shadow"}
	apis := []string{"/api/v1/runs", "/api/v1/runs/" + strconv.FormatInt(f.failedRun, 10), "/api/v1/costs", "/api/v1/jobs",
		"/api/v1/refusals", "/api/v1/shadow", "/api/v1/nothing"}

	t.Run("no credentials", func(t *testing.T) {
		c := newClient(t, srv.URL)
		for _, p := range append(paths, apis...) {
			resp, body := c.do(http.MethodGet, p, nil)
			if resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("GET %s: %d, want 401", p, resp.StatusCode)
			}
			if strings.Contains(body, "acme/web") {
				t.Errorf("GET %s without credentials shows data", p)
			}
		}
		resp, _ := c.do(http.MethodGet, "/api/v1/runs", nil)
		if !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
			t.Errorf("WWW-Authenticate %q", resp.Header.Get("WWW-Authenticate"))
		}
	})
	t.Run("wrong token", func(t *testing.T) {
		c := newClient(t, srv.URL)
		for _, tok := range []string{"Bearer " + testToken + "x", "Bearer " + testToken[:20], "Basic " + testToken, testToken} {
			for _, p := range []string{"/dashboard", "/api/v1/runs"} {
				if resp, _ := c.do(http.MethodGet, p, nil, "Authorization", tok); resp.StatusCode != http.StatusUnauthorized {
					t.Errorf("GET %s with %q: %d, want 401", p, tok, resp.StatusCode)
				}
			}
		}
	})
	t.Run("bearer", func(t *testing.T) {
		c := newClient(t, srv.URL)
		for _, p := range append(paths, apis[:len(apis)-1]...) {
			if code, body := c.bearer(p); code != http.StatusOK {
				t.Errorf("GET %s: %d\n%s", p, code, body)
			}
		}
		if code, _ := c.bearer("/api/v1/nothing"); code != http.StatusNotFound {
			t.Errorf("unknown API path: %d", code)
		}
		if code, _ := c.bearer("/dashboard/runs/999999"); code != http.StatusNotFound {
			t.Errorf("missing run: %d", code)
		}
		if code, _ := c.bearer("/api/v1/runs/abc"); code != http.StatusNotFound {
			t.Errorf("bad run id: %d", code)
		}
	})
	t.Run("login form sets a cookie", func(t *testing.T) {
		c := newClient(t, srv.URL)
		resp, body := c.do(http.MethodGet, "/dashboard/login", nil)
		if resp.StatusCode != http.StatusOK || !strings.Contains(body, `name="token"`) {
			t.Fatalf("login form: %d\n%s", resp.StatusCode, body)
		}
		token := csrfOf(t, body)
		// Without the form token, and with a wrong one: 403.
		for _, form := range []url.Values{{"token": {testToken}}, {"token": {testToken}, "csrf": {token + "0"}}} {
			if resp, _ := c.do(http.MethodPost, "/dashboard/login", form); resp.StatusCode != http.StatusForbidden {
				t.Errorf("login without the form token: %d", resp.StatusCode)
			}
		}
		// Cross-origin: 403 even with the form token.
		for _, h := range [][]string{{"Sec-Fetch-Site", "cross-site"}, {"Origin", "http://evil.example"}} {
			if resp, _ := c.do(http.MethodPost, "/dashboard/login", url.Values{"token": {testToken}, "csrf": {token}}, h...); resp.StatusCode != http.StatusForbidden {
				t.Errorf("cross-origin login %v: %d", h, resp.StatusCode)
			}
		}
		resp, body = c.do(http.MethodPost, "/dashboard/login", url.Values{"token": {"not-the-token-at-all"}, "csrf": {token}})
		if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(body, "not the dashboard token") {
			t.Fatalf("wrong token: %d\n%s", resp.StatusCode, body)
		}
		for _, ck := range resp.Cookies() {
			if ck.Name == "gilf_session" {
				t.Fatal("a wrong token got a session")
			}
		}
		resp, body = c.do(http.MethodPost, "/dashboard/login", url.Values{"token": {testToken}, "csrf": {csrfOf(t, body)}},
			"Origin", srv.URL, "Sec-Fetch-Site", "same-origin")
		if resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("login: %d\n%s", resp.StatusCode, body)
		}
		var sess *http.Cookie
		for _, ck := range resp.Cookies() {
			if ck.Name == "gilf_session" {
				sess = ck
			}
		}
		if sess == nil || !sess.HttpOnly || sess.SameSite != http.SameSiteStrictMode || sess.Secure || sess.Path != "/" {
			t.Fatalf("session cookie %+v (plain HTTP on loopback: not Secure)", sess)
		}
		for _, p := range append(paths, apis[:len(apis)-1]...) {
			if resp, body := c.do(http.MethodGet, p, nil); resp.StatusCode != http.StatusOK {
				t.Errorf("GET %s with the cookie: %d\n%s", p, resp.StatusCode, body)
			}
		}
		// A tampered cookie is no session.
		bad := newClient(t, srv.URL)
		if resp, _ := bad.do(http.MethodGet, "/dashboard", nil, "Cookie", "gilf_session="+sess.Value+"0"); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("tampered cookie: %d", resp.StatusCode)
		}
		// The session expires.
		f.clock.Advance(dashboard.DefaultSessionTTL)
		if resp, _ := c.do(http.MethodGet, "/dashboard", nil); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("expired session: %d", resp.StatusCode)
		}
	})
	t.Run("logout", func(t *testing.T) {
		c := newClient(t, srv.URL)
		c.login()
		_, body := c.do(http.MethodGet, "/dashboard", nil)
		if resp, _ := c.do(http.MethodPost, "/dashboard/logout", url.Values{}); resp.StatusCode != http.StatusForbidden {
			t.Errorf("logout without csrf: %d", resp.StatusCode)
		}
		resp, _ := c.do(http.MethodPost, "/dashboard/logout", url.Values{"csrf": {csrfOf(t, body)}})
		if resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("logout: %d", resp.StatusCode)
		}
		if resp, _ := c.do(http.MethodGet, "/dashboard", nil); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("after logout: %d", resp.StatusCode)
		}
	})
}

func TestRetry(t *testing.T) {
	f := newFixture(t)
	srv := f.server(t)
	path := "/dashboard/queue/" + strconv.FormatInt(f.deadJob, 10) + "/retry"
	c := newClient(t, srv.URL)
	if resp, _ := c.do(http.MethodPost, path, url.Values{}); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("retry without a session: %d", resp.StatusCode)
	}
	c.login()
	_, page := c.do(http.MethodGet, "/dashboard/queue", nil)
	token := csrfOf(t, page)
	if !strings.Contains(page, `action="`+path+`"`) {
		t.Fatalf("no retry form for the dead job:\n%s", page)
	}
	for name, tc := range map[string]struct {
		form url.Values
		hdr  []string
	}{
		"no csrf":      {url.Values{}, nil},
		"wrong csrf":   {url.Values{"csrf": {strings.Repeat("0", len(token))}}, nil},
		"cross-site":   {url.Values{"csrf": {token}}, []string{"Sec-Fetch-Site", "cross-site"}},
		"cross-origin": {url.Values{"csrf": {token}}, []string{"Origin", "https://evil.example"}},
	} {
		if resp, _ := c.do(http.MethodPost, path, tc.form, tc.hdr...); resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s: %d, want 403", name, resp.StatusCode)
		}
	}
	if st, err := f.db.JobState(t.Context(), f.deadJob); err != nil || st.State != "dead" {
		t.Fatalf("refused retries changed the job: %v %+v", err, st)
	}
	resp, _ := c.do(http.MethodPost, path, url.Values{"csrf": {token}}, "Origin", srv.URL, "Sec-Fetch-Site", "same-origin")
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("retry: %d", resp.StatusCode)
	}
	st, err := f.db.JobState(t.Context(), f.deadJob)
	if err != nil || st.State != "queued" || st.Reruns != 1 || st.Attempts != 0 || st.Reason != dashboard.RerunReason {
		t.Fatalf("retried job: %v %+v", err, st)
	}
	_, page = c.do(http.MethodGet, resp.Header.Get("Location"), nil)
	if !strings.Contains(page, "queued again as a re-run") {
		t.Fatalf("no notice after retry:\n%s", page)
	}
	// A second retry of the now queued job changes nothing.
	resp, _ = c.do(http.MethodPost, path, url.Values{"csrf": {token}})
	if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusSeeOther || !strings.Contains(loc, "unchanged=") {
		t.Fatalf("retry of a queued job: %d %s", resp.StatusCode, loc)
	}
	if resp, _ := c.do(http.MethodPost, "/dashboard/queue/999999/retry", url.Values{"csrf": {token}}); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("retry of a missing job: %d", resp.StatusCode)
	}
	// A bearer request carries no ambient credential: no form token needed.
	resp, _ = c.do(http.MethodPost, path, url.Values{}, "Authorization", "Bearer "+testToken, "Cookie", "")
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("bearer retry: %d", resp.StatusCode)
	}
}

func TestPages(t *testing.T) {
	f := newFixture(t)
	srv := f.server(t)
	c := newClient(t, srv.URL)
	get := func(p string) string {
		t.Helper()
		code, body := c.bearer(p)
		if code != http.StatusOK {
			t.Fatalf("GET %s: %d\n%s", p, code, body)
		}
		if strings.Contains(body, "<script") || strings.Contains(body, "<img src=x") {
			t.Fatalf("GET %s: unescaped untrusted text", p)
		}
		return body
	}
	id := func(n int64) string { return strconv.FormatInt(n, 10) }

	runs := get("/dashboard")
	for _, want := range []string{"acme/web", `href="/dashboard?repo=evil%2ffork"`, "local_not_allowed", `href="/dashboard/runs/` + id(f.failedRun) + `"`,
		"&lt;script&gt;", "unknown"} {
		if !strings.Contains(runs, want) {
			t.Errorf("runs page lacks %q", want)
		}
	}
	body := get("/dashboard?repo=evil%2Ffork")
	if strings.Contains(body, ">acme/web</a>") || !strings.Contains(body, ">evil/fork</a>") {
		t.Errorf("repository filter")
	}
	body = get("/dashboard?outcome=refused")
	if strings.Count(body, `href="/dashboard/runs/`) != 1 {
		t.Errorf("outcome filter: %d runs", strings.Count(body, `href="/dashboard/runs/`))
	}
	body = get("/dashboard?executor=local&limit=2")
	if strings.Count(body, `href="/dashboard/runs/`) != 2 || !strings.Contains(body, `id="older"`) {
		t.Errorf("executor filter with a page of 2")
	}
	next := regexp.MustCompile(`id="older" href="([^"]+)"`).FindStringSubmatch(body)
	body = get(strings.ReplaceAll(next[1], "&amp;", "&"))
	if strings.Count(body, `href="/dashboard/runs/`) != 1 || !strings.Contains(body, `id="runs-table"`) || strings.Contains(body, `id="older"`) {
		t.Errorf("second page:\n%s", body)
	}
	if body := get("/dashboard?from=2030-01-01"); !strings.Contains(body, `id="no-runs"`) {
		t.Errorf("date filter")
	}
	for _, bad := range []string{"/dashboard?outcome=nope", "/dashboard?from=yesterday", "/dashboard?before=-1", "/dashboard/costs?days=0", "/api/v1/jobs?state=nope"} {
		if code, _ := c.bearer(bad); code != http.StatusBadRequest {
			t.Errorf("GET %s: %d, want 400", bad, code)
		}
	}

	run := get("/dashboard/runs/" + id(f.failedRun))
	for _, want := range []string{
		`<a href="/dashboard/evidence?key=review-artifacts%2Facme%252Fweb%2Fabc%2Fevidence%2F1%2Flog.txt" rel="noreferrer noopener">log</a>`,
		`<a class="open-evidence" href="/dashboard/evidence?key=review-artifacts%2Facme%252Fweb%2Fabc%2Fevidence%2F1%2Flog.txt" rel="noreferrer noopener">open</a>`,
		`<code class="key">review-artifacts/acme%2Fweb/abc/evidence/1/junit.xml</code>`,
		"s3: 503 SlowDown", "lint failed: 3 errors", "pnpm run lint", "not run because an earlier step failed",
		"1 of 2 steps agreed", "crabbox", "node 22.11.0", "isolation_tier",
		// The install step's network, and what the verifying cache served it.
		"registry via proxy: 1 host, cache 41/44 hits",
		`<span class="cache">cache: 41 hits, 3 misses, 5.0 MiB served</span>`,
	} {
		if !strings.Contains(run, want) {
			t.Errorf("run page lacks %q", want)
		}
	}
	if strings.Contains(run, "javascript:") {
		t.Errorf("run page links a javascript: URL")
	}
	if strings.Contains(run, `href="review-artifacts`) {
		t.Errorf("a storage key became a link")
	}
	xssPage := get("/dashboard/runs/" + id(f.xssRun))
	if !strings.Contains(xssPage, "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;") {
		t.Errorf("escaped title missing")
	}
	if body := get("/dashboard/runs/" + id(f.refusedRun)); !strings.Contains(body, "runs only the operator") || !strings.Contains(body, "No shadow lane ran") {
		t.Errorf("refused run page")
	}

	costs := get("/dashboard/costs")
	for _, want := range []string{"<svg", "<rect", `class="unknown"`, "managed-e2b", "crabbox", "unknown",
		`<td data-label="Lane">semantic</td>`, "model:gpt-4.1-mini", "1234 in / 567 out"} {
		if !strings.Contains(costs, want) {
			t.Errorf("costs page lacks %q", want)
		}
	}
	queue := get("/dashboard/queue")
	for _, want := range []string{`id="jobs-queued"`, `id="jobs-running"`, `id="jobs-dead"`, `<h2 id="failed">`, `<h2 id="cancelled">`,
		"sandbox api: 503", "worker-1", "2 recorded attempts", `action="/dashboard/queue/` + id(f.queuedJob) + `/cancel"`,
		`action="/dashboard/queue/` + id(f.deadJob) + `/retry"`} {
		if !strings.Contains(queue, want) {
			t.Errorf("queue page lacks %q", want)
		}
	}
	if body := get("/dashboard/refusals"); !strings.Contains(body, "local_not_allowed") {
		t.Errorf("refusals page")
	}
	if body := get("/dashboard/shadow"); !strings.Contains(body, "89%") || !strings.Contains(body, "(8/9)") || !strings.Contains(body, "(17/18)") {
		t.Errorf("shadow page:\n%s", body)
	}
}

func TestAPI(t *testing.T) {
	f := newFixture(t)
	srv := f.server(t)
	c := newClient(t, srv.URL)
	getJSON := func(p string, v any) {
		t.Helper()
		code, body := c.bearer(p)
		if code != http.StatusOK {
			t.Fatalf("GET %s: %d\n%s", p, code, body)
		}
		if err := json.Unmarshal([]byte(body), v); err != nil {
			t.Fatalf("GET %s: %v\n%s", p, err, body)
		}
	}
	var runs struct {
		Runs       []map[string]any `json:"runs"`
		NextBefore *int64           `json:"next_before"`
	}
	getJSON("/api/v1/runs?executor=local", &runs)
	if len(runs.Runs) != 3 || runs.NextBefore != nil {
		t.Fatalf("runs: %+v", runs)
	}
	keys := []string{"id", "job_id", "repo", "pr", "head_sha", "outcome", "reason", "refusal_code", "executor", "isolation_tier",
		"started_at", "finished_at", "duration_ms", "findings", "usd"}
	for _, r := range runs.Runs {
		for _, k := range keys {
			if _, ok := r[k]; !ok {
				t.Errorf("run lacks %q: %v", k, r)
			}
		}
		if len(r) != len(keys) {
			t.Errorf("run has %d fields, want %d: %v", len(r), len(keys), r)
		}
		if r["usd"] != nil {
			t.Errorf("a local run without a price has usd %v, want null", r["usd"])
		}
	}
	if runs.Runs[1]["refusal_code"] != "local_not_allowed" || runs.Runs[0]["refusal_code"] != nil {
		t.Errorf("refusal codes: %v %v", runs.Runs[1]["refusal_code"], runs.Runs[0]["refusal_code"])
	}
	getJSON("/api/v1/runs?limit=3", &runs)
	if len(runs.Runs) != 3 || runs.NextBefore == nil {
		t.Fatalf("paged runs: %d next %v", len(runs.Runs), runs.NextBefore)
	}

	var run struct {
		Run       map[string]any   `json:"run"`
		Record    map[string]any   `json:"record"`
		Artifacts []map[string]any `json:"artifacts"`
		Shadow    map[string]any   `json:"shadow"`
	}
	getJSON("/api/v1/runs/"+strconv.FormatInt(f.failedRun, 10), &run)
	// Every lane's known cost: primary, shadow and the semantic review's model.
	if usd, ok := run.Run["usd"].(float64); !ok || math.Abs(usd-(0.031+0.02+0.0014)) > 1e-9 || run.Record["outcome"] != "failed" || len(run.Record["steps"].([]any)) != 4 {
		t.Errorf("run: %v / %v", run.Run, run.Record["outcome"])
	}
	if len(run.Artifacts) != 3 || run.Artifacts[0]["url"] != "https://evidence.example.com/acme/log.txt" ||
		run.Artifacts[0]["open_url"] != dashboard.EvidencePath(logKey) || run.Artifacts[0]["error"] != nil ||
		run.Artifacts[1]["url"] != nil || run.Artifacts[2]["url"] != nil || run.Artifacts[2]["open_url"] != nil ||
		run.Artifacts[2]["status"] != "failed" || run.Artifacts[2]["error"] != "s3: 503 SlowDown" {
		t.Errorf("artifacts: %v", run.Artifacts)
	}
	if run.Shadow["executor"] != "crabbox" || run.Shadow["steps_agreed"] != 1.0 || run.Shadow["steps_total"] != 2.0 {
		t.Errorf("shadow: %v", run.Shadow)
	}
	getJSON("/api/v1/runs/"+strconv.FormatInt(f.refusedRun, 10), &run)
	if run.Shadow != nil {
		t.Errorf("refused run's shadow: %v", run.Shadow)
	}
	if code, body := c.bearer("/api/v1/runs/999999"); code != http.StatusNotFound || !strings.Contains(body, `"error": "not found"`) {
		t.Errorf("missing run: %d %s", code, body)
	}

	var costs struct {
		Since string           `json:"since"`
		Days  []map[string]any `json:"days"`
	}
	getJSON("/api/v1/costs?days=60", &costs)
	if _, err := time.Parse(time.DateOnly, costs.Since); err != nil || len(costs.Days) == 0 {
		t.Fatalf("costs: %+v", costs)
	}
	sawNull, sawModel := false, false
	for _, d := range costs.Days {
		if d["lane"] == "semantic" {
			sawModel = d["executor"] == "model:gpt-4.1-mini" && d["input_tokens"] == 1234.0 && d["output_tokens"] == 567.0 && d["usd"] == 0.0014
		}
		for _, k := range []string{"day", "executor", "lane", "spans", "priced_spans", "usd", "seconds", "input_tokens", "output_tokens"} {
			if _, ok := d[k]; !ok {
				t.Errorf("cost row lacks %q: %v", k, d)
			}
		}
		if d["priced_spans"] == 0.0 {
			if d["usd"] != nil {
				t.Errorf("unpriced row has usd %v, want null", d["usd"])
			}
			sawNull = true
		}
	}
	if !sawNull {
		t.Errorf("no unpriced cost row: %v", costs.Days)
	}
	if !sawModel {
		t.Errorf("no semantic row with the model's tokens and cost: %v", costs.Days)
	}

	var jobs struct {
		Jobs []map[string]any `json:"jobs"`
	}
	getJSON("/api/v1/jobs", &jobs)
	states := map[string]map[string]any{}
	for _, j := range jobs.Jobs {
		states[j["state"].(string)] = j
	}
	if len(jobs.Jobs) != 5 || states["failed"]["last_error"] != "get pull request: 404 Not Found" ||
		states["cancelled"]["reason"] != "cancelled by an operator" || states["queued"]["reason"] != nil ||
		states["queued"]["lease_owner"] != nil || states["running"]["lease_owner"] != "worker-1" ||
		states["dead"]["attempts"] != 2.0 || states["running"]["lease_expires_at"] == nil || states["queued"]["lease_expires_at"] != nil {
		t.Errorf("jobs: %v", jobs.Jobs)
	}
	getJSON("/api/v1/jobs?state=done", &jobs)
	if len(jobs.Jobs) == 0 || jobs.Jobs[0]["state"] != "done" {
		t.Errorf("done jobs: %v", jobs.Jobs)
	}
	var shadow struct {
		Pairs []map[string]any `json:"pairs"`
	}
	getJSON("/api/v1/shadow", &shadow)
	if len(shadow.Pairs) != 1 || shadow.Pairs[0]["runs"] != 9.0 || shadow.Pairs[0]["outcomes_agreed"] != 8.0 {
		t.Errorf("shadow pairs: %v", shadow.Pairs)
	}
}

// TestTokenGuessesAreLimited: DefaultTokenFailureLimit wrong tokens from
// one address — bearer or login form — and every further try is 429,
// the right token too, until the window turns.
func TestTokenGuessesAreLimited(t *testing.T) {
	f := newFixture(t)
	srv := f.server(t)
	c := newClient(t, srv.URL)
	for i := range dashboard.DefaultTokenFailureLimit - 1 {
		resp, _ := c.do(http.MethodGet, "/api/v1/runs", nil, "Authorization", "Bearer wrong-"+strconv.Itoa(i))
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("wrong bearer %d: %d, want 401", i, resp.StatusCode)
		}
	}
	_, body := c.do(http.MethodGet, "/dashboard/login", nil)
	resp, _ := c.do(http.MethodPost, "/dashboard/login", url.Values{"csrf": {csrfOf(t, body)}, "token": {"wrong-form"}})
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("wrong form token: %d, want 401", resp.StatusCode)
	}
	if code, _ := c.bearer("/api/v1/runs"); code != http.StatusTooManyRequests {
		t.Fatalf("right token after %d wrong ones: %d, want 429", dashboard.DefaultTokenFailureLimit, code)
	}
	resp, _ = c.do(http.MethodGet, "/api/v1/runs", nil, "Authorization", "Bearer "+testToken)
	if ra := resp.Header.Get("Retry-After"); ra != strconv.Itoa(int(dashboard.DefaultTokenFailureWindow.Seconds())) {
		t.Errorf("Retry-After %q", ra)
	}
	// A signed-in browser without a token is not guessing: not limited.
	if resp, _ := c.do(http.MethodGet, "/dashboard/login", nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("login page while limited: %d", resp.StatusCode)
	}
	f.clock.Advance(dashboard.DefaultTokenFailureWindow)
	if code, _ := c.bearer("/api/v1/runs"); code != http.StatusOK {
		t.Fatalf("right token once the window turned: %d, want 200", code)
	}
}
