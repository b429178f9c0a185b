package githubtest

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestServerReviewComments: comments[] posted with a review are kept in
// GitHub's shape; one without a path, line or body fails the whole
// review with 422 and creates nothing.
func TestServerReviewComments(t *testing.T) {
	srv, tok := tokenServer(t)
	reviews := srv.URL + "repos/octocat/Hello-World/pulls/1347/reviews"
	code, rv := do(t, "POST", reviews, tok, `{"body":"c","event":"COMMENT","commit_id":"abc","comments":[`+
		`{"path":"a.js","line":3,"side":"RIGHT","body":"one"},{"path":"b/c.go","line":12,"body":"two"}]}`)
	if code != 200 {
		t.Fatalf("create: %d %v", code, rv)
	}
	want := []map[string]any{
		{"path": "a.js", "line": 3, "side": "RIGHT", "body": "one"},
		{"path": "b/c.go", "line": 12, "side": "RIGHT", "body": "two"},
	}
	if diff := cmp.Diff(want, srv.ReviewComments(int64(rv["id"].(float64)))); diff != "" {
		t.Errorf("comments (-want +got):\n%s", diff)
	}
	for name, comment := range map[string]string{
		"no path":       `{"line":3,"body":"x"}`,
		"no line":       `{"path":"a.js","body":"x"}`,
		"line 0":        `{"path":"a.js","line":0,"body":"x"}`,
		"no body":       `{"path":"a.js","line":3}`,
		"unknown side":  `{"path":"a.js","line":3,"side":"UP","body":"x"}`,
		"not an object": `"a.js:3"`,
	} {
		t.Run(name, func(t *testing.T) {
			n := len(srv.Reviews())
			code, _ := do(t, "POST", reviews, tok, `{"body":"c","event":"COMMENT","comments":[{"path":"ok.js","line":1,"body":"fine"},`+comment+`]}`)
			if code != 422 || len(srv.Reviews()) != n {
				t.Errorf("answered %d, %d reviews (had %d)", code, len(srv.Reviews()), n)
			}
		})
	}
	if code, rv := do(t, "POST", reviews, tok, `{"body":"plain","event":"COMMENT"}`); code != 200 || srv.ReviewComments(int64(rv["id"].(float64))) != nil {
		t.Errorf("a review without comments: %d", code)
	}
}
