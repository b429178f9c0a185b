package webhook_test

import (
	"context"
	"strings"
	"testing"

	"github.com/gilf-review/gilf/store"
	"github.com/gilf-review/gilf/validation"
	"github.com/gilf-review/gilf/webhook"
)

// commentOn derives the real issue_comment created payload: a comment on
// pull request 1 (issue.pull_request set) with body, by a user of type.
func commentOn(t *testing.T, body, userType string, isPR bool) []byte {
	return derive(t, "issue_comment", "created", func(m map[string]any) {
		issue := m["issue"].(map[string]any)
		if isPR {
			issue["pull_request"] = map[string]any{"url": "https://api.github.com/repos/Codertocat/Hello-World/pulls/1"}
		}
		c := m["comment"].(map[string]any)
		c["body"] = body
		c["user"].(map[string]any)["type"] = userType
		m["installation"] = map[string]any{"id": 5}
	})
}

// A command on a pull request is recorded as queued with no job (the
// command worker reads it back); everything else is ignored.
func TestIssueCommentCommands(t *testing.T) {
	tests := []struct {
		name   string
		cfg    webhook.Config
		body   []byte
		status validation.DeliveryStatus
		reason string
	}{
		{"slash command", webhook.Config{Commands: true}, commentOn(t, "/gilf rerun", "User", true), validation.DeliveryQueued, "command rerun by @Codertocat"},
		{"mention", webhook.Config{Commands: true, AppSlug: "gilf-review"}, commentOn(t, "@gilf-review explain test\nthanks", "User", true), validation.DeliveryQueued, "command explain"},
		{"mention of another app", webhook.Config{Commands: true, AppSlug: "gilf-review"}, commentOn(t, "@other rerun", "User", true), validation.DeliveryIgnored, "not a gilf command"},
		{"commands off", webhook.Config{}, commentOn(t, "/gilf rerun", "User", true), validation.DeliveryIgnored, "commands in comments are off"},
		{"a bot, gilf itself included", webhook.Config{Commands: true}, commentOn(t, "/gilf rerun", "Bot", true), validation.DeliveryIgnored, "by a bot"},
		{"on an issue", webhook.Config{Commands: true}, commentOn(t, "/gilf rerun", "User", false), validation.DeliveryIgnored, "not a pull request"},
		{"an ordinary comment", webhook.Config{Commands: true}, commentOn(t, "Looks good to me", "User", true), validation.DeliveryIgnored, "not a gilf command"},
		{"an installation not in the allowlist", webhook.Config{Commands: true, Allow: webhook.Allowlist{Installations: []int64{6}}}, commentOn(t, "/gilf rerun", "User", true), validation.DeliveryIgnored, "not in the allowlist"},
		{"an installation in the allowlist", webhook.Config{Commands: true, Allow: webhook.Allowlist{Installations: []int64{5}}}, commentOn(t, "/gilf rerun", "User", true), validation.DeliveryQueued, "command rerun"},
		{"edited", webhook.Config{Commands: true}, realPayload(t, "issue_comment", "edited"), validation.DeliveryIgnored, `action "edited"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, tt.cfg, store.Options{})
			id := e.nextID()
			a := e.send(t, "issue_comment", id, tt.body, nil)
			if a.code != 202 || a.body.Job != 0 {
				t.Fatalf("answer %d %+v, want 202 and no job", a.code, a.body)
			}
			d, err := e.db.Delivery(context.Background(), id)
			if err != nil {
				t.Fatal(err)
			}
			if d.Status != tt.status || !strings.Contains(d.Reason, tt.reason) {
				t.Errorf("recorded %q %q, want %q with %q", d.Status, d.Reason, tt.status, tt.reason)
			}
			if tt.status == validation.DeliveryQueued && (d.PR != 1 || d.Repo != "Codertocat/Hello-World" || d.InstallationID != 5) {
				t.Errorf("recorded %+v, want PR 1 of Codertocat/Hello-World, installation 5", d.Delivery)
			}
		})
	}
}
