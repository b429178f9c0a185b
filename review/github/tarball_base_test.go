package github

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/gilf-review/gilf/review/github/githubtest"
)

// oneFileTarball is a GitHub-style archive of top/name holding body.
func oneFileTarball(t *testing.T, top, name, body string) []byte {
	t.Helper()
	var raw bytes.Buffer
	zw := gzip.NewWriter(&raw)
	tw := tar.NewWriter(zw)
	for _, h := range []*tar.Header{{Name: top + "/", Typeflag: tar.TypeDir, Mode: 0o755}, {Name: top + "/" + name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(body))}} {
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := tw.Write([]byte(body)); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return raw.Bytes()
}

// TestCheckoutBase: the stand-in serves the base's archive at the base
// sha and the head's at the head, answers 404 at a base it was given no
// archive for, and counts each sha's downloads.
func TestCheckoutBase(t *testing.T) {
	const head, base = "1111111111111111111111111111111111111111", "2222222222222222222222222222222222222222"
	e := newEnv(t, githubtest.Options{HeadSHA: head, BaseSHA: base,
		Tarball: oneFileTarball(t, "o-r-1111111", "which", "head")}, nil)
	pr, err := e.c.PullRequest(context.Background(), e.repo, 1347)
	if err != nil || pr.BaseSHA != base {
		t.Fatalf("pull request base sha %q, %v; want %s", pr.BaseSHA, err, base)
	}
	if _, err := e.c.Checkout(context.Background(), e.repo, base, t.TempDir()); err == nil {
		t.Error("a base with no archive was checked out")
	}
	e.srv.SetBaseTarball(oneFileTarball(t, "o-r-2222222", "which", "base"))
	for sha, want := range map[string]string{head: "head", base: "base"} {
		root, err := e.c.Checkout(context.Background(), e.repo, sha, t.TempDir())
		if err != nil {
			t.Fatalf("check out %s: %v", sha, err)
		}
		if got, err := os.ReadFile(filepath.Join(root, "which")); err != nil || string(got) != want {
			t.Errorf("archive at %s holds %q, %v; want %q", sha, got, err, want)
		}
	}
	if n, m := e.srv.TarballRequests(base), e.srv.TarballRequests(head); n != 2 || m != 1 {
		t.Errorf("tarball requests: base %d, head %d; want 2 and 1", n, m)
	}
}
