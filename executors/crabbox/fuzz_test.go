package crabbox

import (
	"encoding/json"
	"testing"

	"github.com/gilf-review/gilf/validation"
)

// FuzzParseTiming: whatever the CLI's stderr ends with, ParseTiming
// returns a record or an error without panicking, and a record it accepts
// survives a round trip unchanged.
func FuzzParseTiming(f *testing.F) {
	for _, s := range []string{
		`{"provider":"aws","exitCode":0,"commandMs":1,"totalMs":2}`,
		"progress\n{\"provider\":\"x\",\"exitCode\":3,\"commandMs\":1,\"totalMs\":2,\"extra\":[{}]}\n",
		`{"provider":"aws","exitCode":"0"}`,
		"{\n}",
		"",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		tm, err := ParseTiming(b)
		if err != nil {
			return
		}
		again, err := json.Marshal(tm)
		if err != nil {
			t.Fatalf("marshal %+v: %v", tm, err)
		}
		back, err := ParseTiming(again)
		if err != nil || back != tm {
			t.Fatalf("round trip of %+v: %+v, %v", tm, back, err)
		}
	})
}

// FuzzObserver: untrusted output never makes the observer emit more
// events than the plan has markers, nor block.
func FuzzObserver(f *testing.F) {
	plan := validation.Plan{Steps: []validation.Step{{Name: "install"}, {Name: "test"}}}
	const nonce = "0123456789abcdef"
	f.Add([]byte("__GILF_VALIDATION_START__:0123456789abcdef-install\nhi\n\n__GILF_VALIDATION_END__:0123456789abcdef-install:0\n"), 7)
	f.Add([]byte("__GILF_VALIDATION_START__:0123456789abcdef-test\r\n__GILF_VALIDATION_START__:0123456789abcdef-test\n"), 1)
	f.Fuzz(func(t *testing.T, b []byte, split int) {
		parser := validation.NewMarkerParser(plan, nonce, validation.CaptureOptions{})
		o := newObserver(plan, nonce, parser, 64)
		if split < 0 {
			split = -split
		}
		if split > len(b) {
			split = len(b)
		}
		for _, part := range [][]byte{b[:split], b[split:]} {
			if n, err := o.Write(part); err != nil || n != len(part) {
				t.Fatalf("Write = %d, %v", n, err)
			}
		}
		if len(o.events) > 4 {
			t.Fatalf("%d events for 2 steps", len(o.events))
		}
		if _, _, tail := o.state(); len(tail) > 64 {
			t.Fatalf("tail %d bytes", len(tail))
		}
	})
}
