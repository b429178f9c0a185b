package e2b

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gilf-review/gilf/executors/internal/remote"
)

func frames(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

func ev(s string) []byte   { return encodeEnvelope(0, []byte(s)) }
func endS(s string) []byte { return encodeEnvelope(flagEndStream, []byte(s)) }

func TestReadProcessStream(t *testing.T) {
	oversized := make([]byte, envelopeHeaderBytes)
	binary.BigEndian.PutUint32(oversized[1:], MaxFrameBytes+1)
	atLimit := encodeEnvelope(0, bytes.Repeat([]byte(" "), MaxFrameBytes-2))
	copy(atLimit[envelopeHeaderBytes:], "{")
	atLimit[len(atLimit)-1] = '}'
	tests := []struct {
		name    string
		stream  []byte
		want    remote.ProcEnd
		out     string
		pid     uint32
		wantErr error
		rpcCode string
	}{
		{
			name: "clean exit omits exitCode",
			stream: frames(ev(`{"event":{"start":{"pid":412}}}`), ev(`{"event":{"keepalive":{}}}`),
				ev(`{"event":{"data":{"stdout":"aGkK"}}}`), ev(`{"event":{"data":{"stderr":"ZXJyCg=="}}}`),
				ev(`{"event":{"end":{"exited":true,"status":"exit status 0"}}}`), endS(`{}`)),
			want: remote.ProcEnd{Exited: true, Code: 0, Status: "exit status 0"},
			out:  "hi\nerr\n",
			pid:  412,
		},
		{
			name:   "non-zero exit",
			stream: frames(ev(`{"event":{"end":{"exitCode":3,"exited":true,"status":"exit status 3","error":"exit status 3"}}}`), endS(`{}`)),
			want:   remote.ProcEnd{Exited: true, Code: 3, Status: "exit status 3"},
		},
		{
			name:   "killed at the deadline",
			stream: frames(ev(`{"event":{"end":{"exitCode":-1,"status":"signal: killed"}}}`), endS(`{"error":{"code":"deadline_exceeded","message":"x"}}`)),
			want:   remote.ProcEnd{Code: -1, Status: "signal: killed", TimedOut: true},
		},
		{
			name:   "deadline without end event",
			stream: endS(`{"error":{"code":"deadline_exceeded","message":"x"}}`),
			want:   remote.ProcEnd{Code: -1, Status: "killed at its deadline", TimedOut: true},
		},
		{name: "no end-of-stream frame", stream: ev(`{"event":{"end":{"exited":true}}}`), wantErr: ErrStreamBroken},
		{name: "empty body", stream: nil, wantErr: ErrStreamBroken},
		{name: "no end event", stream: frames(ev(`{"event":{"start":{"pid":1}}}`), endS(`{}`)), wantErr: ErrStreamBroken},
		{name: "truncated header", stream: []byte{0, 0, 0}, wantErr: ErrStreamBroken},
		{name: "truncated message", stream: ev(`{"event":{}}`)[:8], wantErr: ErrStreamBroken},
		{name: "compressed frame", stream: encodeEnvelope(flagCompressed, []byte(`{}`)), wantErr: ErrStreamBroken},
		{name: "frame over the limit", stream: oversized, wantErr: ErrStreamBroken},
		{name: "frame at the limit", stream: frames(atLimit, ev(`{"event":{"end":{"exited":true}}}`), endS(``)), want: remote.ProcEnd{Exited: true, Status: "exit code 0"}},
		{name: "undecodable event", stream: ev(`{"event":`), wantErr: ErrStreamBroken},
		{name: "connect error", stream: endS(`{"error":{"code":"unavailable","message":"sandbox not running"}}`), rpcCode: "unavailable"},
		{name: "unauthenticated", stream: endS(`{"error":{"code":"unauthenticated","message":"no user"}}`), rpcCode: "unauthenticated", wantErr: ErrUnauthorized},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			var pid uint32
			got, err := readProcessStream(&frameReader{r: bytes.NewReader(tc.stream), max: MaxFrameBytes}, &out, func(p uint32) { pid = p })
			if tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if tc.rpcCode != "" {
				var re *RPCError
				if !errors.As(err, &re) || re.Code != tc.rpcCode {
					t.Fatalf("err = %v, want RPCError %s", err, tc.rpcCode)
				}
			}
			if tc.wantErr != nil || tc.rpcCode != "" {
				return
			}
			if err != nil {
				t.Fatalf("err = %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("end (-want +got):\n%s", diff)
			}
			if out.String() != tc.out || pid != tc.pid {
				t.Errorf("output %q pid %d, want %q %d", out.String(), pid, tc.out, tc.pid)
			}
		})
	}
}

func FuzzReadProcessStream(f *testing.F) {
	f.Add(frames(ev(`{"event":{"start":{"pid":1}}}`), ev(`{"event":{"data":{"stdout":"aGkK"}}}`), ev(`{"event":{"end":{"exited":true}}}`), endS(`{}`)))
	f.Add(endS(`{"error":{"code":"deadline_exceeded"}}`))
	f.Add([]byte{2, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		var out bytes.Buffer
		end, err := readProcessStream(&frameReader{r: bytes.NewReader(b), max: 1 << 16}, &out, nil)
		if err == nil && !end.TimedOut && end.Status == "" {
			t.Fatalf("a clean stream without an end description: %+v", end)
		}
		if out.Len() > len(b)*3 {
			t.Fatalf("output %d bytes from %d input bytes", out.Len(), len(b))
		}
	})
}

func BenchmarkReadProcessStream(b *testing.B) {
	chunk := bytes.Repeat([]byte("output line of a test run\n"), 1260) // ≈32 KiB, envd's chunk
	msg, err := json.Marshal(map[string]any{"event": map[string]any{"data": map[string]any{"stdout": chunk}}})
	if err != nil {
		b.Fatal(err)
	}
	var stream []byte
	for range 32 { // 1 MiB of output
		stream = append(stream, encodeEnvelope(0, msg)...)
	}
	stream = append(stream, ev(`{"event":{"end":{"exited":true}}}`)...)
	stream = append(stream, endS(`{}`)...)
	b.SetBytes(int64(32 * len(chunk)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := readProcessStream(&frameReader{r: bytes.NewReader(stream), max: MaxFrameBytes}, io.Discard, nil); err != nil {
			b.Fatal(err)
		}
	}
}
