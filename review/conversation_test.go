package review

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestFingerprint(t *testing.T) {
	base := Fingerprint("src/a.js", "Off by one", "for (i = 0; i <= n; i++) {")
	if len(base) != 16 || strings.Trim(base, "0123456789abcdef") != "" {
		t.Fatalf("fingerprint %q is not 16 hex digits", base)
	}
	same := []struct{ name, path, title, code string }{
		{"title case and punctuation", "src/a.js", "off-by-one!", "for (i = 0; i <= n; i++) {"},
		{"code moved and re-indented", "src/a.js", "Off by one", "    for (i = 0;  i <= n; i++) {  "},
	}
	for _, tt := range same {
		if got := Fingerprint(tt.path, tt.title, tt.code); got != base {
			t.Errorf("%s: %s, want %s", tt.name, got, base)
		}
	}
	differ := []struct{ name, path, title, code string }{
		{"another file", "src/b.js", "Off by one", "for (i = 0; i <= n; i++) {"},
		{"another finding", "src/a.js", "Unchecked error", "for (i = 0; i <= n; i++) {"},
		{"the code was fixed", "src/a.js", "Off by one", "for (i = 0; i < n; i++) {"},
		{"parts do not run together", "src/a.jsOff", "by one", "for (i = 0; i <= n; i++) {"},
	}
	for _, tt := range differ {
		if got := Fingerprint(tt.path, tt.title, tt.code); got == base {
			t.Errorf("%s: same fingerprint", tt.name)
		}
	}
}

func TestRightLineText(t *testing.T) {
	got := RightLineText(modifiedPatch)
	want := map[int]string{10: "export function load(path) {", 11: "  const text = read(path);", 12: "  const doc = parse(text);",
		13: "  validate(doc);", 14: "  return doc;", 15: "}", 16: "", 17: "export function save(path, doc) {",
		41: "  write(path, doc);", 42: "  return true; // no log", 43: "}"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("RightLineText (-want +got):\n%s", d)
	}
}

func TestPlanConversation(t *testing.T) {
	const head = "0123456789abcdef0123456789abcdef01234567"
	c := func(fp string, line int) InlineComment {
		return InlineComment{Path: "a.js", Line: line, Body: "b", Fingerprint: fp}
	}
	th := func(id, fp string, line int, mod func(*Thread)) Thread {
		t := Thread{ID: id, CommentID: int64(len(id)), Fingerprint: fp, Path: "a.js", Line: line, Title: "t " + id, Notes: map[string]bool{}}
		if mod != nil {
			mod(&t)
		}
		return t
	}
	ids := func(ts []Thread) []string {
		var out []string
		for _, t := range ts {
			out = append(out, t.ID)
		}
		return out
	}
	tests := []struct {
		name     string
		threads  []Thread
		current  []InlineComment
		reviewed bool
		scope    string
		touched  map[string]bool
		post     []string // fingerprints
		kept     int
		resolve  []string
		told     []string
		replies  []string // note keys
	}{
		{name: "first review: everything is posted", current: []InlineComment{c("f1", 3), c("f2", 4)}, reviewed: true, scope: ScopeWhole,
			post: []string{"f1", "f2"}},
		{name: "the same finding again: kept in its thread", threads: []Thread{th("T1", "f1", 3, nil)},
			current: []InlineComment{c("f1", 3)}, reviewed: true, scope: ScopeWhole, kept: 1},
		{name: "the same finding twice in one answer is posted once", current: []InlineComment{c("f1", 3), c("f1", 3)}, reviewed: true, scope: ScopeWhole,
			post: []string{"f1"}},
		{name: "moved line: one reply", threads: []Thread{th("T1", "f1", 3, nil)},
			current: []InlineComment{c("f1", 9)}, reviewed: true, scope: ScopeWhole, kept: 1, replies: []string{"moved=9"}},
		{name: "moved line already said", threads: []Thread{th("T1", "f1", 3, func(t *Thread) { t.Notes["moved=9"] = true })},
			current: []InlineComment{c("f1", 9)}, reviewed: true, scope: ScopeWhole, kept: 1},
		{name: "gone: resolved", threads: []Thread{th("T1", "f1", 3, nil), th("T2", "f2", 4, nil)},
			current: []InlineComment{c("f2", 4)}, reviewed: true, scope: ScopeWhole, kept: 1, resolve: []string{"T1"}},
		{name: "gone with a human reply: told, never resolved", threads: []Thread{th("T1", "f1", 3, func(t *Thread) { t.HumanReplied = true })},
			reviewed: true, scope: ScopeWhole, told: []string{"T1"}},
		{name: "gone with a human reply, already told", threads: []Thread{th("T1", "f1", 3, func(t *Thread) { t.HumanReplied = true; t.Notes["gone"] = true })},
			reviewed: true, scope: ScopeWhole},
		{name: "already resolved: left alone", threads: []Thread{th("T1", "f1", 3, func(t *Thread) { t.Resolved = true })},
			reviewed: true, scope: ScopeWhole},
		{name: "resolved and back: not posted again", threads: []Thread{th("T1", "f1", 3, func(t *Thread) { t.Resolved = true })},
			current: []InlineComment{c("f1", 5)}, reviewed: true, scope: ScopeWhole, kept: 1},
		{name: "a thread gilf did not open is left alone", threads: []Thread{th("T1", "", 3, nil)}, reviewed: true, scope: ScopeWhole},
		{name: "not reviewed: nothing is resolved", threads: []Thread{th("T1", "f1", 3, nil)}, reviewed: false, scope: ScopeWhole},
		{name: "incremental, file untouched: kept open", threads: []Thread{th("T1", "f1", 3, func(t *Thread) { t.Outdated = true })},
			reviewed: true, scope: ScopeIncremental, touched: map[string]bool{"b.js": true}},
		{name: "incremental, file touched but the line stands: kept open", threads: []Thread{th("T1", "f1", 3, nil)},
			reviewed: true, scope: ScopeIncremental, touched: map[string]bool{"a.js": true}},
		{name: "incremental, the commented code changed: resolved", threads: []Thread{th("T1", "f1", 3, func(t *Thread) { t.Outdated = true })},
			reviewed: true, scope: ScopeIncremental, touched: map[string]bool{"a.js": true}, resolve: []string{"T1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := planConversation(tt.threads, tt.current, tt.reviewed, tt.scope, tt.touched, head)
			var post, replies []string
			for _, c := range p.post {
				post = append(post, c.Fingerprint)
			}
			for _, r := range p.replies {
				replies = append(replies, r.key)
			}
			if d := cmp.Diff(tt.post, post); d != "" {
				t.Errorf("post (-want +got):\n%s", d)
			}
			if p.kept != tt.kept {
				t.Errorf("kept %d, want %d", p.kept, tt.kept)
			}
			if d := cmp.Diff(tt.resolve, ids(p.resolve)); d != "" {
				t.Errorf("resolve (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tt.told, ids(p.told)); d != "" {
				t.Errorf("told (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tt.replies, replies); d != "" {
				t.Errorf("replies (-want +got):\n%s", d)
			}
		})
	}
}
