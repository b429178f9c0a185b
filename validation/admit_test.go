package validation

import (
	"strings"
	"testing"
)

func TestAdmitCommands(t *testing.T) {
	secret := Secret{Name: "NPM_TOKEN", Value: "npm_abcdefghijklmnop"}
	plan := func(argv ...string) Plan {
		return Plan{Steps: []Step{{Name: StepInstall, Argv: []string{"npm", "ci"}}, {Name: StepTest, Argv: argv}}}
	}
	if r := AdmitCommands(plan("npm", "run", "test"), []Secret{secret}); r != nil {
		t.Errorf("a clean plan refused: %v", r)
	}
	r := AdmitCommands(plan("npm", "run", "test", "--token="+secret.Value), []Secret{secret})
	if r == nil || r.Code != CodeCommandRedacted {
		t.Fatalf("a command holding a secret: %v, want command_redacted", r)
	}
	if !contains(r.Msg, "NPM_TOKEN") || contains(r.Msg, secret.Value) {
		t.Errorf("refusal %q: want the name, never the value", r.Msg)
	}
	// In another encoding, and split across arguments it is not: the
	// value must be whole in one argument or across the joint.
	if r := AdmitCommands(plan("sh", "-c", "echo bnBtX2FiY2RlZmdoaWprbG1ub3A="), []Secret{secret}); r == nil {
		t.Error("a base64 form of the secret passed")
	}
	// Values too short to be secrets are not looked for.
	if r := AdmitCommands(plan("npm", "run", "test"), []Secret{{Name: "SHORT", Value: "npm"}}); r != nil {
		t.Errorf("a short value refused the plan: %v", r)
	}
	// An inconclusive step never runs: not a reason to refuse.
	p := plan("echo", secret.Value)
	p.Steps[1].Inconclusive = "a bare echo"
	if r := AdmitCommands(p, []Secret{secret}); r != nil {
		t.Errorf("an inconclusive step refused the plan: %v", r)
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
