package cmdrun

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gilf-review/gilf/validation"
)

func TestInheritEnv(t *testing.T) {
	secret := validation.Secret{Name: "TOKEN", Value: "s3cr3t-value-long-enough"}
	tests := []struct {
		name   string
		worker []string
		want   []string
	}{
		{
			name:   "allow-listed only",
			worker: []string{"PATH=/bin", "HOME=/root", "AWS_SECRET=x", "malformed"},
			want:   []string{"HOME=/root", "PATH=/bin", "X=1"},
		},
		{
			name:   "PATH defaulted",
			worker: []string{"HOME=/root", "PATH="},
			want:   []string{"HOME=/root", "PATH=/default", "X=1"},
		},
		{
			name:   "a value holding a secret is dropped",
			worker: []string{"PATH=/bin", "HOME=/x" + secret.Value},
			want:   []string{"PATH=/bin", "X=1"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			vals := InheritEnv(tc.worker, []string{"PATH", "HOME"}, []validation.Secret{secret}, "/default")
			vals["X"] = "1"
			if diff := cmp.Diff(tc.want, EnvList(vals)); diff != "" {
				t.Errorf("env (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDiagnostic(t *testing.T) {
	secret := validation.Secret{Name: "TOKEN", Value: "abcdefghijklmnopqrstuvwxyz"}
	tests := []struct {
		name, tail string
		limit      int
		want       string
	}{
		{name: "whole secret", tail: "x abcdefghijklmnopqrstuvwxyz y", limit: 100, want: "x [redacted:TOKEN] y"},
		{name: "secret's tail at a cut start", tail: "uvwxyz y", limit: 8, want: "[redacted:TOKEN] y"},
		{name: "under the limit: no cut, tail kept", tail: "uvwxyz y", limit: 9, want: "uvwxyz y"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Diagnostic(tc.tail, tc.limit, []validation.Secret{secret}); got != tc.want {
				t.Errorf("Diagnostic = %q, want %q", got, tc.want)
			}
		})
	}
}
