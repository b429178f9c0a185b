package evidence

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"math/rand/v2"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/gilf-review/gilf/validation"
)

const B = DefaultBodyBudget

// bytesEqual compares bodies as a whole: element-wise reflection over
// 256 KiB is slow under -race.
var bytesEqual = cmp.Comparer(bytes.Equal)

// build streams data through a Builder in one write.
func build(t testing.TB, data []byte, budget int) Artifact {
	t.Helper()
	b := NewBuilder(KindTestOutput, "test", "test.log", budget)
	if n, err := b.Write(data); n != len(data) || err != nil {
		t.Fatalf("Write = %d, %v", n, err)
	}
	return b.Artifact()
}

// split returns the head and tail parts of a truncated text body and
// checks the marker between them states the omitted count.
func split(t *testing.T, a Artifact) (head, tail []byte) {
	t.Helper()
	m := omissionMarker(a.OmittedBytes)
	i := bytes.Index(a.Body, []byte(m))
	if i < 0 {
		t.Fatalf("body has no marker %q", m)
	}
	return a.Body[:i], a.Body[i+len(m):]
}

// checkInvariants asserts what every body must satisfy against the stream
// it came from.
func checkInvariants(t *testing.T, data []byte, a Artifact, budget int) {
	t.Helper()
	sum := sha256.Sum256(data)
	if a.FullBytes != int64(len(data)) || a.FullSHA256 != hex.EncodeToString(sum[:]) {
		t.Fatalf("full bytes/sha = %d %s, want %d %x", a.FullBytes, a.FullSHA256, len(data), sum)
	}
	bodySum := sha256.Sum256(a.Body)
	if a.BodySHA256 != hex.EncodeToString(bodySum[:]) {
		t.Fatalf("body sha mismatch")
	}
	if len(a.Body) > budget {
		t.Fatalf("body is %d bytes, over the %d budget", len(a.Body), budget)
	}
	if len(data) <= budget {
		if !bytes.Equal(a.Body, data) || a.Truncated || a.OmittedBytes != 0 {
			t.Fatalf("a stream within budget must be kept whole (truncated=%v omitted=%d)", a.Truncated, a.OmittedBytes)
		}
		return
	}
	if !a.Truncated {
		t.Fatal("over-budget body not marked truncated")
	}
	if a.Binary {
		if !bytes.Equal(a.Body, data[:budget]) || a.OmittedBytes != int64(len(data)-budget) {
			t.Fatalf("binary body must be the head only")
		}
		return
	}
	head, tail := split(t, a)
	if !bytes.HasPrefix(data, head) || !bytes.HasSuffix(data, tail) {
		t.Fatal("head/tail are not the stream's prefix/suffix")
	}
	if got := int64(len(data) - len(head) - len(tail)); got != a.OmittedBytes {
		t.Fatalf("omitted = %d, but %d bytes are missing", a.OmittedBytes, got)
	}
	if utf8.Valid(data) && !utf8.Valid(a.Body) {
		t.Fatal("valid UTF-8 stream gave an invalid body")
	}
	if n := len(tail); n > 0 && !groundAt(data, len(data)-n) {
		t.Fatal("tail starts inside an escape sequence")
	}
	if !groundAt(data, len(head)) {
		t.Fatal("head ends inside an escape sequence")
	}
}

func groundAt(data []byte, pos int) bool {
	var s ansiScanner
	for i := range pos {
		s.step(data[i], i)
	}
	return s.state == ansiGround
}

// cutPoints returns where the head ends and the tail starts, before any
// rune or escape adjustment, for a text stream of total bytes.
func cutPoints(total, budget int) (headEnd, tailStart int) {
	avail := budget - len(omissionMarker(int64(total)))
	tailLen := avail / 2
	return avail - tailLen, total - tailLen
}

func TestBudgetBoundaries(t *testing.T) {
	text := func(n int) []byte { return bytes.Repeat([]byte("x"), n) }
	tests := []struct {
		name      string
		data      []byte
		truncated bool
	}{
		{"zero bytes", nil, false},
		{"one byte", []byte("y"), false},
		{"exactly the budget", text(B), false},
		{"one byte over", text(B + 1), true},
		{"twice the budget", text(2 * B), true},
		{"binary exactly the budget", append([]byte{0}, text(B-1)...), false},
		{"binary one byte over", append([]byte{0}, text(B)...), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := build(t, tt.data, B)
			checkInvariants(t, tt.data, a, B)
			if a.Truncated != tt.truncated {
				t.Fatalf("truncated = %v, want %v", a.Truncated, tt.truncated)
			}
		})
	}
	t.Run("one byte over keeps all but the marker's room", func(t *testing.T) {
		data := text(B + 1)
		a := build(t, data, B)
		h, tl := split(t, a)
		m := omissionMarker(int64(B + 1))
		if want := B - len(m); len(h)+len(tl) != want {
			t.Fatalf("kept %d bytes, want %d", len(h)+len(tl), want)
		}
		if a.OmittedBytes != int64(len(m)+1) {
			t.Fatalf("omitted = %d, want %d", a.OmittedBytes, len(m)+1)
		}
		if want := B - len(m) + len(omissionMarker(a.OmittedBytes)); len(a.Body) != want {
			t.Fatalf("body = %d bytes, want %d", len(a.Body), want)
		}
		if !strings.Contains(string(a.Body), "["+"gilf evidence: "+strconv.Itoa(len(m)+1)+" bytes omitted]") {
			t.Fatal("marker does not state the count")
		}
	})
}

func TestCutsRespectRunesAndEscapes(t *testing.T) {
	const total = B + 5000
	headEnd, tailStart := cutPoints(total, B)
	// place returns a stream of 'a' with seq written at offset at.
	place := func(at int, seq string) []byte {
		d := bytes.Repeat([]byte("a"), total)
		copy(d[at:], seq)
		return d
	}
	tests := []struct {
		name     string
		data     []byte
		headLen  int // -1: not checked
		tailLen  int // -1: not checked
		wantBody string
	}{
		{name: "4-byte rune across the head cut", data: place(headEnd-2, "😀"), headLen: headEnd - 2, tailLen: total - tailStart},
		{name: "4-byte rune ending at the head cut", data: place(headEnd-4, "😀"), headLen: headEnd, tailLen: total - tailStart},
		{name: "2-byte rune across the head cut", data: place(headEnd-1, "é"), headLen: headEnd - 1, tailLen: total - tailStart},
		{name: "4-byte rune across the tail cut", data: place(tailStart-1, "😀"), headLen: headEnd, tailLen: total - tailStart - 3},
		{name: "3-byte rune starting at the tail cut", data: place(tailStart, "€"), headLen: headEnd, tailLen: total - tailStart},
		{name: "CSI across the head cut", data: place(headEnd-3, "\x1b[31m"), headLen: headEnd - 3, tailLen: total - tailStart},
		{name: "CSI ending at the head cut", data: place(headEnd-5, "\x1b[31m"), headLen: headEnd, tailLen: total - tailStart},
		{name: "ESC alone before the head cut", data: place(headEnd-1, "\x1b[0m"), headLen: headEnd - 1, tailLen: total - tailStart},
		{name: "OSC hyperlink cut inside its ST", data: place(headEnd-13, "\x1b]8;;http://x\x1b\\"), headLen: headEnd - 13, tailLen: total - tailStart},
		{name: "OSC ended by BEL before the cut", data: place(headEnd-10, "\x1b]0;title\x07"), headLen: headEnd, tailLen: total - tailStart},
		{name: "CSI across the tail cut", data: place(tailStart-2, "\x1b[1;31m"), headLen: headEnd, tailLen: total - tailStart - 5},
		{name: "OSC across the tail cut", data: place(tailStart-4, "\x1b]0;title\x07"), headLen: headEnd, tailLen: total - tailStart - 6},
		{name: "CRLF across the head cut", data: place(headEnd-1, "\r\n"), headLen: headEnd - 1, tailLen: total - tailStart},
		{name: "CRLF across the tail cut", data: place(tailStart-1, "\r\n"), headLen: headEnd, tailLen: total - tailStart - 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := build(t, tt.data, B)
			checkInvariants(t, tt.data, a, B)
			h, tl := split(t, a)
			if len(h) != tt.headLen || len(tl) != tt.tailLen {
				t.Fatalf("head/tail = %d/%d bytes, want %d/%d", len(h), len(tl), tt.headLen, tt.tailLen)
			}
		})
	}
}

func TestEscapeSequenceLimit(t *testing.T) {
	const total = B + 5000
	headEnd, _ := cutPoints(total, B)
	tests := []struct {
		name    string
		seqLen  int // bytes of the unterminated OSC before the cut
		headLen int
	}{
		{"at the limit it is a sequence", MaxEscapeSequenceBytes, headEnd - MaxEscapeSequenceBytes},
		{"past the limit it is text", MaxEscapeSequenceBytes + 1, headEnd},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := bytes.Repeat([]byte("a"), total)
			copy(d[headEnd-tt.seqLen:], "\x1b]0;")
			a := build(t, d, B)
			h, _ := split(t, a)
			if len(h) != tt.headLen {
				t.Fatalf("head = %d bytes, want %d", len(h), tt.headLen)
			}
		})
	}
}

func TestIsBinary(t *testing.T) {
	text := strings.Repeat("hello world\n", 1000)
	tests := []struct {
		name string
		in   []byte
		want bool
	}{
		{"empty", nil, false},
		{"ascii", []byte(text), false},
		{"utf-8 with ANSI colour", []byte("\x1b[32m✓ passes\x1b[0m 日本語\r\n\t"), false},
		{"NUL first", []byte("\x00abc"), true},
		{"NUL late in the sample", append([]byte(text[:ClassifySampleBytes-1]), 0), true},
		{"NUL past the sample", append([]byte(text[:ClassifySampleBytes]), 0), false},
		{"one stray control byte", append([]byte(text[:100]), 0x01), false},
		{"30% controls is text", append(bytes.Repeat([]byte{0x01}, 30), bytes.Repeat([]byte("a"), 70)...), false},
		{"31% controls is binary", append(bytes.Repeat([]byte{0x01}, 31), bytes.Repeat([]byte("a"), 69)...), true},
		{"invalid UTF-8 noise", bytes.Repeat([]byte{0xff, 0xfe, 'a'}, 100), true},
		{"latin-1 words", []byte("caf\xe9 na\xefve r\xe9sum\xe9 d\xe9j\xe0 vu"), false},
		{"rune cut by the sample end", append([]byte(text[:ClassifySampleBytes-2]), "😀"...), false},
		{"PNG header", []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := IsBinary(tt.in); got != tt.want {
				t.Fatalf("IsBinary = %v, want %v", got, tt.want)
			}
		})
	}
}

// stream is deterministic pseudo-text: lines with colour codes and
// multi-byte runes, so cuts meet all of them.
func stream(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, seed))
	parts := []string{"ok ", "\x1b[31mFAIL\x1b[0m ", "日本 ", "😀", "\r\n", "\x1b]8;;http://e/\x1b\\link\x1b]8;;\x1b\\", "value=42 "}
	var b bytes.Buffer
	for b.Len() < n {
		b.WriteString(parts[r.IntN(len(parts))])
	}
	return b.Bytes()[:n]
}

func TestStreamingMatchesOneWriteAndCapturedOutput(t *testing.T) {
	const execKeep = 500_000 // what an executor keeps of head and tail
	for _, size := range []int{0, 100, B, B + 1, 3 * B, 2*execKeep + 12345} {
		t.Run(strconv.Itoa(size), func(t *testing.T) {
			data := stream(size, uint64(size))
			whole := build(t, data, B)
			checkInvariants(t, data, whole, B)

			r := rand.New(rand.NewPCG(1, uint64(size)))
			b := NewBuilder(KindTestOutput, "test", "test.log", B)
			for rest := data; len(rest) > 0; {
				n := min(len(rest), 1+r.IntN(70_000))
				if _, err := b.Write(rest[:n]); err != nil {
					t.Fatal(err)
				}
				rest = rest[n:]
			}
			if d := cmp.Diff(whole, b.Artifact(), bytesEqual); d != "" {
				t.Fatalf("chunked stream differs (-one write +chunks):\n%s", d)
			}

			sum := sha256.Sum256(data)
			out := validation.Output{Head: string(data), Bytes: int64(size), SHA256: hex.EncodeToString(sum[:])}
			if size > 2*execKeep {
				out = validation.Output{
					Head: string(data[:execKeep]), Tail: string(data[size-execKeep:]),
					Bytes: int64(size), SHA256: out.SHA256, Truncated: true,
				}
			}
			fromOut := FromOutput(KindTestOutput, "test", "test.log", out, B)
			if d := cmp.Diff(whole, fromOut, bytesEqual); d != "" {
				t.Fatalf("FromOutput differs from streaming (-stream +output):\n%s", d)
			}
		})
	}
}

func TestBuilderMemoryIsBounded(t *testing.T) {
	const streamBytes = 64 << 20
	chunk := stream(32<<10, 7)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	b := NewBuilder(KindBuildOutput, "build", "build.log", B)
	for range streamBytes / len(chunk) {
		if _, err := b.Write(chunk); err != nil {
			t.Fatal(err)
		}
	}
	a := b.Artifact()
	runtime.ReadMemStats(&after)
	allocated := after.TotalAlloc - before.TotalAlloc
	// Head, ring, the tail copy and the body: about 4 budgets.
	const limit = 8 * B
	if allocated > limit {
		t.Fatalf("streaming %d bytes allocated %d bytes, want at most %d", streamBytes, allocated, limit)
	}
	if a.FullBytes != streamBytes || len(a.Body) > B {
		t.Fatalf("artifact: %v", a)
	}
	runtime.KeepAlive(b)
}

func TestBuilderBudgets(t *testing.T) {
	tests := []struct {
		name   string
		budget int
		want   int
	}{
		{"zero means the default", 0, DefaultBodyBudget},
		{"negative means the default", -1, DefaultBodyBudget},
		{"below the minimum is raised", MinBodyBudget - 1, MinBodyBudget},
		{"the minimum", MinBodyBudget, MinBodyBudget},
		{"a custom budget", 4096, 4096},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := stream(3*tt.want+17, 3)
			a := build(t, data, tt.budget)
			checkInvariants(t, data, a, tt.want)
			if len(a.Body) < tt.want-16 {
				t.Fatalf("body %d bytes leaves most of the %d budget unused", len(a.Body), tt.want)
			}
		})
	}
}

func TestFromStepResult(t *testing.T) {
	exit1 := 1
	tests := []struct {
		name     string
		r        validation.StepResult
		ok       bool
		kind     Kind
		artName  string
		contains string
	}{
		{name: "install output is a log", r: validation.StepResult{Name: "install", Status: validation.StatusPassed, Output: validation.Output{Head: "added 3 packages", Bytes: 16}},
			ok: true, kind: KindLog, artName: "install.log", contains: "added 3 packages"},
		{name: "test output", r: validation.StepResult{Name: "test", Status: validation.StatusFailed, ExitCode: &exit1, Output: validation.Output{Head: "1 failing", Bytes: 9}},
			ok: true, kind: KindTestOutput, artName: "test.log", contains: "1 failing"},
		{name: "typecheck", r: validation.StepResult{Name: "typecheck", Status: validation.StatusPassed, Output: validation.Output{Head: "ok", Bytes: 2}}, ok: true, kind: KindTypecheckOutput, artName: "typecheck.log"},
		{name: "lint", r: validation.StepResult{Name: "lint", Status: validation.StatusPassed, Output: validation.Output{Head: "ok", Bytes: 2}}, ok: true, kind: KindLintOutput, artName: "lint.log"},
		{name: "build", r: validation.StepResult{Name: "build", Status: validation.StatusPassed, Output: validation.Output{Head: "ok", Bytes: 2}}, ok: true, kind: KindBuildOutput, artName: "build.log"},
		{name: "no output gives a summary log", r: validation.StepResult{Name: "test", Status: validation.StatusFailed, ExitCode: &exit1, Reason: "exit 1", Reported: true},
			ok: true, kind: KindLog, artName: "test-summary.txt", contains: "exit code: 1"},
		{name: "not run has nothing", r: validation.StepResult{Name: "build", Status: validation.StatusNotRun}},
		{name: "inconclusive has nothing", r: validation.StepResult{Name: "test", Status: validation.StatusInconclusive}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, ok := FromStepResult(tt.r, B)
			if ok != tt.ok {
				t.Fatalf("ok = %v, want %v", ok, tt.ok)
			}
			if !ok {
				return
			}
			if a.Kind != tt.kind || a.Name != tt.artName || a.Step != tt.r.Name {
				t.Fatalf("artifact = %s step %q, want %s/%s step %q", a, a.Step, tt.kind, tt.artName, tt.r.Name)
			}
			if !strings.Contains(string(a.Body), tt.contains) {
				t.Fatalf("body %q does not contain %q", a.Body, tt.contains)
			}
		})
	}
}

func TestBuildArtifactsSummaryOnly(t *testing.T) {
	exit0, exit2 := 0, 2
	results := []validation.StepResult{
		{Name: "install", Status: validation.StatusPassed, ExitCode: &exit0, Reported: true},
		{Name: "test", Status: validation.StatusFailed, ExitCode: &exit2, Reported: true},
		{Name: "build", Status: validation.StatusNotRun, Reason: "install failed"},
	}
	got := BuildArtifacts(results, B)
	var names []string
	for _, a := range got {
		names = append(names, string(a.Kind)+"/"+a.Name)
	}
	want := []string{"log/install-summary.txt", "log/test-summary.txt", "log/summary.txt"}
	if d := cmp.Diff(want, names); d != "" {
		t.Fatalf("(-want +got):\n%s", d)
	}
	run := got[2]
	for _, s := range []string{"step: build", "status: not_run", `reason: "install failed"`, "exit code: 2"} {
		if !strings.Contains(string(run.Body), s) {
			t.Errorf("run summary lacks %q:\n%s", s, run.Body)
		}
	}

	// With full output somewhere, no run-wide summary is added.
	results[1].Output = validation.Output{Head: "boom", Bytes: 4}
	got = BuildArtifacts(results, B)
	if d := cmp.Diff([]Kind{KindLog, KindTestOutput}, []Kind{got[0].Kind, got[1].Kind}); d != "" || len(got) != 2 {
		t.Fatalf("with output: %v", got)
	}
}

func TestKindFor(t *testing.T) {
	want := map[string]Kind{"install": KindLog, "test": KindTestOutput, "typecheck": KindTypecheckOutput,
		"lint": KindLintOutput, "build": KindBuildOutput, "prepare": KindLog, "": KindLog}
	got := map[string]Kind{}
	for step := range want {
		got[step] = KindFor(validation.StepResult{Name: step})
	}
	if d := cmp.Diff(want, got, cmpopts.EquateEmpty()); d != "" {
		t.Fatalf("(-want +got):\n%s", d)
	}
	for _, k := range Kinds() {
		if !k.Valid() {
			t.Errorf("%q not valid", k)
		}
	}
	if Kind("../x").Valid() || Kind("").Valid() {
		t.Fatal("invalid kinds accepted")
	}
}

func BenchmarkBuilderStream(b *testing.B) {
	for _, size := range []int{64 << 20, 2 << 30} {
		b.Run(strconv.Itoa(size>>20)+"MiB", func(b *testing.B) {
			chunk := stream(64<<10, 9)
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				bld := NewBuilder(KindTestOutput, "test", "test.log", B)
				for range size / len(chunk) {
					bld.add(chunk)
				}
				if a := bld.Artifact(); len(a.Body) > B {
					b.Fatal("over budget")
				}
			}
		})
	}
}

// FuzzBuilder checks the body invariants on arbitrary output, cut at small
// budgets so every cut meets hostile bytes, streamed in two writes.
func FuzzBuilder(f *testing.F) {
	f.Add([]byte("plain text"), uint16(0), uint16(3))
	f.Add(stream(2000, 1), uint16(40), uint16(700))
	f.Add(append(bytes.Repeat([]byte("\x1b]0;"), 200), "😀\r\n"...), uint16(100), uint16(5))
	f.Fuzz(func(t *testing.T, data []byte, extra, at uint16) {
		budget := MinBodyBudget + int(extra%1024)
		b := NewBuilder(KindLog, "", "x", budget)
		cut := min(int(at), len(data))
		b.add(data[:cut])
		b.add(data[cut:])
		a := b.Artifact()
		checkInvariants(t, data, a, budget)
	})
}

func TestFromOutput(t *testing.T) {
	tests := []struct {
		name      string
		out       validation.Output
		wantBody  string
		wantFull  int64
		wantSHA   string
		truncated bool
	}{
		{name: "redacted capture keeps the executor's count and hash",
			out:      validation.Output{Head: "token=[redacted]\n", Bytes: 30, SHA256: "ab12", Redactions: 1},
			wantBody: "token=[redacted]\n", wantFull: 30, wantSHA: "ab12"},
		{name: "head and tail around what the executor cut",
			out:      validation.Output{Head: "start\n", Tail: "end\n", Bytes: 1000, SHA256: "cd34", Truncated: true},
			wantBody: "start\n" + omissionMarker(990) + "end\n", wantFull: 1000, wantSHA: "cd34", truncated: true},
		{name: "head and tail, not truncated, are the whole stream",
			out:      validation.Output{Head: "a", Tail: "b", Bytes: 2},
			wantBody: "ab", wantFull: 2},
		{name: "nothing captured",
			out:      validation.Output{},
			wantBody: "", wantFull: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := FromOutput(KindTestOutput, "test", "test.log", tt.out, B)
			if string(a.Body) != tt.wantBody || a.FullBytes != tt.wantFull || a.FullSHA256 != tt.wantSHA || a.Truncated != tt.truncated {
				t.Fatalf("artifact body %q full %d sha %q truncated %v", a.Body, a.FullBytes, a.FullSHA256, a.Truncated)
			}
		})
	}
}
