package crabbox

import (
	"encoding/json"
	"testing"
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
