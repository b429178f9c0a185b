package github

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gilf-review/gilf/review/github/githubtest"
)

func TestTokenCachedAndRefreshed(t *testing.T) {
	e := newEnv(t, githubtest.Options{TokenTTL: time.Hour}, nil)
	ctx := context.Background()
	get := func() {
		t.Helper()
		if _, err := e.c.PullRequest(ctx, e.repo, 1347); err != nil {
			t.Fatalf("PullRequest: %v", err)
		}
	}
	get()
	get()
	if n := e.srv.TokensMinted(); n != 1 {
		t.Fatalf("minted %d tokens for two calls, want 1 (cached)", n)
	}
	// One second before the refresh margin: still cached.
	e.clock.Advance(time.Hour - DefaultTokenRefreshMargin - time.Second)
	get()
	if n := e.srv.TokensMinted(); n != 1 {
		t.Fatalf("minted %d before the refresh margin, want 1", n)
	}
	// At the margin: replaced before it expires.
	e.clock.Advance(time.Second)
	get()
	if n := e.srv.TokensMinted(); n != 2 {
		t.Fatalf("minted %d at the refresh margin, want 2", n)
	}
	// Another repository of the installation gets its own scoped token.
	other := Repo{InstallationID: 1, Owner: "octocat", Name: "Other"}
	_, err := e.c.PullRequest(ctx, other, 1347)
	if statusOf(err) != http.StatusNotFound {
		t.Fatalf("other repo: %v, want the fake's 404", err)
	}
	last := e.srv.Posted()[len(e.srv.Posted())-1]
	if diff := cmp.Diff([]any{"Other"}, last.Body["repositories"]); diff != "" {
		t.Errorf("scoped mint (-want +got):\n%s", diff)
	}
}

// TestToken401RemintsOnce: a token rejected mid-job (expired, revoked) is
// replaced exactly once and the call succeeds; a second 401 in a row is
// an error, not a loop.
func TestToken401RemintsOnce(t *testing.T) {
	e := newEnv(t, githubtest.Options{}, nil)
	ctx := context.Background()
	if _, err := e.c.PullRequest(ctx, e.repo, 1347); err != nil {
		t.Fatal(err)
	}
	e.srv.ExpireTokens()
	if _, err := e.c.PullRequest(ctx, e.repo, 1347); err != nil {
		t.Fatalf("after expiry: %v", err)
	}
	if n := e.srv.TokensMinted(); n != 2 {
		t.Errorf("minted %d, want exactly one re-mint", n)
	}
	// A POST body is replayed after the re-mint.
	e.srv.ExpireTokens()
	pub := Publication{JobID: "j1", HeadSHA: "6dcb09b5b57875f334f61aebed695e2e4193db5e", Body: "hello", Event: EventComment, Conclusion: ConclusionSuccess, Title: "ok", Summary: "s"}
	if _, _, err := e.c.PostReview(ctx, e.repo, 1347, pub); err != nil {
		t.Fatalf("PostReview after expiry: %v", err)
	}
	if got := e.srv.Reviews(); len(got) != 1 || !strings.Contains(got[0]["body"].(string), "hello") {
		t.Errorf("reviews = %v", got)
	}
	// 401 twice in a row: one re-mint, then the error.
	e.srv.Fail(githubtest.GetPull, githubtest.Fault{Kind: githubtest.Unauthorized, Times: 2})
	before := e.srv.TokensMinted()
	_, err := e.c.PullRequest(ctx, e.repo, 1347)
	if statusOf(err) != http.StatusUnauthorized {
		t.Fatalf("error = %v, want 401", err)
	}
	if n := e.srv.TokensMinted() - before; n != 1 {
		t.Errorf("re-minted %d times, want 1", n)
	}
}

func TestRateLimitsAndRetries(t *testing.T) {
	tests := []struct {
		name       string
		faults     func(now time.Time) []githubtest.Fault
		wantSleeps []time.Duration
		wantErr    func(error) bool
		wantCalls  int
	}{
		{name: "secondary limit with Retry-After 7",
			faults: func(time.Time) []githubtest.Fault {
				return []githubtest.Fault{{Kind: githubtest.SecondaryRateLimit, RetryAfter: 7 * time.Second}}
			},
			wantSleeps: []time.Duration{7 * time.Second}, wantCalls: 2},
		{name: "secondary limit without headers: 60 s then doubling",
			faults: func(time.Time) []githubtest.Fault {
				return []githubtest.Fault{{Kind: githubtest.SecondaryRateLimit, Times: 2}}
			},
			wantSleeps: []time.Duration{60 * time.Second, 120 * time.Second}, wantCalls: 3},
		{name: "primary limit waits until reset",
			faults: func(now time.Time) []githubtest.Fault {
				return []githubtest.Fault{{Kind: githubtest.PrimaryRateLimit, Reset: now.Add(30 * time.Second)}}
			},
			wantSleeps: []time.Duration{31 * time.Second}, wantCalls: 2},
		{name: "primary limit past the max wait is transient, not slept",
			faults: func(now time.Time) []githubtest.Fault {
				return []githubtest.Fault{{Kind: githubtest.PrimaryRateLimit, Reset: now.Add(time.Hour)}}
			},
			wantErr: func(err error) bool {
				var te *TransientError
				return errors.As(err, &te) && te.RetryAfter == time.Hour+time.Second
			},
			wantCalls: 1},
		{name: "secondary limit past the max wait is transient",
			faults: func(time.Time) []githubtest.Fault {
				return []githubtest.Fault{{Kind: githubtest.SecondaryRateLimit, RetryAfter: DefaultMaxWait + time.Second}}
			},
			wantErr:   func(err error) bool { var te *TransientError; return errors.As(err, &te) },
			wantCalls: 1},
		{name: "5xx backs off and recovers",
			faults: func(time.Time) []githubtest.Fault {
				return []githubtest.Fault{{Kind: githubtest.Status, Status: 502, Times: 3}}
			},
			wantSleeps: []time.Duration{time.Second, 2 * time.Second, 4 * time.Second}, wantCalls: 4},
		{name: "5xx beyond the attempts is transient",
			faults: func(time.Time) []githubtest.Fault {
				return []githubtest.Fault{{Kind: githubtest.Status, Status: 503, Times: 10}}
			},
			wantSleeps: []time.Duration{time.Second, 2 * time.Second, 4 * time.Second},
			wantErr: func(err error) bool {
				var te *TransientError
				return errors.As(err, &te) && statusOf(err) == 503
			},
			wantCalls: DefaultRetryAttempts},
		{name: "4xx is not retried",
			faults:    func(time.Time) []githubtest.Fault { return []githubtest.Fault{{Kind: githubtest.Status, Status: 404}} },
			wantErr:   func(err error) bool { var te *TransientError; return statusOf(err) == 404 && !errors.As(err, &te) },
			wantCalls: 1},
		{name: "real 422 body is a typed validation error",
			faults: func(time.Time) []githubtest.Fault { return []githubtest.Fault{{Kind: githubtest.Validation}} },
			wantErr: func(err error) bool {
				return statusOf(err) == 422 && strings.Contains(err.Error(), "Validation Failed")
			},
			wantCalls: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, githubtest.Options{}, nil)
			for _, f := range tc.faults(e.clock.Now()) {
				e.srv.Fail(githubtest.GetPull, f)
			}
			_, err := e.c.PullRequest(context.Background(), e.repo, 1347)
			if tc.wantErr == nil && err != nil {
				t.Fatalf("PullRequest: %v", err)
			}
			if tc.wantErr != nil && !tc.wantErr(err) {
				t.Fatalf("error = %v (%T)", err, err)
			}
			if diff := cmp.Diff(tc.wantSleeps, e.clock.Sleeps()); diff != "" {
				t.Errorf("sleeps (-want +got):\n%s", diff)
			}
			if n := e.srv.Count(githubtest.GetPull); n != tc.wantCalls {
				t.Errorf("%d requests, want %d", n, tc.wantCalls)
			}
		})
	}
}

func TestTokenMintRetried(t *testing.T) {
	e := newEnv(t, githubtest.Options{}, nil)
	e.srv.Fail(githubtest.CreateToken, githubtest.Fault{Kind: githubtest.Status, Status: 502})
	if _, err := e.c.PullRequest(context.Background(), e.repo, 1347); err != nil {
		t.Fatalf("PullRequest: %v", err)
	}
	if n := e.srv.Count(githubtest.CreateToken); n != 2 {
		t.Errorf("%d mint requests, want 2", n)
	}
}

func TestCancelledWait(t *testing.T) {
	e := newEnv(t, githubtest.Options{}, nil)
	e.srv.Fail(githubtest.GetPull, githubtest.Fault{Kind: githubtest.Status, Status: 502})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := e.c.PullRequest(ctx, e.repo, 1347)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error = %v, want context.Canceled", err)
	}
}

// TestSecretsNeverLogged runs every path that handles a credential —
// mint, re-mint after 401, retries, the codeload redirect, a refused
// redirect, posting — with debug logging, and checks no token, JWT or
// download credential reaches the log or an error.
func TestSecretsNeverLogged(t *testing.T) {
	e := newEnv(t, githubtest.Options{}, nil)
	ctx := context.Background()
	var errs []string
	note := func(err error) {
		if err != nil {
			errs = append(errs, err.Error())
		}
	}
	_, err := e.c.PullRequest(ctx, e.repo, 1347)
	note(err)
	e.srv.ExpireTokens()
	e.srv.Fail(githubtest.GetPull, githubtest.Fault{Kind: githubtest.Status, Status: 502})
	_, err = e.c.PullRequest(ctx, e.repo, 1347)
	note(err)
	e.srv.Fail(githubtest.Codeload, githubtest.Fault{Kind: githubtest.Status, Status: 502})
	_, err = e.c.Checkout(ctx, e.repo, "sha", t.TempDir())
	note(err)
	e.srv.Fail(githubtest.Codeload, githubtest.Fault{Kind: githubtest.Status, Status: 404, Times: 10})
	_, err = e.c.Checkout(ctx, e.repo, "sha", t.TempDir())
	if err == nil {
		t.Fatal("codeload 404: no error")
	}
	note(err)
	e.srv.RedirectTarball("http://203.0.113.9/x.tar.gz?token=" + e.srv.DownloadCredentials()[0])
	_, err = e.c.Checkout(ctx, e.repo, "sha", t.TempDir())
	note(err)
	_, err = e.c.Publish(ctx, e.repo, 1347, Publication{JobID: "7", HeadSHA: "6dcb09b5b57875f334f61aebed695e2e4193db5e", Body: "b", Event: EventComment, Conclusion: ConclusionNeutral})
	note(err)

	jwtTok, err := e.c.appJWT()
	if err != nil {
		t.Fatal(err)
	}
	secrets := append(append(e.srv.Tokens(), e.srv.DownloadCredentials()...), jwtTok.v)
	if len(e.srv.Tokens()) < 2 || len(e.srv.DownloadCredentials()) < 3 {
		t.Fatalf("the scenario did not exercise re-mint and downloads: %d tokens, %d downloads", len(e.srv.Tokens()), len(e.srv.DownloadCredentials()))
	}
	logs := e.logs.String()
	if !strings.Contains(logs, "installation token rejected") || !strings.Contains(logs, "retrying") {
		t.Errorf("expected re-mint and retry log lines, got:\n%s", logs)
	}
	for _, s := range secrets {
		if strings.Contains(logs, s) {
			t.Errorf("a credential reached the log")
		}
		for _, m := range errs {
			if strings.Contains(m, s) {
				t.Errorf("a credential reached an error: %s", m)
			}
		}
	}
}

func TestSecretFormatting(t *testing.T) {
	s := secret{v: "ghs_supersecret"}
	var b strings.Builder
	l := slog.New(slog.NewTextHandler(&b, nil))
	l.Info("x", "token", s, "tok2", slog.AnyValue(s))
	out := fmt.Sprintf("%v %+v %s %#v %q", s, s, s, s, s) + b.String()
	if strings.Contains(out, "supersecret") {
		t.Errorf("secret printed: %s", out)
	}
	if !strings.Contains(out, "[redacted]") {
		t.Errorf("no [redacted] marker: %s", out)
	}
}

func TestNewValidates(t *testing.T) {
	_, err := New(Config{BaseURL: "ftp://x"})
	if err == nil {
		t.Fatal("New accepted an empty config")
	}
	for _, want := range []string{"app id", "private key", "base url"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %s", err, want)
		}
	}
}
