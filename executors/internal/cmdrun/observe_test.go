package cmdrun

import (
	"testing"

	"github.com/gilf-review/gilf/validation"
)

// FuzzObserver: untrusted output never makes the observer emit more
// events than the plan has markers, nor block.
func FuzzObserver(f *testing.F) {
	plan := validation.Plan{Steps: []validation.Step{{Name: "install"}, {Name: "test"}}}
	const nonce = "0123456789abcdef"
	f.Add([]byte("__GILF_VALIDATION_START__:0123456789abcdef-install\nhi\n\n__GILF_VALIDATION_END__:0123456789abcdef-install:0\n"), 7)
	f.Add([]byte("__GILF_VALIDATION_START__:0123456789abcdef-test\r\n__GILF_VALIDATION_START__:0123456789abcdef-test\n"), 1)
	f.Fuzz(func(t *testing.T, b []byte, split int) {
		parser := validation.NewMarkerParser(plan, nonce, validation.CaptureOptions{})
		o := NewObserver(plan, nonce, parser, 64)
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
		if len(o.Events()) > 4 {
			t.Fatalf("%d events for 2 steps", len(o.Events()))
		}
		if _, _, tail := o.State(); len(tail) > 64 {
			t.Fatalf("tail %d bytes", len(tail))
		}
	})
}
