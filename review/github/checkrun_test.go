package github

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gilf-review/gilf/review/github/githubtest"
)

const (
	repoPath = "/repos/octocat/Hello-World"
	prPath   = repoPath + "/pulls/1347"
)

// sequence lists "METHOD /path" of every request since from, without
// the token mints.
func sequence(e *env, from int) []string {
	var out []string
	for _, r := range e.srv.Requests()[from:] {
		if r.Endpoint != githubtest.CreateToken {
			out = append(out, r.Method+" "+r.Path)
		}
	}
	return out
}

func annotations(n int) []Annotation {
	out := make([]Annotation, n)
	for i := range out {
		out[i] = Annotation{Path: fmt.Sprintf("src/f%03d.js", i), StartLine: i + 1, EndLine: i + 1, StartColumn: 2, EndColumn: 5,
			Level: AnnotationWarning, Title: "lint", Message: fmt.Sprintf("finding %d", i)}
	}
	return out
}

// checkAnnotations asserts the run holds exactly n annotations, each
// once, in order.
func checkAnnotations(t *testing.T, e *env, id int64, n int) {
	t.Helper()
	got := e.srv.Annotations(id)
	if len(got) != n {
		t.Fatalf("check run %d has %d annotations, want %d", id, len(got), n)
	}
	for i, a := range got {
		if a["path"] != fmt.Sprintf("src/f%03d.js", i) || a["message"] != fmt.Sprintf("finding %d", i) {
			t.Fatalf("annotation %d = %v: out of order or duplicated", i, a)
		}
	}
	cr, _ := e.srv.CheckRun(id)
	if c := cr["output"].(map[string]any)["annotations_count"]; c != n {
		t.Errorf("annotations_count = %v, want %d", c, n)
	}
}

func patches(e *env, from int) []githubtest.Request {
	var out []githubtest.Request
	for _, r := range e.srv.Requests()[from:] {
		if r.Endpoint == githubtest.UpdateCheckRun {
			out = append(out, r)
		}
	}
	return out
}

func batchSizes(reqs []githubtest.Request) []int {
	var out []int
	for _, r := range reqs {
		a, _ := r.Body["output"].(map[string]any)["annotations"].([]any)
		out = append(out, len(a))
	}
	return out
}

// TestCheckRunLifecycle: queued → in_progress → progress → completed, and
// nothing un-completes it.
func TestCheckRunLifecycle(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, githubtest.Options{}, nil)
	started := e.clock.Now().Add(-time.Minute).UTC()
	id, err := e.c.StartCheckRun(ctx, e.repo, CheckStart{JobID: "42", HeadSHA: headSHA, Status: StatusQueued, Title: "gilf: queued", Summary: "waiting for a worker"})
	if err != nil || id == 0 {
		t.Fatalf("StartCheckRun queued: %d, %v", id, err)
	}
	n := len(e.srv.Requests())
	again, err := e.c.StartCheckRun(ctx, e.repo, CheckStart{JobID: "42", HeadSHA: headSHA, Status: StatusInProgress, StartedAt: started, DetailsURL: "https://gilf.example/jobs/42"})
	if err != nil || again != id {
		t.Fatalf("StartCheckRun in_progress: %d, %v; want %d", again, err, id)
	}
	if err := e.c.UpdateCheckRun(ctx, e.repo, id, CheckUpdate{Title: "gilf: running", Summary: "step install passed", Text: "log tail"}); err != nil {
		t.Fatalf("UpdateCheckRun: %v", err)
	}
	cr, _ := e.srv.CheckRun(id)
	if cr["status"] != "in_progress" || cr["started_at"] != started.Format(time.RFC3339) || cr["details_url"] != "https://gilf.example/jobs/42" ||
		cr["output"].(map[string]any)["summary"] != "step install passed" {
		t.Errorf("check run while running = %v", cr)
	}
	p := pub("42")
	p.Text, p.DetailsURL = "full log", "https://gilf.example/jobs/42/result"
	posted, err := e.c.Publish(ctx, e.repo, 1347, p)
	if err != nil {
		t.Fatalf("Publish: %v", err)
	}
	if posted.CheckRunID != id || posted.CheckRunFound || posted.CheckRunCreated {
		t.Errorf("Posted = %+v", posted)
	}
	// Neither a late start nor a late progress update un-completes it.
	if got, err := e.c.StartCheckRun(ctx, e.repo, CheckStart{JobID: "42", HeadSHA: headSHA, Status: StatusInProgress}); err != nil || got != id {
		t.Errorf("StartCheckRun after completion: %d, %v", got, err)
	}
	if err := e.c.UpdateCheckRun(ctx, e.repo, id, CheckUpdate{Status: StatusInProgress, Summary: "late"}); err != nil {
		t.Errorf("UpdateCheckRun after completion: %v", err)
	}
	cr, _ = e.srv.CheckRun(id)
	want := map[string]any{"title": "1 step failed", "summary": "test failed", "text": "full log", "annotations_count": 0,
		"annotations_url": fmt.Sprintf("https://api.github.com/repos/octocat/Hello-World/check-runs/%d/annotations", id)}
	if diff := cmp.Diff(want, cr["output"]); diff != "" {
		t.Errorf("output (-want +got):\n%s", diff)
	}
	if cr["status"] != "completed" || cr["conclusion"] != "failure" || cr["completed_at"] == nil || cr["details_url"] != p.DetailsURL {
		t.Errorf("completed check run = %v", cr)
	}
	if c := e.srv.Completions(id); c != 1 {
		t.Errorf("completed %d times", c)
	}
	list := "GET " + repoPath + "/commits/" + headSHA + "/check-runs"
	run := fmt.Sprintf("%s/check-runs/%d", repoPath, id)
	if diff := cmp.Diff([]string{
		list, "POST " + repoPath + "/check-runs", // queued
		list, "PATCH " + run, // in_progress
		"GET " + run, "PATCH " + run, // progress
		"GET " + prPath, "GET " + prPath + "/reviews", "POST " + prPath + "/reviews", // summary
		list, "GET " + run, "PATCH " + run, // completed
		list,         // a late start: found completed
		"GET " + run, // a late update: found completed
	}, sequence(e, 0)); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
	reqs := e.srv.Requests()[n:]
	var bodies []map[string]any
	for _, r := range reqs {
		if r.Endpoint == githubtest.UpdateCheckRun {
			bodies = append(bodies, r.Body)
		}
	}
	if diff := cmp.Diff(map[string]any{"status": "in_progress", "started_at": started.Format(time.RFC3339), "details_url": "https://gilf.example/jobs/42"}, bodies[0]); diff != "" {
		t.Errorf("start PATCH (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]any{"output": map[string]any{"title": "gilf: running", "summary": "step install passed", "text": "log tail"}}, bodies[1]); diff != "" {
		t.Errorf("progress PATCH (-want +got):\n%s", diff)
	}
	last := bodies[2]
	if last["status"] != "completed" || last["conclusion"] != "failure" || last["completed_at"] == nil || last["details_url"] != p.DetailsURL {
		t.Errorf("completing PATCH = %v", last)
	}
}

func TestStartCheckRunValidation(t *testing.T) {
	e := newEnv(t, githubtest.Options{}, nil)
	for _, s := range []CheckStart{
		{JobID: "1", HeadSHA: headSHA, Status: StatusCompleted},
		{JobID: "1 -->", HeadSHA: headSHA, Status: StatusQueued},
		{JobID: "1", Status: StatusQueued},
	} {
		if _, err := e.c.StartCheckRun(context.Background(), e.repo, s); !errors.Is(err, ErrInvalidInput) {
			t.Errorf("StartCheckRun(%+v) = %v, want ErrInvalidInput", s, err)
		}
	}
	if err := e.c.UpdateCheckRun(context.Background(), e.repo, 5, CheckUpdate{Status: StatusCompleted}); !errors.Is(err, ErrInvalidInput) {
		t.Errorf("UpdateCheckRun to completed = %v, want ErrInvalidInput", err)
	}
	if n := len(e.srv.Requests()); n != 0 {
		t.Errorf("%d requests for invalid input", n)
	}
}

// TestAnnotationBatches: 120 annotations go in PATCHes of 50, 50 and 20;
// every one carries title and summary, only the last completes.
func TestAnnotationBatches(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, githubtest.Options{}, nil)
	id, err := e.c.StartCheckRun(ctx, e.repo, CheckStart{JobID: "7", HeadSHA: headSHA, Status: StatusInProgress})
	if err != nil {
		t.Fatal(err)
	}
	n := len(e.srv.Requests())
	p := pub("7")
	p.Annotations = annotations(120)
	posted, err := e.c.Publish(ctx, e.repo, 1347, p)
	if err != nil {
		t.Fatalf("Publish: %v", err)
	}
	if posted.AnnotationsSent != 120 {
		t.Errorf("AnnotationsSent = %d", posted.AnnotationsSent)
	}
	ps := patches(e, n)
	if diff := cmp.Diff([]int{50, 50, 20}, batchSizes(ps)); diff != "" {
		t.Errorf("batch sizes (-want +got):\n%s", diff)
	}
	for i, r := range ps {
		out := r.Body["output"].(map[string]any)
		if out["title"] != "1 step failed" || out["summary"] != "test failed" {
			t.Errorf("PATCH %d output = %v", i, out)
		}
		_, completes := r.Body["status"]
		_, concl := r.Body["conclusion"]
		if completes != (i == 2) || concl != (i == 2) {
			t.Errorf("PATCH %d: status %v, conclusion %v", i, r.Body["status"], r.Body["conclusion"])
		}
	}
	a := ps[0].Body["output"].(map[string]any)["annotations"].([]any)[0]
	want := map[string]any{"path": "src/f000.js", "start_line": float64(1), "end_line": float64(1), "start_column": float64(2), "end_column": float64(5),
		"annotation_level": "warning", "title": "lint", "message": "finding 0"}
	if diff := cmp.Diff(want, a); diff != "" {
		t.Errorf("annotation wire format (-want +got):\n%s", diff)
	}
	checkAnnotations(t, e, id, 120)
	if c := e.srv.Completions(id); c != 1 {
		t.Errorf("completed %d times", c)
	}
}

// TestAnnotationBatchFault: the second batch fails; nothing is sent
// twice and the run completes once.
func TestAnnotationBatchFault(t *testing.T) {
	tests := []struct {
		name  string
		fault githubtest.Fault
		// fails: the first Publish gives up and a second one finishes.
		fails bool
	}{
		{name: "answer lost, the retry reads the count", fault: githubtest.Fault{Kind: githubtest.LandThenStatus, Status: 502, Skip: 1}},
		{name: "not landed, retried", fault: githubtest.Fault{Kind: githubtest.Status, Status: 502, Skip: 1, Times: 2}},
		{name: "gave up, Publish retried", fault: githubtest.Fault{Kind: githubtest.Status, Status: 502, Skip: 1, Times: DefaultRetryAttempts}, fails: true},
		// Every answer from the second batch on is lost: each lands, and
		// each retry reads how far it got, so one Publish finishes.
		{name: "every answer lost", fault: githubtest.Fault{Kind: githubtest.LandThenStatus, Status: 502, Skip: 1, Times: DefaultRetryAttempts}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			e := newEnv(t, githubtest.Options{}, nil)
			id, err := e.c.StartCheckRun(ctx, e.repo, CheckStart{JobID: "8", HeadSHA: headSHA, Status: StatusInProgress})
			if err != nil {
				t.Fatal(err)
			}
			e.srv.Fail(githubtest.UpdateCheckRun, tc.fault)
			p := pub("8")
			p.Annotations = annotations(120)
			_, err = e.c.Publish(ctx, e.repo, 1347, p)
			if tc.fails {
				var te *TransientError
				if !errors.As(err, &te) {
					t.Fatalf("first Publish = %v, want a *TransientError", err)
				}
				posted, err := e.c.Publish(ctx, e.repo, 1347, p)
				if err != nil {
					t.Fatalf("second Publish: %v", err)
				}
				if !posted.ReviewFound || posted.CheckRunFound || posted.AnnotationsSent != 70 {
					t.Errorf("second Publish = %+v", posted)
				}
			} else if err != nil {
				t.Fatalf("Publish: %v", err)
			}
			checkAnnotations(t, e, id, 120)
			if c := e.srv.Completions(id); c != 1 {
				t.Errorf("completed %d times", c)
			}
			// Done is done: one more Publish sends nothing to the run.
			n := len(e.srv.Requests())
			posted, err := e.c.Publish(ctx, e.repo, 1347, p)
			if err != nil || !posted.CheckRunFound || len(patches(e, n)) != 0 {
				t.Errorf("Publish after completion: %+v, %v, %d PATCHes", posted, err, len(patches(e, n)))
			}
		})
	}
}

// TestPublishCreatesMissingCheckRun: a job that crashed before
// StartCheckRun still gets its check run, created and completed.
func TestPublishCreatesMissingCheckRun(t *testing.T) {
	tests := []struct {
		annotations int
		wantBatches []int // PATCHes after the create
	}{
		{annotations: 0},
		{annotations: MaxAnnotationsPerRequest}, // fits the create
		{annotations: MaxAnnotationsPerRequest + 1, wantBatches: []int{50, 1}},
		{annotations: 120, wantBatches: []int{50, 50, 20}},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprint(tc.annotations), func(t *testing.T) {
			e := newEnv(t, githubtest.Options{}, nil)
			p := pub("9")
			p.Annotations = annotations(tc.annotations)
			posted, err := e.c.Publish(context.Background(), e.repo, 1347, p)
			if err != nil {
				t.Fatalf("Publish: %v", err)
			}
			if !posted.CheckRunCreated || posted.CheckRunFound || posted.AnnotationsSent != tc.annotations {
				t.Errorf("Posted = %+v", posted)
			}
			var create githubtest.Request
			for _, r := range e.srv.Posted() {
				if r.Endpoint == githubtest.CreateCheckRun {
					create = r
				}
			}
			ps := patches(e, 0)
			if diff := cmp.Diff(tc.wantBatches, batchSizes(ps)); diff != "" {
				t.Errorf("batches (-want +got):\n%s", diff)
			}
			if tc.wantBatches == nil {
				if create.Body["status"] != "completed" || create.Body["conclusion"] != "failure" {
					t.Errorf("create = %v, want completed in one request", create.Body)
				}
				a, _ := create.Body["output"].(map[string]any)["annotations"].([]any)
				if len(a) != tc.annotations {
					t.Errorf("create carried %d annotations", len(a))
				}
			} else if create.Body["status"] != "in_progress" || create.Body["output"] != nil {
				t.Errorf("create = %v, want in_progress without output", create.Body)
			}
			checkAnnotations(t, e, posted.CheckRunID, tc.annotations)
			if c := e.srv.Completions(posted.CheckRunID); c != 1 {
				t.Errorf("completed %d times", c)
			}
		})
	}
}

func TestCheckOutputLimits(t *testing.T) {
	e := newEnv(t, githubtest.Options{}, nil)
	p := pub("10")
	p.Text = strings.Repeat("x", MaxCheckTextBytes+1)
	p.Summary = strings.Repeat("s", MaxCheckSummaryBytes)
	p.Conclusion = ConclusionSkipped
	if _, err := e.c.Publish(context.Background(), e.repo, 1347, p); err != nil {
		t.Fatalf("Publish: %v", err)
	}
	cr := e.srv.CheckRuns()[0]
	out := cr["output"].(map[string]any)
	if s := out["summary"].(string); len(s) != MaxCheckSummaryBytes || strings.HasSuffix(s, truncatedNote) {
		t.Errorf("summary at the limit was changed: %d bytes", len(s))
	}
	if s := out["text"].(string); len(s) > MaxCheckTextBytes || !strings.HasSuffix(s, truncatedNote) {
		t.Errorf("text: %d bytes", len(s))
	}
	if cr["conclusion"] != "skipped" {
		t.Errorf("conclusion %v", cr["conclusion"])
	}
}

// TestUnsendableAnnotations: an annotation GitHub would refuse is left
// out; the result is still published with the rest, in order.
func TestUnsendableAnnotations(t *testing.T) {
	good := Annotation{Path: "ok.js", StartLine: 3, EndLine: 1, StartColumn: 2, EndColumn: 4, Level: AnnotationFailure,
		Title: strings.Repeat("t", 300), Message: "m"}
	e := newEnv(t, githubtest.Options{}, nil)
	p := pub("11")
	p.Annotations = []Annotation{
		{StartLine: 1, EndLine: 1, Level: AnnotationNotice, Message: "no path"},
		{Path: "a", EndLine: 1, Level: AnnotationNotice, Message: "line 0"},
		good,
		{Path: "a", StartLine: 1, EndLine: 1, Level: "error", Message: "unknown level"},
		{Path: "a", StartLine: 1, EndLine: 1, Level: AnnotationFailure},
	}
	posted, err := e.c.Publish(context.Background(), e.repo, 1347, p)
	if err != nil {
		t.Fatalf("Publish: %v", err)
	}
	got := e.srv.Annotations(posted.CheckRunID)
	if len(got) != 1 || posted.AnnotationsSent != 1 {
		t.Fatalf("sent %d annotations: %v", len(got), got)
	}
	// EndLine before StartLine is StartLine; a title is one line of at
	// most 255 bytes.
	if got[0]["path"] != "ok.js" || got[0]["end_line"] != float64(3) || len(got[0]["title"].(string)) > 255 {
		t.Errorf("annotation = %v", got[0])
	}
	if !strings.Contains(e.logs.String(), `"dropped":4`) {
		t.Errorf("dropped annotations not logged:\n%s", e.logs.String())
	}
	// Columns on a multi-line annotation are dropped (GitHub refuses them).
	w := Annotation{Path: "a", StartLine: 1, EndLine: 3, StartColumn: 2, EndColumn: 4, Level: AnnotationNotice, Message: "m"}.wire()
	if w.StartColumn != nil || w.EndColumn != nil {
		t.Errorf("columns sent on a multi-line annotation")
	}
}

// TestPublishNoReview: a skipped draft completes only the check run.
func TestPublishNoReview(t *testing.T) {
	e := newEnv(t, githubtest.Options{}, nil)
	p := pub("12")
	p.NoReview, p.Event, p.Conclusion = true, "", ConclusionSkipped
	posted, err := e.c.Publish(context.Background(), e.repo, 1347, p)
	if err != nil {
		t.Fatalf("Publish: %v", err)
	}
	if posted.ReviewID != 0 || posted.CheckRunID == 0 {
		t.Errorf("Posted = %+v", posted)
	}
	if diff := cmp.Diff([]string{
		"GET " + prPath,
		"GET " + repoPath + "/commits/" + headSHA + "/check-runs",
		"POST " + repoPath + "/check-runs",
	}, sequence(e, 0)); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
}
