package costs

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestBuiltinCards(t *testing.T) {
	got := BuiltinCards()
	want := Cards{
		"managed-e2b":        {VCPUUsdPerSec: 0.000014, MemoryGibUsdPerSec: 0.0000045},
		"managed-cf-sandbox": {VCPUUsdPerSec: 0.00002, MemoryGibUsdPerSec: 0.0000025},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("builtin cards (-want +got):\n%s", d)
	}
	// A fresh copy each call: changing one must not change the next.
	got["managed-e2b"] = Card{}
	if BuiltinCards()["managed-e2b"].VCPUUsdPerSec != 0.000014 {
		t.Fatal("BuiltinCards shares state between calls")
	}
	// E2B's documented example: 8 vCPU + 4 GB for one hour costs $0.468.
	e := want["managed-e2b"]
	if hour := 3600 * (8*e.VCPUUsdPerSec + 4*e.MemoryGibUsdPerSec); hour < 0.4679 || hour > 0.4681 {
		t.Fatalf("e2b 8 vCPU + 4 GiB hour = %v, want 0.468", hour)
	}
}

func TestParseRates(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    Cards
		wantErr []string // substrings the error must hold
	}{
		{name: "empty means no overrides", in: "", want: Cards{}},
		{name: "spaces mean no overrides", in: "  \n", want: Cards{}},
		{name: "documented example", in: `{"managed-e2b":{"vcpuUsdPerSec":0.000014,"memoryGibUsdPerSec":0.0000045}}`,
			want: Cards{"managed-e2b": {VCPUUsdPerSec: 0.000014, MemoryGibUsdPerSec: 0.0000045}}},
		{name: "card for an executor without a builtin", in: `{"self-host":{"vcpuUsdPerSec":0,"memoryGibUsdPerSec":0.1}}`,
			want: Cards{"self-host": {VCPUUsdPerSec: 0, MemoryGibUsdPerSec: 0.1}}},
		{name: "empty object", in: `{}`, want: Cards{}},
		{name: "invalid JSON", in: `{"managed-e2b":`, wantErr: []string{"invalid JSON"}},
		{name: "not an object", in: `[1,2]`, wantErr: []string{"invalid JSON"}},
		{name: "null", in: `null`, wantErr: []string{"must be a JSON object"}},
		{name: "trailing data", in: `{} {}`, wantErr: []string{"trailing data"}},
		{name: "NaN is not JSON", in: `{"managed-e2b":{"vcpuUsdPerSec":NaN,"memoryGibUsdPerSec":1}}`, wantErr: []string{"invalid JSON"}},
		{name: "out of range number", in: `{"managed-e2b":{"vcpuUsdPerSec":1e999,"memoryGibUsdPerSec":1}}`, wantErr: []string{"managed-e2b"}},
		{name: "unknown field", in: `{"managed-e2b":{"vcpuUsdPerSec":1,"memoryGibUsdPerSec":1,"diskUsdPerSec":1}}`,
			wantErr: []string{`"managed-e2b"`, "diskUsdPerSec"}},
		{name: "misspelt field", in: `{"managed-e2b":{"vcpuUSDPerSec":1,"memoryGibUsdPerSec":1}}`,
			wantErr: []string{`"managed-e2b"`}},
		{name: "missing field", in: `{"managed-cf-sandbox":{"vcpuUsdPerSec":1}}`,
			wantErr: []string{`"managed-cf-sandbox"`, "memoryGibUsdPerSec: missing"}},
		{name: "negative rate", in: `{"managed-e2b":{"vcpuUsdPerSec":-0.1,"memoryGibUsdPerSec":1}}`,
			wantErr: []string{`"managed-e2b"`, "vcpuUsdPerSec", "negative"}},
		{name: "string rate", in: `{"managed-e2b":{"vcpuUsdPerSec":"0.1","memoryGibUsdPerSec":1}}`,
			wantErr: []string{`"managed-e2b"`}},
		{name: "null card", in: `{"managed-e2b":null}`, wantErr: []string{`"managed-e2b"`, "null"}},
		{name: "every bad card is named", in: `{"a":{"vcpuUsdPerSec":-1,"memoryGibUsdPerSec":1},"b":{"vcpuUsdPerSec":1,"memoryGibUsdPerSec":-2}}`,
			wantErr: []string{`"a"`, `"b"`, "vcpuUsdPerSec", "memoryGibUsdPerSec"}},
		{name: "empty executor name", in: `{"":{"vcpuUsdPerSec":1,"memoryGibUsdPerSec":1}}`, wantErr: []string{"empty executor name"}},
		{name: "model card", in: `{"model:gpt-4.1-mini":{"inputUsdPerMTok":0.4,"outputUsdPerMTok":1.6}}`,
			want: Cards{"model:gpt-4.1-mini": {InputUsdPerMTok: 0.4, OutputUsdPerMTok: 1.6}}},
		{name: "free model card", in: `{"model:local-llm":{"inputUsdPerMTok":0,"outputUsdPerMTok":0}}`,
			want: Cards{"model:local-llm": {}}},
		{name: "executor and model cards side by side",
			in:   `{"managed-e2b":{"vcpuUsdPerSec":1,"memoryGibUsdPerSec":2},"model:m":{"inputUsdPerMTok":3,"outputUsdPerMTok":4}}`,
			want: Cards{"managed-e2b": {VCPUUsdPerSec: 1, MemoryGibUsdPerSec: 2}, "model:m": {InputUsdPerMTok: 3, OutputUsdPerMTok: 4}}},
		{name: "model card missing a field", in: `{"model:m":{"inputUsdPerMTok":1}}`,
			wantErr: []string{`"model:m"`, "outputUsdPerMTok: missing"}},
		{name: "model card with per-second fields", in: `{"model:m":{"vcpuUsdPerSec":1,"memoryGibUsdPerSec":1}}`,
			wantErr: []string{`"model:m"`, `unknown field "vcpuUsdPerSec"`, `unknown field "memoryGibUsdPerSec"`, "a model card has exactly inputUsdPerMTok and outputUsdPerMTok", "inputUsdPerMTok: missing"}},
		{name: "model card with mixed fields", in: `{"model:m":{"inputUsdPerMTok":1,"outputUsdPerMTok":1,"vcpuUsdPerSec":1}}`,
			wantErr: []string{`"model:m"`, `unknown field "vcpuUsdPerSec"`}},
		{name: "executor card with token fields", in: `{"managed-e2b":{"vcpuUsdPerSec":1,"memoryGibUsdPerSec":1,"inputUsdPerMTok":1}}`,
			wantErr: []string{`"managed-e2b"`, `unknown field "inputUsdPerMTok"`, "an executor card has exactly vcpuUsdPerSec and memoryGibUsdPerSec"}},
		{name: "executor card of token fields only", in: `{"gpt-4.1-mini":{"inputUsdPerMTok":1,"outputUsdPerMTok":1}}`,
			wantErr: []string{`"gpt-4.1-mini"`, "vcpuUsdPerSec: missing"}},
		{name: "model card field case", in: `{"model:m":{"InputUsdPerMTok":1,"outputUsdPerMTok":1}}`,
			wantErr: []string{`"model:m"`, `unknown field "InputUsdPerMTok"`}},
		{name: "negative token rate", in: `{"model:m":{"inputUsdPerMTok":1,"outputUsdPerMTok":-1}}`,
			wantErr: []string{`"model:m"`, "outputUsdPerMTok", "negative"}},
		{name: "out of range token rate", in: `{"model:m":{"inputUsdPerMTok":1e999,"outputUsdPerMTok":1}}`,
			wantErr: []string{`"model:m"`, "inputUsdPerMTok"}},
		{name: "string token rate", in: `{"model:m":{"inputUsdPerMTok":"1","outputUsdPerMTok":1}}`,
			wantErr: []string{`"model:m"`, "inputUsdPerMTok"}},
		{name: "null model card", in: `{"model:m":null}`, wantErr: []string{`"model:m"`, "null"}},
		{name: "empty model name", in: `{"model:":{"inputUsdPerMTok":1,"outputUsdPerMTok":1}}`, wantErr: []string{"empty model name"}},
		{name: "model:unknown is reserved", in: `{"model:unknown":{"inputUsdPerMTok":1,"outputUsdPerMTok":1}}`,
			wantErr: []string{`"model:unknown"`, "never priced"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseRates(tt.in)
			if tt.wantErr != nil {
				if err == nil {
					t.Fatalf("ParseRates(%q) = %v, want an error", tt.in, got)
				}
				for _, s := range tt.wantErr {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q does not mention %q", err, s)
					}
				}
				if !strings.Contains(err.Error(), "GILF_VALIDATION_COST_RATES") {
					t.Errorf("error %q does not name the setting", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseRates(%q): %v", tt.in, err)
			}
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Fatalf("(-want +got):\n%s", d)
			}
		})
	}
}

func TestLoadCardsOverrides(t *testing.T) {
	cards, err := LoadCards(`{"managed-e2b":{"vcpuUsdPerSec":1,"memoryGibUsdPerSec":2}}`)
	if err != nil {
		t.Fatal(err)
	}
	want := Cards{
		"managed-e2b":        {VCPUUsdPerSec: 1, MemoryGibUsdPerSec: 2},
		"managed-cf-sandbox": BuiltinCards()["managed-cf-sandbox"],
	}
	if d := cmp.Diff(want, cards); d != "" {
		t.Fatalf("(-want +got):\n%s", d)
	}
	if _, err := LoadCards("{"); err == nil {
		t.Fatal("LoadCards accepted invalid JSON")
	}
}

func TestModelCardKey(t *testing.T) {
	if got := ModelCardKey("gpt-4.1-mini"); got != "model:gpt-4.1-mini" {
		t.Fatalf("ModelCardKey = %q", got)
	}
	for name := range BuiltinCards() {
		if strings.HasPrefix(name, ModelPrefix) {
			t.Errorf("built-in model card %q: model prices vary by provider, so none is built in", name)
		}
	}
}
