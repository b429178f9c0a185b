package main

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"log/slog"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gilf-review/gilf/costs"
	"github.com/gilf-review/gilf/executors"
	"github.com/gilf-review/gilf/review"
	"github.com/gilf-review/gilf/validation"
	"github.com/gilf-review/gilf/webhook"
)

// Every label set known at start is on /metrics before anything happened,
// at zero.
func TestMetricsLabelsAtStart(t *testing.T) {
	db := newTestStore(t, nil)
	m := newServeMetrics(db)
	srv := routesServer(t, db, m, http.NotFoundHandler(), nil, 0)
	_, body := httpGet(t, srv.URL, "/metrics")
	for _, l := range missingMetrics(body, []string{
		`gilf_webhook_rejected_total{reason="bad_signature"} 0`,
		`gilf_webhook_rejected_total{reason="unavailable"} 0`,
		`gilf_webhook_duration_seconds_count{code="202"} 0`,
		`gilf_validation_cost_usd_total{executor="managed-e2b",lane="primary"} 0`,
		`gilf_validation_cost_usd_total{executor="self-host",lane="shadow"} 0`,
		`gilf_job_queue_wait_seconds_count 0`,
		`gilf_shadow_runs_total{result="disagreed"} 0`,
		`gilf_shadow_steps_total{result="agreed"} 0`,
		`gilf_refusals_total{code="repo_config_invalid"} 0`,
		`gilf_operator_errors_total{code="executor_unconfigured"} 0`,
		`gilf_runs_total{outcome="error"} 0`,
		`gilf_webhook_deliveries_total{status="duplicate"} 0`,
		`gilf_job_attempts_finished_total{result="lease_lost"} 0`,
		`gilf_job_duration_seconds_count{executor="none",outcome="refused"} 0`,
		`gilf_step_duration_seconds_count{executor="local",step="typecheck"} 0`,
	}) {
		t.Errorf("/metrics at start lacks %s", l)
	}
	if strings.Contains(body, `gilf_operator_errors_total{code="repo_config_invalid"}`) {
		t.Error("an author's refusal is labelled as the operator's")
	}
}

// metricCodes holds every refusal code validation/refusal.go declares.
func TestMetricCodesAreEveryCode(t *testing.T) {
	path := filepath.Join("..", "..", "validation", "refusal.go")
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var declared []string
	ast.Inspect(f, func(n ast.Node) bool {
		vs, ok := n.(*ast.ValueSpec)
		if !ok || vs.Type == nil {
			return true
		}
		if id, ok := vs.Type.(*ast.Ident); ok && id.Name == "Code" {
			for _, v := range vs.Values {
				if lit, ok := v.(*ast.BasicLit); ok {
					s, _ := strconv.Unquote(lit.Value)
					declared = append(declared, s)
				}
			}
		}
		return true
	})
	if len(declared) < 20 {
		t.Fatalf("found %d codes in %s; the parse missed them", len(declared), path)
	}
	for _, c := range declared {
		if !slices.Contains(metricCodes(), validation.Code(c)) {
			t.Errorf("refusal code %q is not in metricCodes", c)
		}
	}
}

// Intake's refusals and answer times, a recorded run's cost and shadow
// comparison, and a first claim's wait reach /metrics.
func TestMetricsCountWhatHappened(t *testing.T) {
	c := &clock{now: time.Now().UTC()}
	db := newTestStore(t, c)
	m := newServeMetrics(db)
	log := slog.New(slog.DiscardHandler)
	in := newWakingInbox(db, m)
	hook := testHook(t, in, webhook.Config{Rejected: m.more.reject})
	srv := routesServer(t, db, m, m.more.timeWebhook(hook, time.Now), nil, 0)
	ping := []byte(`{"zen":"hi","hook_id":1}`)
	post := func(sig string) int {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/webhook", bytes.NewReader(ping))
		req.Header.Set("X-GitHub-Event", "ping")
		req.Header.Set("X-GitHub-Delivery", newGUID(t))
		req.Header.Set("X-Hub-Signature-256", sig)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := post("sha256=00"); code != http.StatusUnauthorized {
		t.Fatalf("bad signature: %d", code)
	}
	if code := post(signature(serveSecret, ping)); code != http.StatusOK {
		t.Fatalf("ping: %d", code)
	}

	q := newStoreQueue(db, log, m)
	q.now = func() time.Time { return c.now.Add(1500 * time.Millisecond) }
	queuePR(t, in, 4, c.now)
	cl, ok, err := q.Claim(t.Context(), "w/0", time.Minute)
	if err != nil || !ok {
		t.Fatalf("claim: %v %v", ok, err)
	}
	usd, shadowUSD := 0.25, 0.125
	res := review.Result{
		Record: validation.Record{Outcome: validation.OutcomeFailed, Executor: executors.NameManagedE2B},
		Spans: []costs.Span{{Lane: costs.LanePrimary, Executor: executors.NameManagedE2B, USD: &usd},
			{Lane: costs.LaneShadow, Executor: executors.NameSelfHost, USD: &shadowUSD},
			{Lane: costs.LaneShadow, Executor: executors.NameSelfHost}},
		Shadow: &review.ShadowReport{Executor: executors.NameSelfHost, Status: string(executors.ShadowOK),
			Data: executors.Telemetry{Status: executors.ShadowOK, Steps: []executors.StepAgreement{
				{Name: "install", Primary: validation.StatusPassed, Shadow: validation.StatusPassed, Agree: true},
				{Name: "test", Primary: validation.StatusFailed, Shadow: validation.StatusPassed}}}},
	}
	if err := q.Complete(t.Context(), cl, res); err != nil {
		t.Fatal(err)
	}
	_, body := httpGet(t, srv.URL, "/metrics")
	for _, l := range missingMetrics(body, []string{
		`gilf_webhook_rejected_total{reason="bad_signature"} 1`,
		`gilf_webhook_duration_seconds_count{code="401"} 1`,
		`gilf_webhook_duration_seconds_count{code="200"} 1`,
		`gilf_validation_cost_usd_total{executor="managed-e2b",lane="primary"} 0.25`,
		`gilf_validation_cost_usd_total{executor="self-host",lane="shadow"} 0.125`,
		`gilf_job_queue_wait_seconds_count 1`,
		`gilf_job_queue_wait_seconds_bucket{le="1.6"} 1`,
		`gilf_job_queue_wait_seconds_bucket{le="0.8"} 0`,
		`gilf_shadow_runs_total{result="disagreed"} 1`,
		`gilf_shadow_steps_total{result="agreed"} 1`,
		`gilf_shadow_steps_total{result="disagreed"} 1`,
	}) {
		t.Errorf("/metrics lacks %s", l)
	}
}
