package review

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gilf-review/gilf/evidence"
	"github.com/gilf-review/gilf/executors"
	"github.com/gilf-review/gilf/executors/executortest"
	"github.com/gilf-review/gilf/validation"
)

// A command holding a worker secret is never run: the record is refused
// with command_redacted and the executor is not called.
func TestValidateRefusesARedactedCommand(t *testing.T) {
	secret := validation.Secret{Name: "GILF_GITHUB_TOKEN", Value: "ghs_0123456789abcdefghij"}
	fake := &executortest.Fake{ExecName: executors.NameLocal}
	plan := validation.Plan{Steps: []validation.Step{
		{Name: validation.StepInstall, Argv: []string{"npm", "ci"}, Network: validation.NetworkRegistry},
		{Name: validation.StepTest, Argv: []string{"npm", "run", "test", "--", secret.Value}},
	}}
	dir := t.TempDir()
	rec, err := Validate(t.Context(), fake, executors.Request{Plan: plan, Dir: dir, Root: dir, Secrets: []validation.Secret{secret}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Outcome != validation.OutcomeRefused || rec.Refusal == nil || rec.Refusal.Code != validation.CodeCommandRedacted {
		t.Fatalf("record %+v, want refused with command_redacted", rec)
	}
	if n := len(fake.Requests()); n != 0 {
		t.Errorf("the executor ran %d times", n)
	}
	if len(rec.Controls) != 1 || rec.Controls[0].Control != validation.ControlRedaction || rec.Controls[0].Passed {
		t.Errorf("decisions %+v, want the redaction control's refusal recorded", rec.Controls)
	}
	// The same plan without the secret runs.
	plan.Steps[1].Argv = []string{"npm", "run", "test"}
	rec, err = Validate(t.Context(), fake, executors.Request{Plan: plan, Dir: dir, Root: dir, Secrets: []validation.Secret{secret}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Every decision is recorded, passed or not.
	var passed []string
	for _, d := range rec.Controls {
		if d.Passed {
			passed = append(passed, d.Control)
		}
	}
	if strings.Join(passed, ",") != "redaction,command-root,executor" {
		t.Errorf("decisions %+v", rec.Controls)
	}
	if n := len(fake.Requests()); n != 1 {
		t.Errorf("a clean plan ran %d times, want 1", n)
	}
}

// The command root control: a checkout that is not inside its declared
// root, through a prefix sibling or a symlink, is refused as an escape;
// an undeclared or unresolvable root as unknown. Nothing runs.
func TestValidateCommandRoot(t *testing.T) {
	base := t.TempDir()
	root := filepath.Join(base, "repo")
	sibling := filepath.Join(base, "repo-evil")
	for _, d := range []string{filepath.Join(root, "top"), sibling} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(sibling, filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	plan := validation.Plan{Steps: []validation.Step{{Name: validation.StepTest, Argv: []string{"npm", "run", "test"}}}}
	tests := []struct {
		name      string
		root, dir string
		want      validation.Code
	}{
		{"inside", root, filepath.Join(root, "top"), ""},
		{"the root itself", root, root, ""},
		{"prefix sibling", root, sibling, validation.CodeCommandRootEscape},
		{"symlink out", root, filepath.Join(root, "link"), validation.CodeCommandRootEscape},
		{"undeclared", "", filepath.Join(root, "top"), validation.CodeCommandRootUnknown},
		{"unresolvable", root, filepath.Join(root, "missing"), validation.CodeCommandRootUnknown},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := &executortest.Fake{ExecName: executors.NameLocal}
			rec, err := Validate(t.Context(), fake, executors.Request{Plan: plan, Dir: tt.dir, Root: tt.root}, nil)
			if err != nil {
				t.Fatal(err)
			}
			ran := len(fake.Requests()) == 1
			switch {
			case tt.want == "" && (!ran || rec.Refusal != nil):
				t.Errorf("refused %+v, want it run", rec.Refusal)
			case tt.want != "" && (ran || rec.Refusal == nil || rec.Refusal.Code != tt.want):
				t.Errorf("ran %v, refusal %+v; want %s and nothing run", ran, rec.Refusal, tt.want)
			}
		})
	}
	if !validation.WithinRoot("/srv/repo", "/srv/repo/a") || validation.WithinRoot("/srv/repo", "/srv/repo-evil") || validation.WithinRoot("/srv/repo", "/srv") || !validation.WithinRoot("/", "/x") {
		t.Error("WithinRoot")
	}
}

// The secret-leak control finds a secret in text about to leave, in any
// encoding the redactor knows, redacts it, and names it with its offset,
// never its value.
func TestGuardOutput(t *testing.T) {
	secret := validation.Secret{Name: "GILF_WEBHOOK_SECRET", Value: "whsec_0123456789abcdef"}
	clean, d := GuardOutput("all good", []validation.Secret{secret})
	if clean != "all good" || !d.Passed || d.Control != validation.ControlSecretLeak {
		t.Errorf("clean text: %q %+v", clean, d)
	}
	text := "title\nthe value " + secret.Value + " and again d2hzZWNfMDEyMzQ1Njc4OWFiY2RlZg=="
	out, d := GuardOutput(text, []validation.Secret{secret})
	if d.Passed || d.Code != validation.CodeSecretLeak || !strings.Contains(d.Detail, "GILF_WEBHOOK_SECRET at offset 16") {
		t.Errorf("decision %+v", d)
	}
	if strings.Contains(out, secret.Value) || strings.Contains(out, "d2hzZWNf") || strings.Contains(d.Detail, secret.Value) {
		t.Errorf("the value left: %q / %q", out, d.Detail)
	}
}

type memStore struct{ puts map[string][]byte }

func (m *memStore) Put(_ context.Context, obj evidence.Object) (validation.EvidenceRef, error) {
	m.puts[obj.Key] = obj.Body
	return validation.EvidenceRef{Kind: string(obj.Kind), Key: obj.Key}, nil
}

// Evidence is scanned before it is stored: a text body is stored
// redacted, a binary one is not stored, and the decision names the secret
// and the offset, never the value.
func TestLeakGuardBeforeStoring(t *testing.T) {
	secret := validation.Secret{Name: "GILF_WEBHOOK_SECRET", Value: "whsec_0123456789abcdef"}
	store := &memStore{puts: map[string][]byte{}}
	g := &leakGuard{Store: store, secrets: []validation.Secret{secret}}
	if _, err := g.Put(t.Context(), evidence.Object{Key: "clean", ContentType: "text/plain", Body: []byte("fine")}); err != nil {
		t.Fatal(err)
	}
	if d := g.decision(); !d.Passed {
		t.Errorf("clean bodies: %+v", d)
	}
	if _, err := g.Put(t.Context(), evidence.Object{Key: "log", Kind: "test-output", ContentType: "text/plain; charset=utf-8", Body: []byte("leaked " + secret.Value)}); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Put(t.Context(), evidence.Object{Key: "shot", Kind: "screenshot", ContentType: "image/png", Body: []byte("\x89PNG" + secret.Value)}); err == nil {
		t.Error("a binary body holding a secret was stored")
	}
	if b := string(store.puts["log"]); strings.Contains(b, secret.Value) || !strings.Contains(b, "leaked ") {
		t.Errorf("stored text %q", b)
	}
	if _, ok := store.puts["shot"]; ok {
		t.Error("the binary body reached the store")
	}
	d := g.decision()
	if d.Passed || d.Code != validation.CodeSecretLeak || !strings.Contains(d.Detail, "GILF_WEBHOOK_SECRET in test-output at offset 7") || strings.Contains(d.Detail, secret.Value) {
		t.Errorf("decision %+v", d)
	}
}
