package main

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gilf-review/gilf/dashboard"
	"github.com/gilf-review/gilf/evidence"
	"github.com/gilf-review/gilf/internal/s3test"
)

// The dashboard opens evidence in the store serve wires: from S3, a 303
// to a presigned GET that fetches the stored bytes from a real S3 server;
// from the filesystem store, the bytes themselves.
func TestDashboardOpensEvidence(t *testing.T) {
	const bucket = "gilf-evidence"
	const tok = "0123456789abcdef-dashboard"
	s3srv := s3test.Start(t, bucket)
	log := slog.New(slog.DiscardHandler)
	s3store, err := evidence.NewS3Store(t.Context(), evidence.S3Options{Bucket: bucket, Endpoint: s3srv.Endpoint(),
		Region: evidence.DefaultS3Region, PathStyle: true, Credentials: s3srv.Credentials()}, log)
	if err != nil {
		t.Fatal(err)
	}
	fsstore, err := evidence.NewFSStore(t.TempDir(), evidence.FSOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer fsstore.Close()
	obj := evidence.Object{Key: "review-artifacts/o%2Fr/sha/evidence/1/log/out.txt", Kind: evidence.KindLog, Body: []byte("FAIL test 3\n")}
	db := newTestStore(t, nil)
	client := &http.Client{Timeout: 10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func(u string, auth bool) (*http.Response, string) {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, u, nil)
		if auth {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	for name, ev := range map[string]evidence.Store{"s3": s3store, "fs": fsstore} {
		ref, err := ev.Put(t.Context(), obj)
		if err != nil {
			t.Fatal(err)
		}
		dash, err := newDashboard(DashboardConfig{Token: NewSecret(tok)}, nil, db, ev, log)
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(dash)
		resp, body := get(srv.URL+dashboard.EvidencePath(ref.Key), true)
		if name == "s3" {
			loc := resp.Header.Get("Location")
			if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(loc, s3srv.Endpoint()+"/") || !strings.Contains(loc, "X-Amz-Expires=300") {
				t.Fatalf("s3: %d to %q", resp.StatusCode, loc)
			}
			resp, body = get(loc, false)
		}
		if resp.StatusCode != http.StatusOK || body != "FAIL test 3\n" {
			t.Errorf("%s: %d %q", name, resp.StatusCode, body)
		}
		if resp, _ := get(srv.URL+dashboard.EvidencePath(ref.Key), false); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s without the token: %d", name, resp.StatusCode)
		}
		srv.Close()
	}
	if dashboardEvidence(nil) != nil {
		t.Error("no evidence store, yet an opener")
	}
}
