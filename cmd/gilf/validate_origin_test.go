package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gilf-review/gilf/validation"
)

// These tests run gilf validate on real checkouts with the local executor
// (bubblewrap): the base and the head are copies of examples/hello.

const (
	oldFailingTest = "'use strict';\nconst test = require('node:test');\nconst assert = require('node:assert/strict');\n\n" +
		"test('old failing test', () => {\n  assert.equal(1, 2);\n});\n"
	newFailingTest = "'use strict';\nconst test = require('node:test');\nconst assert = require('node:assert/strict');\n\n" +
		"test('new failing test', () => {\n  assert.equal(3, 4);\n});\n"
	// trailingSpace fails examples/hello's lint.
	trailingSpace = "'use strict';\nmodule.exports = 1; \n"
)

// failingBase is examples/hello with one failing test and a lint problem.
func failingBase(t *testing.T, more map[string]string) string {
	t.Helper()
	edits := map[string]string{"test/old.test.js": oldFailingTest, "src/trailing.js": trailingSpace}
	for k, v := range more {
		edits[k] = v
	}
	return copyHello(t, edits)
}

// originView is what these tests read of gilf validate --json.
type originView struct {
	Outcome string `json:"outcome"`
	Steps   []struct {
		Name     string                   `json:"name"`
		Status   string                   `json:"status"`
		Origin   string                   `json:"origin"`
		Failures []validation.StepFailure `json:"failures"`
	} `json:"steps"`
	Base     *validation.BaseRun `json:"base"`
	Findings []struct {
		Step string `json:"step"`
		Body string `json:"body"`
	} `json:"findings"`
}

func readOrigin(t *testing.T, r result) originView {
	t.Helper()
	var v originView
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
		t.Fatalf("--json output: %v\n%s\nstderr:\n%s", err, r.stdout, r.stderr)
	}
	return v
}

// origins is step → origin, and step → failure name → origin.
func origins(v originView) (map[string]string, map[string]map[string]string) {
	steps, failures := map[string]string{}, map[string]map[string]string{}
	for _, s := range v.Steps {
		steps[s.Name] = s.Origin
		for _, f := range s.Failures {
			if failures[s.Name] == nil {
				failures[s.Name] = map[string]string{}
			}
			failures[s.Name][f.Name] = string(f.Origin)
		}
	}
	return steps, failures
}

// TestValidateBaseOrigins: the base already fails one test and the lint
// step; the head adds one failing test. The test step is introduced, its
// old test preexisting and its new one introduced; lint is preexisting;
// the passing steps have no origin. Exit 1: something is introduced.
func TestValidateBaseOrigins(t *testing.T) {
	base := failingBase(t, nil)
	head := failingBase(t, map[string]string{"test/zz-new.test.js": newFailingTest}) // after old in the output
	r := gilf(t, nil, "validate", "--json", "--base", base, head)
	r.want(t, exitFailed)
	v := readOrigin(t, r)
	steps, failures := origins(v)
	if d := cmp.Diff(map[string]string{"install": "", "test": "introduced", "lint": "preexisting", "build": ""}, steps); d != "" {
		t.Errorf("step origins (-want +got):\n%s", d)
	}
	want := map[string]map[string]string{"test": {"old failing test": "preexisting", "new failing test": "introduced"}}
	if d := cmp.Diff(want, failures); d != "" {
		t.Errorf("failure origins (-want +got):\n%s", d)
	}
	// The test step's excerpt quotes the introduced failure first.
	for _, f := range v.Findings {
		if f.Step == "test" {
			if n, o := strings.Index(f.Body, "new failing test"), strings.Index(f.Body, "old failing test"); n < 0 || o < 0 || n > o {
				t.Errorf("the test step's excerpt does not quote the new failure first:\n%s", f.Body)
			}
		}
	}
	if v.Base == nil || v.Base.Path != base || v.Base.Outcome != validation.OutcomeFailed || v.Base.Reused || len(v.Base.Steps) != 3 {
		t.Fatalf("base %+v, want the path, failed, not reused, with install, test and lint", v.Base)
	}
	if got := []string{v.Base.Steps[0].Name, v.Base.Steps[1].Name, v.Base.Steps[2].Name}; !cmp.Equal(got, []string{"install", "test", "lint"}) {
		t.Errorf("base ran %v, want install and the failed steps", got)
	}
}

// TestValidateOnlyBaseFailures: a head that fails only as its base does
// exits 0, and the review says why: every failure is already failing on
// the base, none introduced.
func TestValidateOnlyBaseFailures(t *testing.T) {
	base := failingBase(t, nil)
	head := failingBase(t, nil)
	r := gilf(t, nil, "validate", "--base", base, head)
	r.want(t, exitOK,
		"## gilf validation: ⚠️ failed, but not because of this pull request",
		"<summary>Already failing on "+base+" (2)</summary>",
		"Every failure was already failing on `"+base+"`",
		"⏮️ `old failing test`",
	)
	if strings.Contains(r.stdout, "### Introduced by this pull request") {
		t.Errorf("the review lists introduced failures:\n%s", r.stdout)
	}
	if !strings.Contains(r.stderr, "gilf: Steps failed; gilf is comparing with") {
		t.Errorf("stderr does not say the comparison runs:\n%s", r.stderr)
	}
}

// TestValidateFlakyRetry: without --base, a failed step runs once more in
// a fresh sandbox. The typecheck step here fails only after the test step
// left a stamp in the workspace; the retry runs it without, it passes:
// flaky, and gilf validate exits 0.
func TestValidateFlakyRetry(t *testing.T) {
	head := copyHello(t, map[string]string{
		"package.json": `{
  "name": "hello",
  "version": "1.0.0",
  "private": true,
  "scripts": {
    "test": "node --test",
    "typecheck": "node --test scripts/order.js"
  }
}
`,
		"test/stamp.test.js": "'use strict';\nconst test = require('node:test');\nconst fs = require('node:fs');\n\n" +
			"test('leaves a stamp', () => {\n  fs.writeFileSync('.stamp', 'x');\n});\n",
		"scripts/order.js": "'use strict';\nconst test = require('node:test');\nconst assert = require('node:assert/strict');\nconst fs = require('node:fs');\n\n" +
			"test('runs before the stamp', () => {\n  assert.equal(fs.existsSync('.stamp'), false);\n});\n",
	})
	r := gilf(t, nil, "validate", "--json", head)
	r.want(t, exitOK)
	v := readOrigin(t, r)
	steps, failures := origins(v)
	if d := cmp.Diff(map[string]string{"install": "", "test": "", "typecheck": "flaky"}, steps); d != "" {
		t.Errorf("step origins (-want +got):\n%s", d)
	}
	if d := cmp.Diff(map[string]map[string]string{"typecheck": {"runs before the stamp": "flaky"}}, failures); d != "" {
		t.Errorf("failure origins (-want +got):\n%s", d)
	}
	if v.Outcome != "failed" || v.Base == nil || v.Base.Reason != "no --base was given" {
		t.Errorf("outcome %s, base %+v; want failed, not compared for want of --base", v.Outcome, v.Base)
	}
}

// TestValidateBaseInstallFails: a base whose install fails cannot tell
// whose the head's failures are: unknown, and exit 1.
func TestValidateBaseInstallFails(t *testing.T) {
	base := failingBase(t, map[string]string{"package-lock.json": "{ not json"})
	head := failingBase(t, nil)
	r := gilf(t, nil, "validate", "--json", "--base", base, head)
	r.want(t, exitFailed)
	v := readOrigin(t, r)
	steps, _ := origins(v)
	if d := cmp.Diff(map[string]string{"install": "", "test": "unknown", "lint": "unknown", "build": ""}, steps); d != "" {
		t.Errorf("step origins (-want +got):\n%s", d)
	}
	if v.Base == nil || len(v.Base.Steps) == 0 || v.Base.Steps[0].Status != validation.StatusFailed {
		t.Errorf("base %+v, want its install failed", v.Base)
	}
	if _, err := os.Stat(filepath.Join(base, "node_modules")); err == nil {
		t.Error("the base directory was written to")
	}
}
