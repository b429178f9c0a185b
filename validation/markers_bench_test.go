package validation

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"
)

// benchChunk is the write size executors typically deliver (a pipe read).
const benchChunk = 32 << 10

// runnerLines are test-runner-like lines (vitest, jest, npm, tsc, eslint).
func runnerLines() []string {
	return []string{
		" ✓ src/components/Button.test.tsx > Button > renders the label %d (3 ms)\n",
		" ✓ src/utils/date.test.ts > formatDate > handles UTC offsets %d (1 ms)\n",
		" × src/api/client.test.ts > retries on 503 %d (12 ms)\n",
		"AssertionError: expected '2024-01-01' to be '2024-01-02' // Object.is equality %d\n",
		"    at /repo/node_modules/@vitest/expect/dist/index.js:%d:12\n",
		"    at processTicksAndRejections (node:internal/process/task_queues:95:%d)\n",
		"npm WARN deprecated inflight@1.0.6: This module is not supported, and leaks memory %d\n",
		"src/server/routes.ts(%d,7): error TS2345: Argument of type 'string' is not assignable.\n",
		"  %d:15  warning  Unexpected console statement  no-console\n",
		"\n",
		"Test Files  3 failed | 41 passed (44)     Tests  %d passed\n",
	}
}

// runnerOutput returns about n bytes of runner-like lines.
func runnerOutput(rng *rand.Rand, n int) []byte {
	lines := runnerLines()
	var b bytes.Buffer
	b.Grow(n + 128)
	for i := 0; b.Len() < n; i++ {
		line := lines[rng.IntN(len(lines))]
		if bytes.Contains([]byte(line), []byte("%d")) {
			fmt.Fprintf(&b, line, i)
		} else {
			b.WriteString(line)
		}
	}
	return b.Bytes()
}

// benchStream is a whole marker-shell run of markerPlan of about size
// bytes: install 5%, test 70%, lint 10%, build 15%.
func benchStream(size int) []byte {
	rng := rand.New(rand.NewPCG(42, 42))
	var b bytes.Buffer
	for _, part := range []struct {
		step  string
		share int
	}{{StepInstall, 5}, {StepTest, 70}, {StepLint, 10}, {StepBuild, 15}} {
		b.WriteString(startLine(part.step))
		b.Write(runnerOutput(rng, size*part.share/100))
		b.WriteString(endLine(part.step, "0"))
	}
	return b.Bytes()
}

func writeChunks(b *testing.B, w interface{ Write([]byte) (int, error) }, data []byte) {
	for len(data) > 0 {
		k := min(benchChunk, len(data))
		if _, err := w.Write(data[:k]); err != nil {
			b.Fatal(err)
		}
		data = data[k:]
	}
}

// BenchmarkMarkerParser is the whole parser: segmentation, a pass-through
// Redactor, and a Capture that keeps head and tail and hashes every byte.
func BenchmarkMarkerParser(b *testing.B) {
	data := benchStream(64 << 20)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		p := NewMarkerParser(markerPlan(), testNonce, CaptureOptions{})
		writeChunks(b, p, data)
		if _, integrity := p.Finish(); integrity != "" {
			b.Fatal(integrity)
		}
	}
}

// BenchmarkMarkerParserSecrets is the parser with redaction active.
func BenchmarkMarkerParserSecrets(b *testing.B) {
	data := benchStream(64 << 20)
	secrets := []Secret{
		{Name: "GITHUB_TOKEN", Value: "ghs_16C7e42F292c6912E7710c838347Ae178B4a"},
		{Name: "AWS_SECRET_ACCESS_KEY", Value: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"},
		{Name: "NPM_TOKEN", Value: "npm_abcdefghijklmnopqrstuvwxyz0123456789"},
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		p := NewMarkerParser(markerPlan(), testNonce, CaptureOptions{Secrets: secrets})
		writeChunks(b, p, data)
		if _, integrity := p.Finish(); integrity != "" {
			b.Fatal(integrity)
		}
	}
}

// discardSink counts what the scanner hands on.
type discardSink struct{ textBytes, lines int }

func (d *discardSink) text(b []byte)              { d.textBytes += len(b) }
func (d *discardSink) line(b []byte, _ bool) bool { d.lines++; return true }

// BenchmarkMarkerScan is the parser's segmentation alone: finding the
// marker lines and handing the rest on in bulk.
func BenchmarkMarkerScan(b *testing.B) {
	data := benchStream(64 << 20)
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		var d discardSink
		s := newMarkerScanner(&d)
		for rest := data; len(rest) > 0; {
			k := min(benchChunk, len(rest))
			s.write(rest[:k])
			rest = rest[k:]
		}
		s.finish()
		if d.lines != 8 {
			b.Fatalf("%d marker lines, want 8", d.lines)
		}
	}
}

// BenchmarkBytesIndexScan is the baseline: a plain bytes.Index scan for the
// marker prefix over the same input, in the same writes.
func BenchmarkBytesIndexScan(b *testing.B) {
	data := benchStream(64 << 20)
	b.SetBytes(int64(len(data)))
	prefix := []byte(markerCommon)
	for b.Loop() {
		hits := 0
		for rest := data; len(rest) > 0; {
			chunk := rest[:min(benchChunk, len(rest))]
			for {
				i := bytes.Index(chunk, prefix)
				if i < 0 {
					break
				}
				hits++
				chunk = chunk[i+len(prefix):]
			}
			rest = rest[min(benchChunk, len(rest)):]
		}
		if hits != 8 {
			b.Fatalf("%d hits, want 8", hits)
		}
	}
}

// BenchmarkCapture is the Capture alone (copy into head/tail + SHA-256):
// the ceiling for the whole parser.
func BenchmarkCapture(b *testing.B) {
	data := benchStream(64 << 20)
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		c := NewCapture(0)
		writeChunks(b, c, data)
		if c.Output().Bytes != int64(len(data)) {
			b.Fatal("short count")
		}
	}
}

// BenchmarkMarkerParserStream feeds one step a stream of growing size;
// allocations per run must stay flat (they do not depend on the size).
func BenchmarkMarkerParserStream(b *testing.B) {
	block := runnerOutput(rand.New(rand.NewPCG(1, 1)), 1<<20)
	for _, size := range []int{64 << 20, 256 << 20, 1 << 30} {
		b.Run(fmt.Sprintf("%dMiB", size>>20), func(b *testing.B) {
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				p := NewMarkerParser(markerPlan(), testNonce, CaptureOptions{})
				writeChunks(b, p, []byte(startLine(StepInstall)+endLine(StepInstall, "0")+startLine(StepTest)))
				for n := 0; n < size; n += len(block) {
					writeChunks(b, p, block)
				}
				writeChunks(b, p, []byte(endLine(StepTest, "1")))
				if rs, integrity := p.Finish(); integrity != "" || rs[1].Output.Bytes < int64(size) {
					b.Fatalf("integrity %q, %d bytes", integrity, rs[1].Output.Bytes)
				}
			}
		})
	}
}
