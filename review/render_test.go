package review

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/gilf-review/gilf/validation"
)

// updateGolden rewrites testdata/render/*.md: go test ./review -run Render -update
var updateGolden = registerUpdateFlag()

func registerUpdateFlag() *bool {
	if f := flag.Lookup("update"); f != nil {
		if g, ok := f.Value.(flag.Getter); ok {
			if b, ok := g.Get().(bool); ok {
				v := b
				return &v
			}
		}
	}
	return flag.Bool("update", false, "rewrite golden files")
}

func intp(i int) *int { return &i }

var t0 = time.Date(2026, 3, 14, 9, 26, 53, 0, time.UTC)

func step(name string, argv []string, status validation.Status, exit *int, d time.Duration, out string) validation.StepResult {
	net := validation.NetworkNone
	eg := &validation.Egress{Network: validation.NetworkNone, Enforcement: validation.EnforcedByKernel, Observed: true}
	if name == validation.StepInstall {
		net = validation.NetworkRegistry
		eg = &validation.Egress{
			Network: validation.NetworkRegistry, Enforcement: validation.EnforcedByWorker, Observed: true,
			AllowList: []string{"registry.npmjs.org"},
			Allowed:   []validation.EgressHost{{Host: "registry.npmjs.org", Port: 443, Connections: 3, BytesOut: 2100, BytesIn: 48000}},
		}
	}
	s := validation.StepResult{
		Name: name, Argv: argv, Cwd: "/workspace", TimeoutMs: 600000, Network: net,
		Status: status, ExitCode: exit, Duration: d, DurationMs: d.Milliseconds(),
	}
	if status != validation.StatusNotRun && status != validation.StatusInconclusive {
		s.Egress = eg
	}
	if out != "" {
		s.Output = validation.Output{Head: out, Bytes: int64(len(out))}
	}
	return s
}

func baseRecord() validation.Record {
	return validation.Record{
		Executor:       "local",
		IsolationTier:  validation.TierNoNetwork,
		PackageManager: validation.NPM,
		Platform:       validation.Platform{OS: "linux", Arch: "amd64", Kernel: "6.1.0-18-amd64", Node: "v20.20.2", PackageManagerVersion: "11.19.1"},
		Started:        t0,
		Finished:       t0.Add(4200 * time.Millisecond),
		Findings:       []validation.Finding{},
	}
}

func passedRecord() validation.Record {
	r := baseRecord()
	r.Outcome = validation.OutcomePassed
	r.Steps = []validation.StepResult{
		step("install", []string{"npm", "ci"}, validation.StatusPassed, intp(0), 900*time.Millisecond, "\nup to date, audited 1 package in 300ms\n"),
		step("test", []string{"npm", "run", "test"}, validation.StatusPassed, intp(0), 1500*time.Millisecond, "# tests 3\n# pass 3\n# fail 0\n"),
		step("lint", []string{"npm", "run", "lint"}, validation.StatusPassed, intp(0), 300*time.Millisecond, ""),
	}
	r.SecretsWithheld = []string{"GITHUB_TOKEN", "GILF_WEBHOOK_SECRET"}
	r.Notes = []string{"executor local chosen by GILF_VALIDATION_EXECUTOR"}
	return r
}

func failedRecord() validation.Record {
	r := baseRecord()
	r.Outcome = validation.OutcomeFailed
	r.Reason = "1 step failed: test"
	failOut := "not ok 1 - adds\n  ---\n  error: 'Expected values to be strictly equal:\\n\\n3 !== 4\\n'\n  ...\n# tests 1\n# fail 1\n"
	r.Steps = []validation.StepResult{
		step("install", []string{"npm", "ci"}, validation.StatusPassed, intp(0), 800*time.Millisecond, "added 0 packages\n"),
		step("test", []string{"npm", "run", "test"}, validation.StatusFailed, intp(1), 1200*time.Millisecond, failOut),
		step("build", []string{"npm", "run", "build"}, validation.StatusTimedOut, nil, 10*time.Minute, "building…\n"),
	}
	r.Steps[2].Reason = "timed out after 10 min"
	// An install script that tried the cloud metadata address and a
	// registry the repository's .npmrc named.
	r.Steps[0].Egress.Denied = []validation.EgressDenial{
		{Host: "169.254.169.254", Port: 80, Reason: "not_allowed", Count: 2},
		{Host: "npm.evil.example", Port: 443, Reason: "not_allowed", Count: 1},
	}
	r.Findings = []validation.Finding{
		{Severity: validation.SeverityHigh, Step: "test", Title: "`test` failed (exit code 1)", Body: failOut, ExecutionClaim: true,
			EvidenceStatus: "unverified", DowngradedReason: "no evidence artifact was stored"},
		{Severity: validation.SeverityMedium, Step: "build", Title: "`build` timed out after 10 min", Body: "building…\n", ExecutionClaim: true,
			Evidence: []validation.EvidenceRef{{Kind: "build-output", Key: "review-artifacts/o%2Fr/abc/evidence/42/build-output/build.log"}}},
	}
	return r
}

func gapRecord() validation.Record {
	return validation.Record{
		Outcome: validation.OutcomeGap,
		Reason:  "no package.json",
		Gap:     &validation.Gap{Reason: validation.GapNoManifest, Msg: "package.json not found at the repository root"},
		Steps:   []validation.StepResult{},
	}
}

func refusedRecord() validation.Record {
	return validation.Record{
		Outcome:        validation.OutcomeRefused,
		Reason:         "executor managed-e2b (chosen by GILF_VALIDATION_EXECUTOR) is not configured on this worker",
		Refusal:        validation.Refuse(validation.CodeExecutorUnconfigured, "executor managed-e2b (chosen by GILF_VALIDATION_EXECUTOR) is not configured on this worker"),
		Executor:       "managed-e2b",
		PackageManager: validation.NPM,
		Steps: []validation.StepResult{
			{Name: "install", Argv: []string{"npm", "ci"}, Network: validation.NetworkRegistry, TimeoutMs: 600000, Status: validation.StatusNotRun, Reason: "not run"},
			{Name: "test", Argv: []string{"npm", "run", "test"}, Network: validation.NetworkNone, TimeoutMs: 600000, Status: validation.StatusNotRun, Reason: "not run"},
		},
		Findings: []validation.Finding{},
	}
}

func inconclusiveRecord() validation.Record {
	r := baseRecord()
	r.Outcome = validation.OutcomeInconclusive
	r.Reason = "every selected script is inconclusive: npm's default test script proves nothing"
	r.Steps = []validation.StepResult{
		step("install", []string{"npm", "install"}, validation.StatusPassed, intp(0), 700*time.Millisecond, "up to date\n"),
		{Name: "test", Argv: []string{"npm", "run", "test"}, Network: validation.NetworkNone, TimeoutMs: 600000,
			Status: validation.StatusInconclusive, Reason: `npm's default test script ("echo \"Error: no test specified\" && exit 1") proves nothing`},
	}
	r.Notes = []string{"no lockfile: install is `npm install`, not frozen"}
	return r
}

// hostileOutput is what a malicious pull request prints: a fence break,
// HTML, mentions, references, bidi overrides, terminal escapes, invalid
// UTF-8, and a lot of it.
func hostileOutput() string {
	var b strings.Builder
	b.WriteString("before\n````\n```\n</details>\n<img src=https://attacker.example/p.gif>\n## ✅ All checks passed\n")
	b.WriteString("cc @org/security-team @everyone-user see #1 and other/repo#5 mail me: a@b.example\n")
	b.WriteString("evil \u202eexe.txt\u202c \u2066isolate\u2069 \u200fmark\n")
	b.WriteString("\x1b]0;pwned title\x07\x1b[2J\x1b]8;;https://attacker.example\x1b\\link\x1b]8;;\x1b\\ \x1b]52;c;ZWNobyBoaQ==\x07\n")
	b.WriteString("bad utf8 \xff\xfe\xc3 nul \x00 bell \a cr\rlf\r\n")
	b.WriteString("[ok](javascript:alert(1)) <details><summary>x</summary>\n")
	for b.Len() < 100*1024 {
		b.WriteString("padding line with `ticks` and ``more`` and ```````seven``````` @x #2\n")
	}
	b.WriteString("THE END: assertion failed\n")
	return b.String()
}

func hostileRecord() validation.Record {
	r := baseRecord()
	r.Outcome = validation.OutcomeFailed
	r.Reason = "1 step failed: test <img src=x> @org/team #3"
	out := hostileOutput()
	r.Steps = []validation.StepResult{
		step("install", []string{"npm", "ci"}, validation.StatusPassed, intp(0), time.Second, out),
		step("test", []string{"npm", "run", "test"}, validation.StatusFailed, intp(1), 2*time.Second, out),
		step("lint", []string{"npm", "run", "li|nt`"}, validation.StatusKilled, nil, 3*time.Second, "\x1b[31mred\x1b[0m\n"),
	}
	r.Steps[0].Output.Redactions = 2
	r.Steps[2].Signal = "SIGKILL"
	r.Steps[2].Reported = true
	r.ReportedByExecutor = true
	r.Redactions = 2
	r.Platform.Node = "v20\u202e @node-team #7"
	r.Integrity = "duplicate END marker for test"
	r.Findings = []validation.Finding{{
		Severity: validation.SeverityHigh, Step: "test", Path: "src/@evil|path.js",
		Title: "test failed: ```` @org/team #4 <script>x</script> [x](https://attacker.example)", Body: out, ExecutionClaim: true,
	}}
	r.Notes = []string{"hook `pretest` runs first\nsecond line | @team #9 \u202e"}
	return r
}

func renderCases() []struct {
	name string
	rec  validation.Record
	opts RenderOptions
} {
	usd := 0.0123
	return []struct {
		name string
		rec  validation.Record
		opts RenderOptions
	}{
		{"passed", passedRecord(), RenderOptions{JobID: "42",
			Evidence: map[string][]EvidenceLine{"test": {{Kind: "test-output", Name: "test.log", URL: "https://evidence.example/review-artifacts/o/r/abc/test.log"}}},
			Costs:    []CostLine{{Lane: "primary", Executor: "local", Note: "no rate card for local"}}}},
		{"failed", failedRecord(), RenderOptions{JobID: "43",
			Evidence: map[string][]EvidenceLine{
				"build": {{Kind: "build-output", Name: "build.log", Key: "review-artifacts/o%2Fr/abc/evidence/43/build-output/build.log"}},
				"test":  {{Kind: "test-output", Name: "test.log", Note: "upload failed: 503 Slow Down"}},
			},
			Costs: []CostLine{{Lane: "primary", Executor: "managed-e2b", USD: &usd}, {Lane: "shadow", Executor: "managed-cf-sandbox"}}}},
		{"gap", gapRecord(), RenderOptions{JobID: "44"}},
		{"refused", refusedRecord(), RenderOptions{JobID: "45"}},
		{"inconclusive", inconclusiveRecord(), RenderOptions{}},
		{"hostile", hostileRecord(), RenderOptions{JobID: "46 --> <b>x</b>"}},
	}
}

func TestRenderGolden(t *testing.T) {
	for _, tc := range renderCases() {
		t.Run(tc.name, func(t *testing.T) {
			got := Render(tc.rec, tc.opts)
			checkBody(t, tc.rec, got)
			checkRenderGolden(t, tc.name, got)
		})
	}
}

var (
	mentionRe = regexp.MustCompile(`(^|[^A-Za-z0-9_])@[A-Za-z0-9]`)
	refRe     = regexp.MustCompile(`(^|[^\x{200b}])#[0-9]`)
	ourTagRe  = regexp.MustCompile(`^<(/?details>|/?summary>|/?sub>|!-- gilf:job=[A-Za-z0-9._-]+ -->)`)
)

// checkRenderGolden compares got with testdata/render/name.md, or
// rewrites it with -update.
func checkRenderGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", "render", name+".md")
	if *updateGolden {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden (run with -update to create): %v", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("Render mismatch (-want +got):\n%s", diff)
	}
}

// checkBody checks what every body must hold, whatever the golden says.
func checkBody(t *testing.T, rec validation.Record, body string) {
	t.Helper()
	if len(body) > MaxBodyChars {
		t.Errorf("body is %d bytes, over MaxBodyChars %d", len(body), MaxBodyChars)
	}
	if !utf8.ValidString(body) {
		t.Error("body is not valid UTF-8")
	}
	for _, r := range body {
		if visibleRune(r) != "" && r != zwspRune {
			t.Errorf("body holds the raw character %U", r)
			break
		}
	}
	// Mentions and references are live outside code blocks only.
	if m := mentionRe.FindString(outsideFences(body)); m != "" {
		t.Errorf("body holds a live mention %q", m)
	}
	if m := refRe.FindString(outsideFences(body)); m != "" {
		t.Errorf("body holds a live reference %q", m)
	}
	// Outside fences only gilf's own tags; fences all close.
	open := ""
	for i, line := range strings.Split(body, "\n") {
		if open != "" {
			if line == open {
				open = ""
			}
			continue
		}
		if strings.HasPrefix(line, "```") {
			open = strings.TrimSuffix(line, "text")
			if strings.Trim(open, "`") != "" {
				t.Errorf("line %d: fence with an unexpected info string: %q", i+1, line)
			}
			continue
		}
		for j := strings.IndexByte(line, '<'); j >= 0; {
			if !ourTagRe.MatchString(line[j:]) {
				t.Errorf("line %d: raw HTML outside a fence: %q", i+1, line)
				break
			}
			k := strings.IndexByte(line[j+1:], '<')
			if k < 0 {
				break
			}
			j += k + 1
		}
	}
	if open != "" {
		t.Errorf("fence %q never closes", open)
	}
	v := verdictLine(body)
	if strings.Contains(v, "passed") != (rec.Outcome == validation.OutcomePassed) {
		t.Errorf("verdict %q for outcome %s", v, rec.Outcome)
	}
}

const zwspRune = '\u200b'

// outsideFences is body without its fenced code blocks, where GitHub
// links no mention or reference.
func outsideFences(body string) string {
	var b strings.Builder
	open := ""
	for _, line := range strings.Split(body, "\n") {
		switch {
		case open != "" && line == open:
			open = ""
		case open != "":
		case strings.HasPrefix(line, "```"):
			open = strings.TrimSuffix(line, "text")
		default:
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}

func verdictLine(body string) string {
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(l, "## ") {
			return l
		}
	}
	return ""
}

func TestVerdictNeverPassedUnlessPassed(t *testing.T) {
	for _, o := range []validation.Outcome{
		validation.OutcomePassed, validation.OutcomeFailed, validation.OutcomeGap, validation.OutcomeSkipped,
		validation.OutcomeRefused, validation.OutcomeInconclusive, validation.OutcomeError, "weird",
	} {
		t.Run(string(o), func(t *testing.T) {
			rec := passedRecord() // every step passed: only the outcome decides
			rec.Outcome = o
			rec.Reason = "reason for " + string(o)
			body := Render(rec, RenderOptions{})
			checkBody(t, rec, body)
			if o != validation.OutcomePassed && o != validation.OutcomeFailed && !strings.Contains(body, "**Why:** reason for ") {
				t.Errorf("outcome %s: the reason is not shown:\n%s", o, body)
			}
		})
	}
}

func TestRenderFitsBudget(t *testing.T) {
	huge := strings.Repeat("x", 30000) + "\nFAILURE AT THE END\n"
	rec := failedRecord()
	rec.Findings = nil
	for _, s := range []string{"install", "test", "typecheck", "lint", "build"} {
		rec.Steps = append(rec.Steps, step(s, []string{"npm", "run", s}, validation.StatusPassed, intp(0), time.Second, huge))
		rec.Findings = append(rec.Findings, validation.Finding{Severity: validation.SeverityHigh, Step: s + "-x", Title: s, Body: huge})
	}
	tests := []struct {
		name     string
		notes    int
		max      int
		wantText []string
	}{
		{"findings cut first", 0, 0, []string{"FAILURE AT THE END", "truncated to fit the review", "gilf cut"}},
		{"small limit drops output", 0, 7000, []string{"FAILURE AT THE END", "Output left out to fit the review"}},
		{"thousands of notes hard cut", 5000, 0, []string{"gilf cut the rest of this review"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := rec
			r.Notes = nil
			for i := range tt.notes {
				r.Notes = append(r.Notes, strings.Repeat("note ", 10)+string(rune('a'+i%26)))
			}
			body := Render(r, RenderOptions{JobID: "7", MaxChars: tt.max})
			limit := MaxBodyChars
			if tt.max > 0 {
				limit = tt.max
			}
			if len(body) > limit {
				t.Fatalf("body %d bytes, limit %d", len(body), limit)
			}
			checkBody(t, r, body)
			if !strings.HasPrefix(body, "<!-- gilf:job=7 -->\n") {
				t.Error("the job marker did not survive the cut")
			}
			for _, w := range tt.wantText {
				if !strings.Contains(body, w) {
					t.Errorf("body lacks %q", w)
				}
			}
		})
	}
}

func TestRenderExactlyAtLimit(t *testing.T) {
	rec := passedRecord()
	body := Render(rec, RenderOptions{})
	n := len(body)
	if got := Render(rec, RenderOptions{MaxChars: n}); got != body {
		t.Errorf("a body of exactly the limit (%d) was changed", n)
	}
	if got := Render(rec, RenderOptions{MaxChars: n - 1}); len(got) > n-1 || got == body {
		t.Errorf("a body one over the limit was not cut: %d bytes", len(got))
	}
}

func TestSanitize(t *testing.T) {
	tests := []struct{ in, want string }{
		{"@user", "@\u200buser"},
		{"hi @org/team!", "hi @\u200borg/team!"},
		{"a@b.example", "a@b.example"},
		{"-@user", "-@\u200buser"},
		{"@ alone", "@ alone"},
		{"#1", "\u200b#1"},
		{"other/repo#5", "other/repo\u200b#5"},
		{"# heading", "# heading"},
		{"\u202eabc\u202c", `\u202eabc\u202c`},
		{"\u2066\u2069\u200e\u200f", `\u2066\u2069\u200e\u200f`},
		{"\x1b[2J", `\x1b[2J`},
		{"nul\x00", `nul\x00`},
		{"crlf\r\nnext", "crlf\nnext"},
		{"lone\rcr", `lone\x0dcr`},
		{"bad\xffutf8", "bad\ufffdutf8"},
		{"c1\u0085", `c1\u0085`},
		{"tab\tkept", "tab\tkept"},
		{"émoji 👍", "émoji 👍"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			if got := sanitize(tt.in); got != tt.want {
				t.Errorf("sanitize(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestFence(t *testing.T) {
	tests := []struct{ in, wantTicks string }{
		{"plain", "```"},
		{"one ` tick", "```"},
		{"```", "````"},
		{"a ````` b", "``````"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got := fence(tt.in)
			if !strings.HasPrefix(got, tt.wantTicks+"text\n") || !strings.HasSuffix(got, "\n"+tt.wantTicks+"\n") {
				t.Errorf("fence(%q) = %q, want delimiters %q", tt.in, got, tt.wantTicks)
			}
		})
	}
}

func TestInlineAndCode(t *testing.T) {
	tests := []struct{ name, got, want string }{
		{"inline html", inline("<img src=x>"), "&lt;img src=x&gt;"},
		{"inline markdown", inline("[x](y) *b* `c` a|b"), `\[x\](y) \*b\* \` + "`" + `c\` + "`" + ` a\|b`},
		{"inline newline", inline("a\nb"), "a b"},
		{"inline link", inline("see https://x.example"), "see https:\u200b//x.example"},
		{"code plain", code("npm ci"), "`npm ci`"},
		{"code backticks", code("a`b"), "``a`b``"},
		{"code edge tick", code("`x"), "`` `x ``"},
		{"code pipe", code("a|b"), "`a\\|b`"},
		{"code empty", code(""), "—"},
		{"shell join", shellJoin([]string{"sh", "-c", "echo 'hi'; exit 0"}), `sh -c 'echo '\''hi'\''; exit 0'`},
		{"marker", safeMarker("46 --> <b>"), "46-b"},
		{"marker uuid", safeMarker("0f8e-4c1d"), "0f8e-4c1d"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.want {
				t.Errorf("got %q, want %q", tt.got, tt.want)
			}
		})
	}
}

func TestUSD(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	tests := []struct {
		in   *float64
		want string
	}{
		{nil, "no estimate"},
		{f(0), "≈ $0 (estimate)"},
		{f(0.00001), "< $0.0001 (estimate)"},
		{f(1.5), "≈ $1.5000 (estimate)"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got := usd(tt.in); got != tt.want {
				t.Errorf("usd = %q, want %q", got, tt.want)
			}
		})
	}
}

func FuzzRender(f *testing.F) {
	f.Add("hello", "@org/team #1")
	f.Add(hostileOutput()[:400], "```` \u202e")
	f.Fuzz(func(t *testing.T, out, title string) {
		rec := failedRecord()
		rec.Steps[0].Output = validation.Output{Head: out, Tail: title, Bytes: int64(len(out) + len(title)), Truncated: true}
		rec.Findings[0].Title = title
		rec.Findings[0].Body = out
		rec.Notes = []string{title}
		checkBody(t, rec, Render(rec, RenderOptions{JobID: title}))
	})
}

func TestProse(t *testing.T) {
	tests := []struct{ in, want string }{
		{"`npm run test` failed with exit code 1", "`npm run test` failed with exit code 1"},
		{"install is `npm install`, not frozen", "install is `npm install`, not frozen"},
		{"odd ` tick *here*", `odd \` + "`" + ` tick \*here\*`},
		{"`@org/team` and @user #5", "`@\u200borg/team` and @\u200buser \u200b#5"},
		{"`a|b` <x>", "`a\\|b` &lt;x&gt;"},
		{"`` empty", "\\`\\` empty"},
		{"- `x`", "\\- `x`"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			if got := prose(tt.in); got != tt.want {
				t.Errorf("prose(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

// BenchmarkRender renders the hostile record: 100 KiB of output in a
// finding and a step, cut to fit the body.
func BenchmarkRender(b *testing.B) {
	rec := hostileRecord()
	opts := RenderOptions{JobID: "1"}
	b.ReportAllocs()
	for b.Loop() {
		if len(Render(rec, opts)) > MaxBodyChars {
			b.Fatal("over budget")
		}
	}
}

// What is posted names no worker internals: no setting names, no host
// paths, no kernel version, no secret names (a count stands for them).
func TestRenderWithholdsWorkerInternals(t *testing.T) {
	rec := validation.Record{
		Outcome: validation.OutcomePassed, Executor: "local",
		Platform:        validation.Platform{OS: "linux", Arch: "amd64", Kernel: "6.1.0-18-amd64", Node: "v20.20.2"},
		SecretsWithheld: []string{"GILF_WEBHOOK_SECRET", "NPM_TOKEN"},
		Notes:           []string{"tool mirrored from /srv/gilf-data/toolchains/pnpm into /srv/gilf-data/work/run-1", "chosen by GILF_VALIDATION_EXECUTOR"},
		Refusal:         nil,
		Steps:           []validation.StepResult{{Name: "test", Status: validation.StatusPassed, Reason: "see GILF_LOCAL_MIN_TIER"}},
	}
	body := Render(rec, RenderOptions{Internals: []string{"/srv/gilf-data"}, Notes: []string{"shadow lane off: GILF_SHADOW_EXECUTOR unset"}})
	for _, leak := range []string{"GILF", "/srv/gilf-data", "6.1.0-18", "NPM_TOKEN", "WEBHOOK"} {
		if strings.Contains(strings.ReplaceAll(body, `\_`, "_"), leak) {
			t.Errorf("the review shows %q:\n%s", leak, body)
		}
	}
	for _, want := range []string{"2 worker secrets kept out of the sandbox", "(worker path)/toolchains/pnpm", "chosen by a worker setting", "node v20.20.2"} {
		if !strings.Contains(body, want) {
			t.Errorf("the review lacks %q:\n%s", want, body)
		}
	}
}

// realFailures are the outputs the real tools printed on the excerpt
// package's fixture projects (captured with colours on), with the project
// each ran in and the step that ran it.
var realFailures = []struct{ raw, project, step, changed string }{
	{"jest", "jest", validation.StepTest, "sum.js"},
	{"vitest", "vitest", validation.StepTest, "sum.js"},
	{"node-test", "nodetest", validation.StepTest, "test/cart.test.js"},
	{"tsc", "tsc", validation.StepTypecheck, "src/user.ts"},
	{"eslint", "eslint", validation.StepLint, "src/cart.js"},
}

// A review rendered from each real tool's failing output, as a pull
// request shows it: the failure first, colours gone, node_modules frames
// folded, the step's whole output folded after.
func TestRenderRealFailures(t *testing.T) {
	for _, tc := range realFailures {
		t.Run(tc.raw, func(t *testing.T) {
			out, err := os.ReadFile(filepath.Join("..", "excerpt", "testdata", "raw", tc.raw+".txt"))
			if err != nil {
				t.Fatal(err)
			}
			exit := 1
			steps := []validation.StepResult{
				{Name: validation.StepInstall, Argv: []string{"npm", "ci"}, Cwd: "/workspace", Status: validation.StatusPassed, ExitCode: new(int),
					Output: validation.Output{Head: "added 0 packages\n", Bytes: 17}},
				{Name: tc.step, Argv: []string{"npm", "run", tc.step}, Cwd: "/workspace", Status: validation.StatusFailed, ExitCode: &exit,
					Output: validation.Output{Head: string(out), Bytes: int64(len(out))}},
			}
			rec := validation.Record{Outcome: validation.OutcomeFailed, Executor: "local", Steps: steps, Findings: validation.Findings(steps)}
			annotations := explain(&rec, filepath.Join("..", "excerpt", "testdata", "projects", tc.project), []ChangedFile{{Name: tc.changed}})
			got := Render(rec, RenderOptions{JobID: "7"})
			checkBody(t, rec, got)
			if strings.Contains(got, "\x1b") || strings.Contains(got, `\x1b`) {
				t.Errorf("the review shows terminal escapes")
			}
			if len(annotations) == 0 {
				t.Errorf("no annotation from %s's output", tc.raw)
			}
			var b strings.Builder
			b.WriteString(got)
			b.WriteString("\n<!-- annotations\n")
			for _, a := range annotations {
				fmt.Fprintf(&b, "%s:%d-%d %s %s: %s\n", a.Path, a.StartLine, a.EndLine, a.Level, a.Title, strings.ReplaceAll(a.Message, "\n", " ⏎ "))
			}
			b.WriteString("-->\n")
			checkRenderGolden(t, "real-"+tc.raw, b.String())
		})
	}
}
