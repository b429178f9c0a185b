package evidence

import (
	mrand "math/rand"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"testing/quick"
	"unicode/utf8"
)

// checkKeyShape asserts what every generated key must satisfy.
func checkKeyShape(t *testing.T, key string) {
	t.Helper()
	if !strings.HasPrefix(key, KeyRoot+"/") {
		t.Fatalf("key %q does not start with %q", key, KeyRoot+"/")
	}
	if err := ValidKey(key); err != nil {
		t.Fatalf("generated key invalid: %v", err)
	}
	segs := strings.Split(key, "/")
	if len(segs) != 7 || segs[3] != "evidence" {
		t.Fatalf("key %q has %d segments, want 7 with evidence at 4", key, len(segs))
	}
	for _, s := range segs {
		if len(s) > MaxSegmentBytes {
			t.Fatalf("segment of %d bytes", len(s))
		}
		if s == "." || s == ".." || s == "" || strings.HasPrefix(s, ".") {
			t.Fatalf("key %q has segment %q", key, s)
		}
	}
	if strings.Contains(key, "//") {
		t.Fatalf("key %q has //", key)
	}
	for _, r := range key {
		if r < 0x20 || r == 0x7f || r >= 0x80 {
			t.Fatalf("key %q has byte %q", key, r)
		}
	}
}

func TestKeyExamples(t *testing.T) {
	scope := Scope{Repo: "octo/hello.js", SHA: "0123abc", Review: "job-42"}
	tests := []struct {
		name    string
		scope   Scope
		kind    Kind
		file    string
		want    string
		wantErr string
	}{
		{name: "plain", scope: scope, kind: KindTestOutput, file: "test.log",
			want: "review-artifacts/octo%2Fhello.js/0123abc/evidence/job-42/test-output/test.log"},
		{name: "traversal in the name", scope: scope, kind: KindLog, file: "../../x",
			want: "review-artifacts/octo%2Fhello.js/0123abc/evidence/job-42/log/%2E.%2F..%2Fx"},
		{name: "other tenant in the name", scope: scope, kind: KindLog, file: "evidence/other-tenant/",
			want: "review-artifacts/octo%2Fhello.js/0123abc/evidence/job-42/log/evidence%2Fother-tenant%2F"},
		{name: "dot-dot repo", scope: Scope{Repo: "..", SHA: ".", Review: "%2F"}, kind: KindLog, file: "a",
			want: "review-artifacts/%2E./%2E/evidence/%252F/log/a"},
		{name: "unicode and controls", scope: Scope{Repo: "ö/\n", SHA: "s", Review: "r"}, kind: KindTrace, file: "a b\x00",
			want: "review-artifacts/%C3%B6%2F%0A/s/evidence/r/trace/a%20b%00"},
		{name: "empty repo", scope: Scope{SHA: "s", Review: "r"}, kind: KindLog, file: "a", wantErr: "empty repository"},
		{name: "empty name", scope: scope, kind: KindLog, file: "", wantErr: "empty artifact name"},
		{name: "unknown kind", scope: scope, kind: "../../etc", file: "a", wantErr: "unknown artifact kind"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Key(tt.scope, tt.kind, tt.file)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Key = %q, %v; want error %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("Key = %q, %v; want %q", got, err, tt.want)
			}
			checkKeyShape(t, got)
		})
	}
}

func TestEncodeSegmentLongValues(t *testing.T) {
	long := strings.Repeat("é", 200) // 400 bytes, 1200 encoded
	a, b := EncodeSegment(long), EncodeSegment(long+"x")
	if a == b {
		t.Fatal("long values that differ share a segment")
	}
	for _, s := range []string{a, b} {
		if len(s) > MaxSegmentBytes || !strings.Contains(s, "%h") {
			t.Fatalf("hashed segment %q (%d bytes)", s, len(s))
		}
	}
	// At the limit the plain encoding is kept; one byte over it is hashed.
	atLimit := strings.Repeat("a", MaxSegmentBytes)
	if got := EncodeSegment(atLimit); got != atLimit {
		t.Fatalf("segment at the limit changed: %q", got)
	}
	if got := EncodeSegment(atLimit + "a"); !strings.Contains(got, "%h") || len(got) > MaxSegmentBytes {
		t.Fatalf("segment over the limit: %q", got)
	}
	// A %XX triple is never split by the cut.
	for n := range 4 {
		s := EncodeSegment(strings.Repeat("a", hashedPrefixBytes-n) + strings.Repeat("/", 100))
		prefix, _, _ := strings.Cut(s, "%h")
		for i := 0; i < len(prefix); i++ {
			if prefix[i] == '%' && (i+2 >= len(prefix)) {
				t.Fatalf("split escape at the cut: %q", prefix)
			}
		}
	}
}

// hostile draws repository names, SHAs, reviews and file names from the
// shapes an attacker would try.
func hostile(r *rand.Rand) string {
	atoms := []string{"/", "..", ".", "%", "%2F", "%2E", "\\", "\x00", "\n", "\x1b[31m", "é", "😀", "\u202e",
		"a", "Z", "-", "_", "~", "%h", "evidence", "review-artifacts", " ", "?", "#", "\xff"}
	n := r.IntN(8)
	if r.IntN(20) == 0 {
		n = 100 + r.IntN(200) // long enough to be hashed
	}
	var b strings.Builder
	for range n {
		b.WriteString(atoms[r.IntN(len(atoms))])
	}
	return b.String()
}

type keyInput struct {
	Repo, SHA, Review, Name string
	Kind                    Kind
}

func genKeyInput(r *rand.Rand) keyInput {
	return keyInput{Repo: hostile(r), SHA: hostile(r), Review: hostile(r), Name: hostile(r), Kind: Kinds()[r.IntN(len(Kinds()))]}
}

func TestKeyProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	seen := map[string]keyInput{}
	cfg := &quick.Config{
		MaxCount: 20000,
		Values: func(v []reflect.Value, _ *mrand.Rand) {
			v[0] = reflect.ValueOf(genKeyInput(r))
		},
	}
	prop := func(in keyInput) bool {
		key, err := Key(Scope{Repo: in.Repo, SHA: in.SHA, Review: in.Review}, in.Kind, in.Name)
		if in.Repo == "" || in.SHA == "" || in.Review == "" || in.Name == "" {
			return err != nil && key == ""
		}
		if err != nil {
			t.Logf("Key(%+v): %v", in, err)
			return false
		}
		checkKeyShape(t, key)
		if prev, ok := seen[key]; ok && prev != in {
			t.Logf("collision: %+v and %+v both give %q", prev, in, key)
			return false
		}
		seen[key] = in
		return true
	}
	if err := quick.Check(prop, cfg); err != nil {
		t.Fatal(err)
	}
	if len(seen) < 1000 {
		t.Fatalf("only %d distinct keys checked", len(seen))
	}
}

// FuzzKey checks the key invariants and injectivity on a pair of inputs:
// two different inputs never give the same key.
func FuzzKey(f *testing.F) {
	f.Add("octo/hello", "abc", "job-1", "test.log", "octo", "hello/abc", "job-1", "test.log")
	f.Add("..", ".", "%2F", "../../x", "%2E.", "%2E", "/", "x")
	f.Add("a/b", "c", "d", "e", "a%2Fb", "c", "d", "e")
	f.Fuzz(func(t *testing.T, r1, s1, v1, n1, r2, s2, v2, n2 string) {
		k1, err1 := Key(Scope{Repo: r1, SHA: s1, Review: v1}, KindLog, n1)
		k2, err2 := Key(Scope{Repo: r2, SHA: s2, Review: v2}, KindLog, n2)
		if err1 == nil {
			checkKeyShape(t, k1)
		}
		if err2 == nil {
			checkKeyShape(t, k2)
		}
		same := r1 == r2 && s1 == s2 && v1 == v2 && n1 == n2
		if err1 == nil && err2 == nil && (k1 == k2) != same {
			t.Fatalf("inputs equal=%v but keys equal=%v: %q %q", same, k1 == k2, k1, k2)
		}
		if !utf8.ValidString(k1) || !utf8.ValidString(k2) {
			t.Fatal("invalid UTF-8 key")
		}
	})
}

func TestValidKeyAndPrefix(t *testing.T) {
	bad := []string{"", "/abs", "a//b", "a/../b", "..", "./a", "a/.", "a\\b", "a\x00b", "a\nb", "a/", "\xff",
		strings.Repeat("a", MaxKeyBytes+1)}
	for _, k := range bad {
		if ValidKey(k) == nil {
			t.Errorf("ValidKey(%q) accepted", k)
		}
	}
	if err := ValidKey(strings.Repeat("a", MaxKeyBytes)); err != nil {
		t.Errorf("key at the limit refused: %v", err)
	}
	prefixes := []struct{ in, want string }{
		{"", ""}, {"/", ""}, {"gilf", "gilf/"}, {"/gilf/prod/", "gilf/prod/"},
	}
	for _, p := range prefixes {
		got, err := CleanPrefix(p.in)
		if err != nil || got != p.want {
			t.Errorf("CleanPrefix(%q) = %q, %v; want %q", p.in, got, err, p.want)
		}
	}
	for _, p := range []string{"a/../b", "a//b", "..", "a\x00"} {
		if _, err := CleanPrefix(p); err == nil {
			t.Errorf("CleanPrefix(%q) accepted", p)
		}
	}
}
