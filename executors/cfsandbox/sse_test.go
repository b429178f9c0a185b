package cfsandbox

import (
	"bytes"
	"encoding/base64"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gilf-review/gilf/executors/internal/remote"
)

func TestReadExecStream(t *testing.T) {
	long := "event: stdout\ndata: " + strings.Repeat("A", MaxSSELineBytes+1) + "\n\n"
	atLimit := "event: stdout\ndata: " + strings.Repeat("QUFB", (MaxSSELineBytes-6)/4) + "\n\n" + "event: exit\ndata: {\"exit_code\":0}\n\n"
	tests := []struct {
		name    string
		stream  string
		want    execEnd
		out     string
		outLen  int
		wantErr error
	}{
		{name: "pass", stream: "event: stdout\ndata: aGkK\n\nevent: stderr\ndata: ZXJyCg==\n\nevent: exit\ndata: {\"exit_code\":0}\n\n", out: "hi\nerr\n"},
		{name: "fail", stream: "event: exit\ndata: {\"exit_code\":3}\n\n", want: execEnd{exitCode: 3}},
		{name: "crlf, comments and ids", stream: ": ping\r\nid: 1\r\nevent: stdout\r\ndata: aGkK\r\n\r\nevent: exit\r\ndata: {\"exit_code\":0}\r\n\r\n", out: "hi\n"},
		{name: "data split over lines", stream: "event: exit\ndata: {\"exit_code\":\ndata: 5}\n\n", want: execEnd{exitCode: 5}},
		{name: "error event", stream: "event: error\ndata: {\"error\":\"boom\",\"code\":\"exec_transport_error\"}\n\n", want: execEnd{exitCode: -1, errCode: "exec_transport_error", errMsg: "boom"}},
		{name: "line at the limit", stream: atLimit, outLen: 3 * ((MaxSSELineBytes - 6) / 4)},
		{name: "no exit event", stream: "event: stdout\ndata: aGkK\n\n", wantErr: ErrStreamBroken},
		{name: "cut inside an event", stream: "event: stdout\ndata: aGkK\n", wantErr: ErrStreamBroken},
		{name: "cut inside a line", stream: "event: exit\ndata: {\"exit", wantErr: ErrStreamBroken},
		{name: "bad base64", stream: "event: stdout\ndata: !!!\n\n", wantErr: ErrStreamBroken},
		{name: "exit without a code", stream: "event: exit\ndata: {}\n\n", wantErr: ErrStreamBroken},
		{name: "line over the limit", stream: long, wantErr: ErrStreamBroken},
		{name: "empty", stream: "", wantErr: ErrStreamBroken},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			got, err := readExecStream(strings.NewReader(tc.stream), &out)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("err = %v, want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("err = %v", err)
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(execEnd{})); diff != "" {
				t.Errorf("end (-want +got):\n%s", diff)
			}
			if tc.outLen > 0 {
				if out.Len() != tc.outLen {
					t.Errorf("output %d bytes, want %d", out.Len(), tc.outLen)
				}
			} else if out.String() != tc.out {
				t.Errorf("output %q, want %q", out.String(), tc.out)
			}
		})
	}
}

func TestToProcEnd(t *testing.T) {
	tests := []struct {
		name    string
		end     execEnd
		past    bool
		want    remote.ProcEnd
		wantErr bool
	}{
		{name: "exit 0", end: execEnd{}, want: remote.ProcEnd{Exited: true, Status: "exit code 0"}},
		{name: "killed at timeout", end: execEnd{exitCode: -1}, past: true, want: remote.ProcEnd{Code: -1, Status: "exit code -1", TimedOut: true}},
		{name: "killed early", end: execEnd{exitCode: -1}, want: remote.ProcEnd{Code: -1, Status: "exit code -1"}},
		{name: "error at timeout", end: execEnd{exitCode: -1, errCode: "exec_error", errMsg: "timed out"}, past: true, want: remote.ProcEnd{Code: -1, Status: "stopped at timeout_ms: timed out", TimedOut: true}},
		{name: "error early", end: execEnd{exitCode: -1, errCode: "exec_error", errMsg: "no shell"}, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := toProcEnd(tc.end, tc.past, "run step")
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func FuzzReadExecStream(f *testing.F) {
	f.Add("event: stdout\ndata: aGkK\n\nevent: exit\ndata: {\"exit_code\":0}\n\n")
	f.Add("event: error\ndata: {\"error\":\"x\"}\n\n")
	f.Add(": c\r\n\r\n")
	f.Fuzz(func(t *testing.T, s string) {
		var out bytes.Buffer
		end, err := readExecStream(strings.NewReader(s), &out)
		if err == nil && end.errCode == "" && !strings.Contains(s, "exit") {
			t.Fatalf("a clean end without an exit event: %+v", end)
		}
		if out.Len() > len(s) {
			t.Fatalf("%d output bytes from %d input bytes", out.Len(), len(s))
		}
	})
}

func BenchmarkReadExecStream(b *testing.B) {
	chunk := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte("output line of a test run\n"), 630)) // ≈16 KiB
	var s strings.Builder
	for range 64 { // 1 MiB of output
		s.WriteString("event: stdout\ndata: " + chunk + "\n\n")
	}
	s.WriteString("event: exit\ndata: {\"exit_code\":0}\n\n")
	stream := s.String()
	b.SetBytes(int64(64 * 630 * 26))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := readExecStream(strings.NewReader(stream), io.Discard); err != nil {
			b.Fatal(err)
		}
	}
}
