package dashboard_test

import (
	"encoding/csv"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/gilf-review/gilf/dashboard"
)

// A job's page — the check run's details_url — shows any job: its state,
// every attempt with its own error, its runs, and the move its state
// allows.
func TestJobPage(t *testing.T) {
	f := newFixture(t)
	srv := f.server(t)
	c := newClient(t, srv.URL)
	run, err := f.db.RunView(t.Context(), f.failedRun)
	if err != nil {
		t.Fatal(err)
	}
	id := func(n int64) string { return strconv.FormatInt(n, 10) }
	for job, wants := range map[int64][]string{
		run.JobID: {`id="latest-run" href="/dashboard/runs/` + id(f.failedRun) + `"`, `class="badge s-done"`, `/retry"`,
			// The latest run's install step: its network and the cache.
			`<dt>install step's network</dt><dd>registry via proxy: 1 host, cache 41/44 hits<br><span class="cache">cache: 41 hits, 3 misses, 5.0 MiB served</span></dd>`},
		f.deadJob: {`id="job-attempts"`, "sandbox api: 503 Service Unavailable (attempt 2 of 2)", ">retried<", ">dead<",
			"worker-1", `id="no-job-runs"`, `action="/dashboard/queue/` + id(f.deadJob) + `/retry"`, `name="back" value="job"`},
		f.failedJob:  {"get pull request: 404 Not Found", `class="badge s-failed"`, `/retry"`},
		f.queuedJob:  {`class="badge s-queued"`, "the job is queued", `action="/dashboard/queue/` + id(f.queuedJob) + `/cancel"`, "No attempt recorded"},
		f.runningJob: {"Held by", "worker-1", `/cancel"`, `class="badge s-running">running<`},
	} {
		code, body := c.bearer(dashboard.JobPath(job))
		if code != http.StatusOK {
			t.Fatalf("GET job %d: %d", job, code)
		}
		for _, w := range wants {
			if !strings.Contains(body, w) {
				t.Errorf("job %d page lacks %q", job, w)
			}
		}
	}
	if code, _ := c.bearer(dashboard.JobPath(999999)); code != http.StatusNotFound {
		t.Errorf("no such job: %d, want 404", code)
	}
	if resp, _ := c.do(http.MethodGet, dashboard.JobPath(run.JobID), nil); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a job page without the token answered %d, want 401", resp.StatusCode)
	}
	var j struct {
		Job struct {
			State   string           `json:"state"`
			History []map[string]any `json:"attempt_history"`
		} `json:"job"`
		Runs []int64 `json:"run_ids"`
	}
	code, body := c.bearer("/api/v1/jobs/" + id(f.deadJob))
	if err := json.Unmarshal([]byte(body), &j); code != http.StatusOK || err != nil {
		t.Fatalf("GET /api/v1/jobs/N: %d %v", code, err)
	}
	if j.Job.State != "dead" || len(j.Job.History) != 2 || j.Job.History[1]["error"] != "sandbox api: 503 Service Unavailable" ||
		j.Job.History[0]["result"] != "dead" || len(j.Runs) != 0 {
		t.Errorf("job JSON: %s", body)
	}
}

// Cancel from the queue page: CSRF as for retry, the job ends cancelled,
// a second cancel says what the job is.
func TestCancel(t *testing.T) {
	f := newFixture(t)
	srv := f.server(t)
	c := newClient(t, srv.URL)
	path := "/dashboard/queue/" + strconv.FormatInt(f.runningJob, 10) + "/cancel"
	c.login()
	_, page := c.do(http.MethodGet, dashboard.JobPath(f.runningJob), nil)
	token := csrfOf(t, page)
	if resp, _ := c.do(http.MethodPost, path, url.Values{}); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("cancel without the form token: %d, want 403", resp.StatusCode)
	}
	if resp, _ := c.do(http.MethodPost, path, url.Values{"csrf": {token}}, "Sec-Fetch-Site", "cross-site"); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("cross-site cancel: %d, want 403", resp.StatusCode)
	}
	resp, _ := c.do(http.MethodPost, path, url.Values{"csrf": {token}, "back": {"job"}})
	loc := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(loc, dashboard.JobPath(f.runningJob)+"?cancelled=") {
		t.Fatalf("cancel: %d %s", resp.StatusCode, loc)
	}
	st, err := f.db.JobState(t.Context(), f.runningJob)
	if err != nil || st.State != "cancelled" || st.Reason != dashboard.CancelReason || st.LeaseOwner != "" {
		t.Fatalf("cancelled job: %v %+v", err, st)
	}
	_, page = c.do(http.MethodGet, loc, nil)
	if !strings.Contains(page, `id="job-message"`) || !strings.Contains(page, dashboard.CancelReason) || !strings.Contains(page, ">cancelled<") {
		t.Errorf("job page after cancel:\n%s", page)
	}
	resp, _ = c.do(http.MethodPost, path, url.Values{"csrf": {token}})
	if loc := resp.Header.Get("Location"); !strings.HasPrefix(loc, "/dashboard/queue?") || !strings.Contains(loc, "kept=") {
		t.Errorf("second cancel: %d %s", resp.StatusCode, loc)
	}
	if resp, _ := c.do(http.MethodPost, "/dashboard/queue/999999/cancel", url.Values{"csrf": {token}}); resp.StatusCode != http.StatusNotFound {
		t.Errorf("cancel of no job: %d, want 404", resp.StatusCode)
	}
}

// The queue page lists the states asked for, each job with its attempts.
func TestQueueStates(t *testing.T) {
	f := newFixture(t)
	srv := f.server(t)
	c := newClient(t, srv.URL)
	code, body := c.bearer("/dashboard/queue?state=failed&state=dead")
	if code != http.StatusOK {
		t.Fatal(code)
	}
	for _, w := range []string{`id="jobs-failed"`, `id="jobs-dead"`, `value="failed" checked`, "get pull request: 404 Not Found"} {
		if !strings.Contains(body, w) {
			t.Errorf("queue lacks %q", w)
		}
	}
	for _, no := range []string{`id="jobs-queued"`, `<h2 id="running">`, `value="queued" checked`} {
		if strings.Contains(body, no) {
			t.Errorf("queue has %q", no)
		}
	}
	if code, body := c.bearer("/dashboard/queue?state=done,superseded"); code != http.StatusOK || !strings.Contains(body, `id="jobs-done"`) || !strings.Contains(body, "No superseded jobs.") {
		t.Errorf("done, superseded: %d", code)
	}
	if code, _ := c.bearer("/dashboard/queue?state=lost"); code != http.StatusBadRequest {
		t.Errorf("unknown state: %d, want 400", code)
	}
}

// Evidence opens through the dashboard, behind its token, as text that
// runs nothing.
func TestEvidence(t *testing.T) {
	f := newFixture(t)
	srv := f.server(t)
	c := newClient(t, srv.URL)
	resp, body := c.do(http.MethodGet, dashboard.EvidencePath(logKey), nil, "Authorization", "Bearer "+testToken)
	if resp.StatusCode != http.StatusOK || body != logBody {
		t.Fatalf("evidence: %d %q", resp.StatusCode, body)
	}
	h := resp.Header
	if h.Get("Content-Type") != "text/plain; charset=utf-8" || !strings.HasPrefix(h.Get("Content-Security-Policy"), "sandbox") ||
		h.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("evidence headers: %v", h)
	}
	if resp, _ := c.do(http.MethodGet, dashboard.EvidencePath(logKey), nil); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("evidence without the token: %d, want 401", resp.StatusCode)
	}
	for path, want := range map[string]int{
		dashboard.EvidencePath("review-artifacts/acme%2Fweb/abc/evidence/1/none.txt"): http.StatusNotFound,
		dashboard.EvidencePath("../../etc/passwd"):                                    http.StatusBadRequest,
		"/dashboard/evidence": http.StatusBadRequest,
		dashboard.EvidencePath(strings.Repeat("a", dashboard.MaxEvidenceKey+1)): http.StatusBadRequest,
	} {
		if code, body := c.bearer(path); code != want || strings.Contains(body, "root:") {
			t.Errorf("GET %s: %d, want %d", path, code, want)
		}
	}
}

// Costs grouped by repository: the API's rows, the CSV download and the
// page's chart and table.
func TestCostsByRepository(t *testing.T) {
	f := newFixture(t)
	srv := f.server(t)
	c := newClient(t, srv.URL)
	var api struct {
		Group string           `json:"group"`
		Days  []map[string]any `json:"days"`
	}
	code, body := c.bearer("/api/v1/costs?group=repository")
	if err := json.Unmarshal([]byte(body), &api); code != http.StatusOK || err != nil {
		t.Fatalf("api: %d %v", code, err)
	}
	web := 0.0
	for _, d := range api.Days {
		if d["repository"] == nil || d["day"] == nil || d["executor"] == nil || d["lane"] == nil {
			t.Errorf("row without its keys: %v", d)
		}
		if d["repository"] == "acme/web" && d["usd"] != nil {
			web += d["usd"].(float64)
		}
	}
	// Eight runs of acme/web at 0.012·(day+1), the failed run's three lanes.
	if want := 2*0.012*(1+2+3+4) + 0.031 + 0.02 + 0.0014; api.Group != "repository" || web < want-1e-9 || web > want+1e-9 {
		t.Errorf("acme/web: %v, want %v (%s)", web, want, body)
	}
	code, body = c.bearer("/api/v1/costs")
	if code != http.StatusOK || strings.Contains(body, `"repository"`) {
		t.Errorf("by day carries repositories: %s", body)
	}
	if code, _ := c.bearer("/api/v1/costs?group=week"); code != http.StatusBadRequest {
		t.Errorf("group=week: %d, want 400", code)
	}

	resp, csvBody := c.do(http.MethodGet, "/dashboard/costs.csv?group=repository&days=30", nil, "Authorization", "Bearer "+testToken)
	recs, err := csv.NewReader(strings.NewReader(csvBody)).ReadAll()
	if resp.StatusCode != http.StatusOK || err != nil || len(recs) != len(api.Days)+1 || recs[0][1] != "repository" {
		t.Fatalf("csv: %d %v %q", resp.StatusCode, err, recs)
	}
	if ct, cd := resp.Header.Get("Content-Type"), resp.Header.Get("Content-Disposition"); ct != "text/csv; charset=utf-8" ||
		!strings.Contains(cd, `attachment; filename="gilf-costs-by-repository-`) {
		t.Errorf("csv headers: %q %q", ct, cd)
	}
	if resp, _ := c.do(http.MethodGet, "/dashboard/costs.csv", nil); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("csv without the token: %d", resp.StatusCode)
	}

	code, page := c.bearer("/dashboard/costs")
	for _, w := range []string{`id="repo-chart"`, `id="repo-totals"`, `href="/dashboard/costs.csv?days=30&amp;group=repository"`,
		">acme/web</text>", ">acme/api</text>", "no estimate"} {
		if !strings.Contains(page, w) {
			t.Errorf("costs page lacks %q", w)
		}
	}
	// The most expensive repository comes first.
	if i, j := strings.Index(page, ">acme/web</text>"), strings.Index(page, ">acme/api</text>"); code != http.StatusOK || i < 0 || j < 0 || i > j {
		t.Errorf("chart order: acme/web at %d, acme/api at %d", i, j)
	}
}
