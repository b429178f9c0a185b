package githubtest

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// tokenServer starts a server and mints a token for Hello-World.
func tokenServer(t *testing.T) (*Server, string) {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	srv := New(t, Options{AppID: 7, PublicKey: &key.PublicKey, Now: func() time.Time { return now }})
	code, m := do(t, "POST", srv.URL+"app/installations/1/access_tokens",
		"Bearer "+signed(t, key, "7", now.Add(-time.Minute), now.Add(9*time.Minute)), `{"repositories":["Hello-World"]}`)
	if code != 201 {
		t.Fatalf("mint: %d %v", code, m)
	}
	return srv, "Bearer " + m["token"].(string)
}

func annotationsJSON(n int) string {
	var as []map[string]any
	for i := range n {
		as = append(as, map[string]any{"path": "a.js", "start_line": i + 1, "end_line": i + 1, "annotation_level": "warning", "message": fmt.Sprint(i)})
	}
	b, _ := json.Marshal(as)
	return string(b)
}

// TestServerCheckRunUpdates: PATCH merges and appends like GitHub, and
// refuses more than 50 annotations in one request.
func TestServerCheckRunUpdates(t *testing.T) {
	srv, tok := tokenServer(t)
	base := srv.URL + "repos/octocat/Hello-World/check-runs"
	code, cr := do(t, "POST", base, tok, `{"name":"gilf","head_sha":"abc","external_id":"1","status":"queued"}`)
	if code != 201 || cr["status"] != "queued" || cr["conclusion"] != nil || cr["completed_at"] != nil {
		t.Fatalf("create: %d %v", code, cr)
	}
	id := int64(cr["id"].(float64))
	run := fmt.Sprintf("%s/%d", base, id)
	patch := func(body string) (int, map[string]any) { return do(t, "PATCH", run, tok, body) }
	out := func(n int) string {
		return `{"output":{"title":"t","summary":"s","annotations":` + annotationsJSON(n) + `}}`
	}
	var codes []int
	for _, body := range []string{
		out(50),                    // 200: at the limit
		out(51),                    // 422: over it, nothing appended
		`{"output":{"title":"t"}}`, // 422: output needs a summary
		`{"status":"completed"}`,   // 422: completed needs a conclusion
		`{"conclusion":"bogus"}`,   // 422
		out(1),                     // 200
		`{"conclusion":"success"}`, // 200: a conclusion completes
		`{"output":{"title":"t2","summary":"s2","text":"x"}}`, // 200: output replaced, annotations kept
	} {
		c, _ := patch(body)
		codes = append(codes, c)
	}
	if want := []int{200, 422, 422, 422, 422, 200, 200, 200}; !slices.Equal(codes, want) {
		t.Errorf("statuses %v, want %v", codes, want)
	}
	code, got := do(t, "GET", run, tok, "")
	o := got["output"].(map[string]any)
	if code != 200 || got["status"] != "completed" || got["conclusion"] != "success" || got["completed_at"] == nil ||
		o["annotations_count"] != float64(51) || o["title"] != "t2" || o["text"] != "x" || o["annotations"] != nil ||
		!strings.HasSuffix(o["annotations_url"].(string), fmt.Sprintf("/check-runs/%d/annotations", id)) {
		t.Errorf("GET: %d %v", code, got)
	}
	if n := len(srv.Annotations(id)); n != 51 {
		t.Errorf("%d annotations stored", n)
	}
	if c := srv.Completions(id); c != 1 {
		t.Errorf("%d completions", c)
	}
	if code, _ := do(t, "GET", base+"/999999", tok, ""); code != 404 {
		t.Errorf("unknown run: %d", code)
	}
	if code, _ := do(t, "POST", base, tok, `{"name":"gilf","head_sha":"abc","output":{"title":"t","summary":"s","annotations":`+annotationsJSON(51)+`}}`); code != 422 {
		t.Errorf("create with 51 annotations: %d", code)
	}
	// Faults reach the new endpoints, after Skip requests.
	srv.Fail(UpdateCheckRun, Fault{Kind: Status, Status: 502, Skip: 1})
	c1, _ := patch(out(1))
	c2, _ := patch(out(1))
	c3, _ := patch(out(1))
	if c1 != 200 || c2 != 502 || c3 != 200 {
		t.Errorf("skip fault: %d %d %d", c1, c2, c3)
	}
}

// TestServerReviewEdits: PUT edits a body; dismissals only for reviews
// that request changes or approve.
func TestServerReviewEdits(t *testing.T) {
	srv, tok := tokenServer(t)
	reviews := srv.URL + "repos/octocat/Hello-World/pulls/1347/reviews"
	_, comment := do(t, "POST", reviews, tok, `{"body":"a","event":"COMMENT","commit_id":"abc"}`)
	_, changes := do(t, "POST", reviews, tok, `{"body":"b","event":"REQUEST_CHANGES","commit_id":"abc"}`)
	cid, rid := int64(comment["id"].(float64)), int64(changes["id"].(float64))
	if code, rv := do(t, "PUT", fmt.Sprintf("%s/%d", reviews, cid), tok, `{"body":"edited"}`); code != 200 || rv["body"] != "edited" {
		t.Errorf("update: %d %v", code, rv)
	}
	if code, _ := do(t, "PUT", fmt.Sprintf("%s/%d", reviews, cid), tok, `{}`); code != 422 {
		t.Errorf("update without body: %d", code)
	}
	if code, _ := do(t, "PUT", reviews+"/424242", tok, `{"body":"x"}`); code != 404 {
		t.Errorf("update unknown: %d", code)
	}
	if code, rv := do(t, "PUT", fmt.Sprintf("%s/%d/dismissals", reviews, cid), tok, `{"message":"m"}`); code != 422 || !strings.Contains(rv["message"].(string), "commented") {
		t.Errorf("dismiss a comment: %d %v", code, rv)
	}
	if code, _ := do(t, "PUT", fmt.Sprintf("%s/%d/dismissals", reviews, rid), tok, `{}`); code != 422 {
		t.Errorf("dismiss without message: %d", code)
	}
	if code, rv := do(t, "PUT", fmt.Sprintf("%s/%d/dismissals", reviews, rid), tok, `{"message":"m","event":"DISMISS"}`); code != 200 || rv["state"] != "DISMISSED" {
		t.Errorf("dismiss: %d %v", code, rv)
	}
	if code, _ := do(t, "PUT", fmt.Sprintf("%s/%d/dismissals", reviews, rid), tok, `{"message":"m"}`); code != 422 {
		t.Errorf("dismiss twice: %d", code)
	}
	if got := srv.ReviewBodies(); !slices.Equal(got, []string{"edited", "b"}) {
		t.Errorf("bodies %q", got)
	}
	if d := srv.Dismissals(); len(d) != 1 || d[0].ReviewID != rid || d[0].Message != "m" {
		t.Errorf("dismissals %+v", d)
	}
	var seq []string
	for _, r := range srv.Requests()[1:] {
		seq = append(seq, r.Method+" "+string(r.Endpoint))
	}
	want := []string{"POST pulls/create-review", "POST pulls/create-review", "PUT pulls/update-review", "PUT pulls/update-review", "PUT pulls/update-review",
		"PUT pulls/dismiss-review", "PUT pulls/dismiss-review", "PUT pulls/dismiss-review", "PUT pulls/dismiss-review"}
	if !slices.Equal(seq, want) {
		t.Errorf("recorded %v", seq)
	}
}
