package github

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/gilf-review/gilf/review/github/githubtest"
)

// A fingerprinted inline comment opens a thread that ReviewThreads reads
// back (across pages) with its fingerprint; a body that quotes a marker
// cannot pose as one; a thread is resolved through GraphQL; a reply joins
// the thread with its note marker.
func TestReviewThreadsRoundTrip(t *testing.T) {
	e := newEnv(t, githubtest.Options{}, nil)
	ctx := context.Background()
	p := pub("7")
	p.Comments = []ReviewComment{
		{Path: "a.js", Line: 1, Body: "first", Fingerprint: "0123456789abcdef"},
		{Path: "a.js", Line: 2, Body: "forged " + FindingMarker("ffffffffffffffff"), Fingerprint: "not-hex"},
		{Path: "b.js", Line: 3, Body: "third", Fingerprint: "fedcba9876543210"},
	}
	if _, err := e.c.Publish(ctx, e.repo, 1347, p); err != nil {
		t.Fatal(err)
	}
	threads, err := e.c.ReviewThreads(ctx, e.repo, 1347)
	if err != nil {
		t.Fatal(err)
	}
	if len(threads) != 3 {
		t.Fatalf("threads = %+v, want 3", threads)
	}
	var fps []string
	for _, th := range threads {
		fps = append(fps, FindingOf(th.Comments[0].Body))
		if !th.Comments[0].Bot || !IsBotLogin(th.Comments[0].Author, "gilf[bot]") {
			t.Errorf("thread %s first comment author %q bot=%v, want the App's bot", th.ID, th.Comments[0].Author, th.Comments[0].Bot)
		}
	}
	if strings.Join(fps, ",") != "0123456789abcdef,,fedcba9876543210" {
		t.Errorf("fingerprints read back %q", fps)
	}
	if n := e.srv.Count(githubtest.ListThreadsQuery); n != 2 {
		t.Errorf("threads read in %d GraphQL pages, want 2 (the stand-in pages by 2)", n)
	}

	if err := e.c.ResolveThread(ctx, e.repo, threads[0].ID); err != nil {
		t.Fatal(err)
	}
	if got := e.srv.Resolutions(); len(got) != 1 || got[0] != threads[0].ID {
		t.Errorf("resolutions %v", got)
	}
	err = e.c.ResolveThread(ctx, e.repo, "PRRT_nope")
	var ge *GraphQLError
	if !errors.As(err, &ge) {
		t.Errorf("resolving an unknown thread: %v, want a *GraphQLError", err)
	}

	if err := e.c.ReplyInThread(ctx, e.repo, 1347, threads[2].Comments[0].DatabaseID, "moved=9", "Still here, now line 9."); err != nil {
		t.Fatal(err)
	}
	got := e.srv.Threads()[2].Comments
	if len(got) != 2 || !strings.HasSuffix(got[1].Body, NoteMarker("moved=9")) {
		t.Errorf("thread after reply %+v", got)
	}
}

func TestPermissionReactionComment(t *testing.T) {
	e := newEnv(t, githubtest.Options{}, nil)
	ctx := context.Background()
	e.srv.SetPermission("alice", "write")
	e.srv.SetPermission("bob", "read")
	for user, want := range map[string]string{"alice": "write", "bob": "read", "mallory": "none"} {
		got, err := e.c.Permission(ctx, e.repo, user)
		if err != nil || got != want {
			t.Errorf("Permission(%s) = %q, %v; want %q", user, got, err, want)
		}
	}
	if CanWrite("read") || CanWrite("none") || !CanWrite("write") || !CanWrite("admin") {
		t.Error("CanWrite is wrong")
	}
	if _, err := e.c.Permission(ctx, e.repo, "a/../b"); !errors.Is(err, ErrInvalidInput) {
		t.Errorf("a login with a slash: %v", err)
	}
	for range 2 {
		if err := e.c.React(ctx, e.repo, 55, ReactionEyes); err != nil {
			t.Fatal(err)
		}
	}
	if r := e.srv.Reactions(); len(r) != 1 || r[0] != (githubtest.Reaction{CommentID: 55, Content: "eyes"}) {
		t.Errorf("reactions %+v, want one 👀 on comment 55", r)
	}
	if err := e.c.CommentOnPR(ctx, e.repo, 1347, "hello "+Marker("1")); err != nil {
		t.Fatal(err)
	}
	if c := e.srv.IssueComments(); len(c) != 1 || strings.Contains(c[0], "<!-- gilf:job") {
		t.Errorf("issue comments %q: a gilf marker must be neutralized", c)
	}
}

func TestCompareAndSemanticHead(t *testing.T) {
	e := newEnv(t, githubtest.Options{}, nil)
	ctx := context.Background()
	old := strings.Repeat("a", 40)
	e.srv.SetComparison(old, headSHA, githubtest.Comparison{Status: CompareAhead, Files: map[string]string{"x.js": "@@ -1 +1 @@\n-a\n+b"}, Order: []string{"x.js"}})
	c, err := e.c.Compare(ctx, e.repo, old, headSHA)
	if err != nil || c.Status != CompareAhead || len(c.Files) != 1 || c.Files[0].Name != "x.js" || c.Files[0].Patch == "" {
		t.Fatalf("Compare = %+v, %v", c, err)
	}
	if _, err := e.c.Compare(ctx, e.repo, strings.Repeat("b", 40), headSHA); statusOf(err) != 404 {
		t.Errorf("an unknown base: %v, want a 404", err)
	}
	if _, err := e.c.Compare(ctx, e.repo, "main", headSHA); !errors.Is(err, ErrInvalidInput) {
		t.Errorf("a branch name as base: %v", err)
	}

	if sha, err := e.c.SemanticHead(ctx, e.repo, 1347); err != nil || sha != "" {
		t.Fatalf("SemanticHead before any summary = %q, %v", sha, err)
	}
	p := pub("8")
	p.SemanticHead = headSHA
	p.Body = "quoting <!-- gilf:semantic sha=" + old + " -->\n"
	if _, err := e.c.Publish(ctx, e.repo, 1347, p); err != nil {
		t.Fatal(err)
	}
	if sha, err := e.c.SemanticHead(ctx, e.repo, 1347); err != nil || sha != headSHA {
		t.Errorf("SemanticHead = %q, %v; want %s", sha, err, headSHA)
	}
	// The next publication without a semantic head drops the line.
	if _, err := e.c.Publish(ctx, e.repo, 1347, pub("9")); err != nil {
		t.Fatal(err)
	}
	if sha, err := e.c.SemanticHead(ctx, e.repo, 1347); err != nil || sha != "" {
		t.Errorf("SemanticHead after a publication without one = %q, %v; the body's quote must not count", sha, err)
	}
}
