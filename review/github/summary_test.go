package github

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gilf-review/gilf/review/github/githubtest"
)

// sha makes a distinct 40-hex head sha.
func sha(i int) string { return fmt.Sprintf("%02x", i) + strings.Repeat("ab", 19) }

// publishHead moves the pull request to head and publishes job on it.
func publishHead(t *testing.T, e *env, job, head, title string, event string) Posted {
	t.Helper()
	e.srv.SetHeadSHA(head)
	p := pub(job)
	p.HeadSHA, p.Title, p.Event = head, title, event
	p.Body = Marker(job) + "\n## gilf\nresult of job " + job
	posted, err := e.c.Publish(context.Background(), e.repo, 1347, p)
	if err != nil {
		t.Fatalf("Publish job %s: %v", job, err)
	}
	return posted
}

func TestSummaryEditedInPlace(t *testing.T) {
	e := newEnv(t, githubtest.Options{}, nil)
	first := publishHead(t, e, "1", sha(1), "gilf validation: ❌ failed", EventComment)
	second := publishHead(t, e, "2", sha(2), "gilf validation: ❌ failed <again>", EventComment)
	n := len(e.srv.Requests())
	third := publishHead(t, e, "3", sha(3), "gilf validation: ✅ passed", EventComment)
	if first.ReviewUpdated || !second.ReviewUpdated || !third.ReviewUpdated || second.ReviewID != first.ReviewID || third.ReviewID != first.ReviewID {
		t.Errorf("Posted: %+v / %+v / %+v", first, second, third)
	}
	reviews := e.srv.Reviews()
	if len(reviews) != 1 {
		t.Fatalf("%d reviews on the PR, want 1", len(reviews))
	}
	if n, m := e.srv.Count(githubtest.CreateReview), e.srv.Count(githubtest.UpdateReview); n != 1 || m != 2 {
		t.Errorf("%d review POSTs and %d PUTs, want 1 and 2", n, m)
	}
	want := SummaryMarker + "\n" + Marker("3") + "\n" +
		"<!-- gilf:head sha=" + sha(3) + " title=gilf+validation%3A+%E2%9C%85+passed -->\n" +
		"## gilf\nresult of job 3" +
		"\n\n<!-- gilf:history-begin -->\n<details><summary>Earlier heads (2)</summary>\n\n" +
		"- `02ababa` gilf validation: ❌ failed &lt;again&gt; (job 2) <!-- gilf:history sha=" + sha(2) + " job=2 title=gilf+validation%3A+%E2%9D%8C+failed+%3Cagain%3E -->\n" +
		"- `01ababa` gilf validation: ❌ failed (job 1) <!-- gilf:history sha=" + sha(1) + " job=1 title=gilf+validation%3A+%E2%9D%8C+failed -->\n" +
		"\n</details>\n"
	if diff := cmp.Diff(want, e.srv.ReviewBodies()[0]); diff != "" {
		t.Errorf("summary body (-want +got):\n%s", diff)
	}
	id := third.ReviewID
	if diff := cmp.Diff([]string{
		"GET " + prPath, "GET " + prPath + "/reviews", fmt.Sprintf("PUT %s/reviews/%d", prPath, id),
		"GET " + repoPath + "/commits/" + sha(3) + "/check-runs", "POST " + repoPath + "/check-runs",
	}, sequence(e, n)); diff != "" {
		t.Errorf("requests of the third head (-want +got):\n%s", diff)
	}

	// A retry of the third job: the summary shows it already.
	again := publishHead(t, e, "3", sha(3), "gilf validation: ✅ passed", EventComment)
	if !again.ReviewFound || again.ReviewUpdated || e.srv.Count(githubtest.UpdateReview) != 2 {
		t.Errorf("retry: %+v, %d PUTs", again, e.srv.Count(githubtest.UpdateReview))
	}
}

// TestSummaryPutLanded: the PUT lands but its answer is lost; the retry
// reads the review back and does not PUT again.
func TestSummaryPutLanded(t *testing.T) {
	e := newEnv(t, githubtest.Options{}, nil)
	publishHead(t, e, "1", sha(1), "failed", EventComment)
	e.srv.Fail(githubtest.UpdateReview, githubtest.Fault{Kind: githubtest.LandThenStatus, Status: 502})
	posted := publishHead(t, e, "2", sha(2), "passed", EventComment)
	if !posted.ReviewUpdated {
		t.Errorf("Posted = %+v", posted)
	}
	if n := e.srv.Count(githubtest.UpdateReview); n != 1 {
		t.Errorf("%d PUTs, want 1", n)
	}
	if cur, hist := parseSummary(e.srv.ReviewBodies()[0]); cur.job != "2" || len(hist) != 1 || hist[0].job != "1" {
		t.Errorf("summary shows %+v, history %+v", cur, hist)
	}
	again := publishHead(t, e, "2", sha(2), "passed", EventComment)
	if !again.ReviewFound || e.srv.Count(githubtest.UpdateReview) != 1 {
		t.Errorf("retry: %+v, %d PUTs", again, e.srv.Count(githubtest.UpdateReview))
	}
}

// TestRequestChangesDismissed: a failing head requests changes in a
// separate review; a later passing head dismisses it.
func TestRequestChangesDismissed(t *testing.T) {
	e := newEnv(t, githubtest.Options{}, nil)
	first := publishHead(t, e, "1", sha(1), "failed", EventRequestChanges)
	if first.ChangesReviewID == 0 || first.ChangesReviewFound {
		t.Fatalf("Posted = %+v", first)
	}
	rv, _ := e.srv.Review(first.ChangesReviewID)
	if rv["state"] != "CHANGES_REQUESTED" || !strings.HasPrefix(rv["body"].(string), ChangesMarker("1")+"\n") {
		t.Errorf("changes review = %v", rv)
	}
	if sum, _ := e.srv.Review(first.ReviewID); sum["state"] != "COMMENTED" {
		t.Errorf("summary review state %v, want COMMENTED", sum["state"])
	}
	// A retry of the same job posts neither review again.
	retry := publishHead(t, e, "1", sha(1), "failed", EventRequestChanges)
	if !retry.ReviewFound || !retry.ChangesReviewFound || retry.ChangesReviewID != first.ChangesReviewID || len(retry.Dismissed) != 0 {
		t.Errorf("retry = %+v", retry)
	}
	// A second failing head: a new block, the old one dismissed.
	second := publishHead(t, e, "2", sha(2), "failed again", EventRequestChanges)
	if second.ChangesReviewID == first.ChangesReviewID || !cmp.Equal(second.Dismissed, []int64{first.ChangesReviewID}) {
		t.Errorf("second = %+v", second)
	}
	// A passing head: the remaining block dismissed, none posted.
	n := len(e.srv.Requests())
	third := publishHead(t, e, "3", sha(3), "passed", EventComment)
	if third.ChangesReviewID != 0 || !cmp.Equal(third.Dismissed, []int64{second.ChangesReviewID}) {
		t.Errorf("third = %+v", third)
	}
	if diff := cmp.Diff([]string{
		"GET " + prPath, "GET " + prPath + "/reviews",
		fmt.Sprintf("PUT %s/reviews/%d", prPath, first.ReviewID),
		fmt.Sprintf("PUT %s/reviews/%d/dismissals", prPath, second.ChangesReviewID),
		"GET " + repoPath + "/commits/" + sha(3) + "/check-runs", "POST " + repoPath + "/check-runs",
	}, sequence(e, n)); diff != "" {
		t.Errorf("requests of the passing head (-want +got):\n%s", diff)
	}
	for _, id := range []int64{first.ChangesReviewID, second.ChangesReviewID} {
		if rv, _ := e.srv.Review(id); rv["state"] != "DISMISSED" {
			t.Errorf("review %d state %v", id, rv["state"])
		}
	}
	want := []githubtest.Dismissal{
		{ReviewID: first.ChangesReviewID, Message: "superseded by gilf's result for 02ababa"},
		{ReviewID: second.ChangesReviewID, Message: "superseded by gilf's result for 03ababa"},
	}
	if diff := cmp.Diff(want, e.srv.Dismissals()); diff != "" {
		t.Errorf("dismissals (-want +got):\n%s", diff)
	}
	// Nothing left to dismiss: a retry sends no dismissal.
	publishHead(t, e, "3", sha(3), "passed", EventComment)
	if n := e.srv.Count(githubtest.DismissReview); n != 2 {
		t.Errorf("%d dismissal requests, want 2", n)
	}
	// Still one summary review; the two dismissed blocks stay as history.
	summaries := 0
	for _, b := range e.srv.ReviewBodies() {
		if strings.Contains(b, SummaryMarker) {
			summaries++
		}
	}
	if summaries != 1 {
		t.Errorf("%d summary reviews", summaries)
	}
}

// TestDismissLanded: the dismissal lands but its answer is lost; the
// retry reads the state back and does not dismiss again.
func TestDismissLanded(t *testing.T) {
	e := newEnv(t, githubtest.Options{}, nil)
	first := publishHead(t, e, "1", sha(1), "failed", EventRequestChanges)
	e.srv.Fail(githubtest.DismissReview, githubtest.Fault{Kind: githubtest.LandThenStatus, Status: 502})
	second := publishHead(t, e, "2", sha(2), "passed", EventComment)
	if !cmp.Equal(second.Dismissed, []int64{first.ChangesReviewID}) || e.srv.Count(githubtest.DismissReview) != 1 {
		t.Errorf("Posted %+v, %d dismissal requests", second, e.srv.Count(githubtest.DismissReview))
	}
}

func TestSummaryHistoryCap(t *testing.T) {
	e := newEnv(t, githubtest.Options{}, nil)
	heads := MaxSummaryHistory + 3
	for i := 1; i <= heads; i++ {
		publishHead(t, e, fmt.Sprint(i), sha(i), fmt.Sprintf("verdict %d", i), EventComment)
	}
	cur, hist := parseSummary(e.srv.ReviewBodies()[0])
	if cur.job != fmt.Sprint(heads) || len(hist) != MaxSummaryHistory {
		t.Fatalf("current %+v, %d history lines", cur, len(hist))
	}
	for i, h := range hist { // newest first
		if want := heads - 1 - i; h.job != fmt.Sprint(want) || h.sha != sha(want) || h.title != fmt.Sprintf("verdict %d", want) {
			t.Errorf("history[%d] = %+v, want job %d", i, h, want)
		}
	}
	if !strings.Contains(e.srv.ReviewBodies()[0], fmt.Sprintf("Earlier heads (%d)", MaxSummaryHistory)) {
		t.Error("history count not shown")
	}
}

func TestRenderSummaryLimits(t *testing.T) {
	cur := headResult{sha: sha(9), job: "9", title: "passed"}
	hist := func(n int) []headResult {
		var out []headResult
		for i := range n {
			out = append(out, headResult{sha: sha(i), job: fmt.Sprint(i), title: "failed"})
		}
		return out
	}
	header := len(renderSummary(cur, "", nil))
	t.Run("history at the cap is kept", func(t *testing.T) {
		_, h := parseSummary(renderSummary(cur, "body", hist(MaxSummaryHistory)))
		if len(h) != MaxSummaryHistory {
			t.Errorf("%d lines", len(h))
		}
	})
	t.Run("history over the cap is cut", func(t *testing.T) {
		_, h := parseSummary(renderSummary(cur, "body", hist(MaxSummaryHistory+1)))
		if len(h) != MaxSummaryHistory || h[len(h)-1].job != fmt.Sprint(MaxSummaryHistory-1) {
			t.Errorf("%d lines", len(h))
		}
	})
	t.Run("a body that fits exactly, no history", func(t *testing.T) {
		body := strings.Repeat("x", MaxReviewBodyBytes-header)
		got := renderSummary(cur, body, nil)
		if len(got) != MaxReviewBodyBytes || strings.HasSuffix(got, truncatedNote) {
			t.Errorf("%d bytes", len(got))
		}
		if got := renderSummary(cur, body+"x", nil); len(got) != MaxReviewBodyBytes || !strings.HasSuffix(got, truncatedNote) {
			t.Errorf("one byte over: %d bytes", len(got))
		}
	})
	t.Run("history is cut before the body", func(t *testing.T) {
		block := len(historyBlock(hist(1)))
		body := strings.Repeat("y", MaxReviewBodyBytes-header-block)
		got := renderSummary(cur, body, hist(1))
		if _, h := parseSummary(got); len(got) != MaxReviewBodyBytes || len(h) != 1 || !strings.Contains(got, body) {
			t.Errorf("at the limit: %d bytes, %d history lines", len(got), len(h))
		}
		// One byte more and even one history line does not fit: the
		// history goes, the body stays whole.
		got = renderSummary(cur, body+"y", hist(3))
		if _, h := parseSummary(got); len(got) > MaxReviewBodyBytes || len(h) != 0 || !strings.Contains(got, body+"y") {
			t.Errorf("one byte over: %d bytes, %d history lines", len(got), len(h))
		}
	})
}

// TestSummaryBodyNeutralized: text in the body that looks like gilf's
// hidden lines is not read back as history.
func TestSummaryBodyNeutralized(t *testing.T) {
	evil := "```\n" + historyBegin + "\n- `deadbee` fake (job 666) <!-- gilf:history sha=deadbeef job=666 title=fake -->\n" + Marker("777") + "\n```"
	body := summaryBody("5", Marker("5")+"\n## gilf\n"+evil)
	got := renderSummary(headResult{sha: sha(5), job: "5", title: "t"}, body, nil)
	cur, hist := parseSummary(got)
	if cur.job != "5" || len(hist) != 0 {
		t.Errorf("parsed %+v, %+v from a body quoting gilf's lines", cur, hist)
	}
	if strings.Count(got, Marker("5")) != 1 || showsJob(got, "777") {
		t.Errorf("markers: %q", got)
	}
}

func TestParseSummaryForeign(t *testing.T) {
	for name, body := range map[string]string{
		"empty":            "",
		"old-style review": Marker("4") + "\n## gilf",
		"no header":        SummaryMarker + "\n## gilf",
		"bad escape":       SummaryMarker + "\n" + Marker("4") + "\n<!-- gilf:head sha=%zz title=x -->\n",
	} {
		t.Run(name, func(t *testing.T) {
			if cur, hist := parseSummary(body); cur.job != "" || hist != nil {
				t.Errorf("parsed %+v %+v", cur, hist)
			}
		})
	}
	// A summary whose header gilf cannot read still counts as showing a
	// job when its marker is above the history.
	if !showsJob(SummaryMarker+"\n"+Marker("4")+"\n## gilf", "4") {
		t.Error("header-less summary with the marker not recognized")
	}
}

func FuzzParseSummary(f *testing.F) {
	f.Add(renderSummary(headResult{sha: sha(1), job: "1", title: "t"}, "body", []headResult{{sha: sha(0), job: "0", title: "x"}}))
	f.Add(SummaryMarker + "\n" + Marker("1") + "\n<!-- gilf:head sha=a title= -->\n\n" + historyBegin + "\n- `a` <!-- gilf:history sha=a job=1 title=%41 -->")
	f.Fuzz(func(t *testing.T, body string) {
		cur, hist := parseSummary(body)
		if len(hist) > MaxSummaryHistory {
			t.Fatalf("%d history lines", len(hist))
		}
		if cur.job != "" && !jobIDRe.MatchString(cur.job) {
			t.Fatalf("job %q", cur.job)
		}
		// What was read renders within the limit and reads back the same.
		out := renderSummary(headResult{sha: "s", job: "j", title: "t"}, "b", hist)
		if len(out) > MaxReviewBodyBytes {
			t.Fatalf("%d bytes", len(out))
		}
		if _, again := parseSummary(out); len(again) != len(hist) {
			t.Fatalf("history %d → %d lines", len(hist), len(again))
		}
	})
}
