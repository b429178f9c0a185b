package dashboard_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

// browserTimeout bounds one whole browser test, Chromium's start included.
const browserTimeout = 3 * time.Minute

// chromiumPath finds Debian's chromium; the test fails without it.
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("no chromium on PATH: apt-get install chromium")
	return ""
}

// screenshotDir is where the browser tests write their screenshots:
// $GILF_DASHBOARD_SCREENSHOTS when set (to look at them), else a
// temporary directory of the test.
func screenshotDir(t *testing.T) string {
	t.Helper()
	if d := os.Getenv("GILF_DASHBOARD_SCREENSHOTS"); d != "" {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	return t.TempDir()
}

// browser is one headless Chromium, offline but for 127.0.0.1, that
// records every URL it requests and every dialog a page opens.
type browser struct {
	ctx      context.Context
	mu       sync.Mutex
	requests []string
	dialogs  []string
}

func newBrowser(t *testing.T) *browser {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), browserTimeout)
	t.Cleanup(cancel)
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.Headless,
		chromedp.NoSandbox, // gilf's tests run as root
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("disable-gpu", true),
		// Offline: every host name but the test server's address fails to
		// resolve, no proxy, no component or field-trial downloads.
		chromedp.Flag("host-resolver-rules", "MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"),
		chromedp.Flag("no-proxy-server", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-domain-reliability", true),
		chromedp.Flag("disable-field-trial-config", true),
		chromedp.Flag("no-pings", true),
		chromedp.Flag("dns-prefetch-disable", true),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	bctx, cancelBrowser := chromedp.NewContext(actx)
	// Chromium is closed by the test: the browser context first, then
	// the allocator, which waits for the process to exit.
	t.Cleanup(func() {
		cancelBrowser()
		cancelAlloc()
	})
	b := &browser{ctx: bctx}
	if err := chromedp.Listen(bctx, func(ev any) {
		b.mu.Lock()
		defer b.mu.Unlock()
		switch ev := ev.(type) {
		case *network.EventRequestWillBeSent:
			b.requests = append(b.requests, ev.Request.URL)
		case *page.EventJavascriptDialogOpening:
			b.dialogs = append(b.dialogs, ev.Message)
		}
	}); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return b
}

// check fails the test when the browser asked for anything but base, or
// a page opened a dialog (an escaped script never runs).
func (b *browser) check(t *testing.T, base string) {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.requests) == 0 {
		t.Error("the browser made no request")
	}
	for _, u := range b.requests {
		if !strings.HasPrefix(u, base+"/") && !strings.HasPrefix(u, "data:") {
			t.Errorf("the browser requested %s, outside %s", u, base)
		}
	}
	if len(b.dialogs) > 0 {
		t.Errorf("a page opened dialogs: %q", b.dialogs)
	}
}

// layout is what a page's overflow check reads.
type layout struct {
	ScrollWidth int `json:"scrollWidth"`
	InnerWidth  int `json:"innerWidth"`
}

const layoutJS = `({scrollWidth: document.documentElement.scrollWidth, innerWidth: window.innerWidth})`

// shoot loads path at the given width, waits for sel, checks that the page
// does not scroll sideways and writes a screenshot.
func (b *browser) shoot(t *testing.T, base, dir, name, path, sel string, width int64) {
	t.Helper()
	if err := chromedp.Do(b.ctx,
		chromedp.EmulateViewport(width, 900),
		chromedp.Navigate(base+path),
		chromedp.WaitVisible(chromedp.CSS(sel)),
	); err != nil {
		t.Fatalf("%s at %d px: %v", name, width, err)
	}
	l, err := chromedp.Run(b.ctx, chromedp.Evaluate[layout](layoutJS))
	if err != nil {
		t.Fatalf("%s at %d px: %v", name, width, err)
	}
	if l.ScrollWidth > l.InnerWidth {
		t.Errorf("%s at %d px scrolls sideways: scrollWidth %d > innerWidth %d", name, width, l.ScrollWidth, l.InnerWidth)
	}
	png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("%s at %d px: screenshot: %v", name, width, err)
	}
	file := filepath.Join(dir, fmt.Sprintf("%s-%d.png", name, width))
	if err := os.WriteFile(file, png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestBrowser renders every page in headless Chromium at a desktop and a
// phone width, signing in through the login form and retrying a dead job
// with the queue page's button.
func TestBrowser(t *testing.T) {
	f := newFixture(t)
	srv := f.server(t)
	dir := screenshotDir(t)
	b := newBrowser(t)
	id := func(n int64) string { return strconv.FormatInt(n, 10) }

	// Signed out: the login page, then a wrong token, then the right one.
	for _, w := range []int64{1280, 390} {
		b.shoot(t, srv.URL, dir, "login", "/dashboard", "#token", w)
	}
	if err := chromedp.Do(b.ctx,
		chromedp.SendKeys(chromedp.CSS("#token"), "not-the-dashboard-token"),
		chromedp.Submit(chromedp.CSS("#token")),
		chromedp.WaitVisible(chromedp.CSS(`[role="alert"]`)),
		chromedp.SendKeys(chromedp.CSS("#token"), testToken),
		chromedp.Submit(chromedp.CSS("#token")),
		chromedp.WaitVisible(chromedp.CSS("#runs-table")),
	); err != nil {
		t.Fatalf("sign in: %v", err)
	}

	pages := []struct{ name, path, sel string }{
		{"runs", "/dashboard", "#runs-table"},
		{"runs-filtered", "/dashboard?executor=local&limit=2", "#older"},
		{"run", "/dashboard/runs/" + id(f.failedRun), "#steps"},
		{"run-refused", "/dashboard/runs/" + id(f.refusedRun), "#run-facts"},
		{"run-untrusted", "/dashboard/runs/" + id(f.xssRun), "#findings"},
		{"costs", "/dashboard/costs", "#cost-chart svg"},
		{"costs-repos", "/dashboard/costs#by-repository", "#repo-chart svg"},
		{"queue", "/dashboard/queue", "#dead"},
		{"queue-all", "/dashboard/queue?state=queued,running,done,failed,dead,superseded,cancelled", "#jobs-done"},
		{"job-dead", "/dashboard/jobs/" + id(f.deadJob), "#job-attempts"},
		{"job-running", "/dashboard/jobs/" + id(f.runningJob), "#job-facts"},
		{"refusals", "/dashboard/refusals", "#refusal-codes"},
		{"shadow", "/dashboard/shadow", "#shadow-pairs"},
		{"not-found", "/dashboard/runs/999999", "#error-message"},
	}
	for _, w := range []int64{1280, 390} {
		for _, p := range pages {
			b.shoot(t, srv.URL, dir, p.name, p.path, p.sel, w)
		}
	}

	// The untrusted title is shown as text.
	if err := chromedp.Do(b.ctx, chromedp.Navigate(srv.URL+"/dashboard/runs/"+id(f.xssRun)),
		chromedp.WaitVisible(chromedp.CSS("#findings strong"))); err != nil {
		t.Fatal(err)
	}
	text, err := chromedp.Run(b.ctx, chromedp.Text(chromedp.CSS("#findings strong")))
	if err != nil || text != xss {
		t.Errorf("finding title %q, %v; want the untrusted text as text", text, err)
	}

	// Open the failed run's evidence through its link: the stored log,
	// as text.
	if err := chromedp.Do(b.ctx,
		chromedp.Navigate(srv.URL+"/dashboard/runs/"+id(f.failedRun)),
		chromedp.WaitVisible(chromedp.CSS("a.open-evidence")),
		chromedp.Click(chromedp.CSS("a.open-evidence")),
		chromedp.WaitVisible(chromedp.CSS("pre")),
	); err != nil {
		t.Fatalf("open evidence: %v", err)
	}
	text, err = chromedp.Run(b.ctx, chromedp.Text(chromedp.CSS("pre")))
	if err != nil || !strings.Contains(text, "expected 3, got 4 <script>") {
		t.Errorf("evidence shown as %q, %v; want the stored log as text", text, err)
	}

	// Cancel the running job from its page: the button's same-origin
	// POST with the session's form token, back to the job's page.
	if err := chromedp.Do(b.ctx,
		chromedp.Navigate(srv.URL+"/dashboard/jobs/"+id(f.runningJob)),
		chromedp.WaitVisible(chromedp.CSS("button.cancel")),
		chromedp.Click(chromedp.CSS("button.cancel")),
		chromedp.WaitVisible(chromedp.CSS("#job-message")),
	); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	b.shoot(t, srv.URL, dir, "job-cancelled", "/dashboard/jobs/"+id(f.runningJob)+"?cancelled="+id(f.runningJob), "#job-message", 390)
	if st, err := f.db.JobState(t.Context(), f.runningJob); err != nil || st.State != "cancelled" {
		t.Errorf("the cancelled job: %v %+v", err, st)
	}

	// Retry the dead job with its button: a same-origin POST with the
	// session's form token.
	if err := chromedp.Do(b.ctx,
		chromedp.Navigate(srv.URL+"/dashboard/queue?state=dead"),
		chromedp.WaitVisible(chromedp.CSS("button.retry")),
		chromedp.Click(chromedp.CSS("button.retry")),
		chromedp.WaitVisible(chromedp.CSS("#queue-message")),
	); err != nil {
		t.Fatalf("retry: %v", err)
	}
	b.shoot(t, srv.URL, dir, "queue-retried", "/dashboard/queue?requeued="+id(f.deadJob), "#queue-message", 390)
	st, err := f.db.JobState(t.Context(), f.deadJob)
	if err != nil || st.State != "queued" || st.Reruns != 1 {
		t.Errorf("the retried job: %v %+v", err, st)
	}

	// Sign out with the header's button.
	if err := chromedp.Do(b.ctx,
		chromedp.Navigate(srv.URL+"/dashboard"),
		chromedp.Click(chromedp.CSS(".logout button")),
		chromedp.WaitVisible(chromedp.CSS("#token")),
	); err != nil {
		t.Fatalf("sign out: %v", err)
	}
	b.check(t, srv.URL)
	if t.Failed() || testing.Verbose() {
		t.Logf("screenshots in %s", dir)
	}
	if err := b.ctx.Err(); errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("browser test ran out of time (%v)", browserTimeout)
	}
}
