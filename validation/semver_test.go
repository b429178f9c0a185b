package validation

import (
	"strings"
	"testing"
)

func TestSemverRange(t *testing.T) {
	tests := []struct {
		rng  string
		in   []string // versions that satisfy it
		out  []string // versions that do not
		fail bool     // not a range at all
	}{
		// Real engines.node values of the shared corpus.
		{rng: ">=18", in: []string{"18.0.0", "v20.20.2", "26.1.0"}, out: []string{"17.9.1", "18.0.0-rc.1"}},
		{rng: ">= 18", in: []string{"18.0.0", "22.1.0"}, out: []string{"16.20.2"}},
		{rng: "^18 || ^20 || >=22", in: []string{"18.19.1", "20.20.2", "22.0.0", "24.1.0"}, out: []string{"19.9.0", "21.7.3", "16.0.0"}},
		{rng: ">=18.18.0", in: []string{"18.18.0", "20.0.0"}, out: []string{"18.17.1"}},
		{rng: "20.x", in: []string{"20.0.0", "20.20.2"}, out: []string{"21.0.0", "19.9.9"}},
		{rng: "22.x", in: []string{"22.11.0"}, out: []string{"20.20.2", "23.0.0"}},
		{rng: "v20.11.1", in: []string{"20.11.1", "v20.11.1"}, out: []string{"20.11.2", "20.20.2"}},
		{rng: "18 - 20", in: []string{"18.0.0", "19.5.0", "20.99.0"}, out: []string{"17.9.9", "21.0.0"}},
		{rng: "^20.19.0 || ^22.13.0 || >=24", in: []string{"20.19.0", "22.13.0", "24.0.0"}, out: []string{"20.18.9", "21.0.0", "22.12.0", "23.9.9"}},
		{rng: "^20.19.0 || >=22.12.0", in: []string{"20.20.2", "22.12.0"}, out: []string{"22.11.0", "21.0.0"}},
		{rng: "^22.22.2 || ^24.15.0 || >=26.0.0", in: []string{"22.22.2", "26.0.0"}, out: []string{"20.20.2", "24.14.0", "25.0.0"}},
		{rng: "20 || >=22", in: []string{"20.0.0", "22.0.0"}, out: []string{"21.0.0", "19.0.0"}},
		{rng: ">=16.9.0", in: []string{"16.9.0"}, out: []string{"16.8.9"}},
		{rng: ">= 22.18.0", in: []string{"22.18.0"}, out: []string{"20.20.2"}},
		{rng: ">=12.20.0", in: []string{"20.20.2"}, out: []string{"12.19.0"}},
		// Operators and partial versions (node-semver's test fixtures).
		{rng: "1.2.3", in: []string{"1.2.3"}, out: []string{"1.2.4", "1.2.3-beta"}},
		{rng: "=1.2.3", in: []string{"1.2.3"}, out: []string{"1.2.2"}},
		{rng: "= 1.2.3", in: []string{"1.2.3"}, out: []string{"1.2.2"}},
		{rng: "1", in: []string{"1.0.0", "1.9.9"}, out: []string{"2.0.0", "0.9.9", "2.0.0-0"}},
		{rng: "1.2", in: []string{"1.2.0", "1.2.99"}, out: []string{"1.3.0", "1.1.9"}},
		{rng: "1.2.*", in: []string{"1.2.0", "1.2.5"}, out: []string{"1.3.0"}},
		{rng: "1.x.x", in: []string{"1.0.0", "1.5.5"}, out: []string{"2.0.0"}},
		{rng: "*", in: []string{"0.0.0", "20.20.2"}, out: []string{"1.0.0-rc.1"}},
		{rng: "x", in: []string{"3.0.0"}},
		{rng: "", in: []string{"3.0.0"}},
		{rng: ">1.2.3", in: []string{"1.2.4"}, out: []string{"1.2.3"}},
		{rng: ">1.2", in: []string{"1.3.0"}, out: []string{"1.2.9"}},
		{rng: ">1", in: []string{"2.0.0"}, out: []string{"1.9.9"}},
		{rng: "<1.2.3", in: []string{"1.2.2"}, out: []string{"1.2.3", "1.2.3-beta"}},
		{rng: "<1.2", in: []string{"1.1.9"}, out: []string{"1.2.0"}},
		{rng: "<1", in: []string{"0.9.9"}, out: []string{"1.0.0"}},
		{rng: "<=1.2.3", in: []string{"1.2.3"}, out: []string{"1.2.4"}},
		{rng: "<=1.2", in: []string{"1.2.9"}, out: []string{"1.3.0"}},
		{rng: "<= 1", in: []string{"1.9.9"}, out: []string{"2.0.0"}},
		{rng: ">=1.2", in: []string{"1.2.0"}, out: []string{"1.1.9"}},
		{rng: ">*", out: []string{"1.0.0"}},
		{rng: "<*", out: []string{"1.0.0"}},
		{rng: ">=*", in: []string{"1.0.0"}},
		{rng: ">=1.2.3 <2", in: []string{"1.2.3", "1.9.9"}, out: []string{"2.0.0", "1.2.2"}},
		{rng: ">=1.0.0   <=1.5.0", in: []string{"1.5.0"}, out: []string{"1.5.1"}},
		// Tilde.
		{rng: "~1.2.3", in: []string{"1.2.3", "1.2.9"}, out: []string{"1.3.0", "1.2.2"}},
		{rng: "~1.2", in: []string{"1.2.0", "1.2.9"}, out: []string{"1.3.0"}},
		{rng: "~1", in: []string{"1.0.0", "1.9.9"}, out: []string{"2.0.0"}},
		{rng: "~>1.2.3", in: []string{"1.2.5"}, out: []string{"1.3.0"}},
		{rng: "~ 1.2.3", in: []string{"1.2.5"}, out: []string{"1.3.0"}},
		{rng: "~0.2.3", in: []string{"0.2.3"}, out: []string{"0.3.0"}},
		{rng: "~1.2.3-beta.2", in: []string{"1.2.3-beta.2", "1.2.3-beta.4", "1.2.3", "1.2.9"}, out: []string{"1.2.4-beta.2", "1.2.3-beta.1", "1.3.0"}},
		// Caret, with the 0.x rules.
		{rng: "^1.2.3", in: []string{"1.2.3", "1.9.9"}, out: []string{"2.0.0", "1.2.2"}},
		{rng: "^0.2.3", in: []string{"0.2.3", "0.2.9"}, out: []string{"0.3.0", "1.0.0"}},
		{rng: "^0.0.3", in: []string{"0.0.3"}, out: []string{"0.0.4"}},
		{rng: "^1.2", in: []string{"1.2.0", "1.9.0"}, out: []string{"2.0.0"}},
		{rng: "^0.0", in: []string{"0.0.0", "0.0.9"}, out: []string{"0.1.0"}},
		{rng: "^0.1", in: []string{"0.1.0"}, out: []string{"0.2.0"}},
		{rng: "^0.x", in: []string{"0.0.0", "0.9.0"}, out: []string{"1.0.0"}},
		{rng: "^0", in: []string{"0.9.9"}, out: []string{"1.0.0"}},
		{rng: "^1.x", in: []string{"1.0.0"}, out: []string{"2.0.0"}},
		{rng: "^0.0.x", in: []string{"0.0.5"}, out: []string{"0.1.0"}},
		{rng: "^*", in: []string{"5.0.0"}},
		{rng: "^1.2.3-beta.2", in: []string{"1.2.3-beta.4", "1.9.0"}, out: []string{"1.2.4-beta.2", "2.0.0"}},
		{rng: "^ 1.2.3", in: []string{"1.5.0"}},
		// Hyphen ranges.
		{rng: "1.2.3 - 2.3.4", in: []string{"1.2.3", "2.3.4"}, out: []string{"2.3.5", "1.2.2"}},
		{rng: "1.2 - 2.3.4", in: []string{"1.2.0"}, out: []string{"1.1.9"}},
		{rng: "1.2.3 - 2.3", in: []string{"2.3.9"}, out: []string{"2.4.0"}},
		{rng: "1.2.3 - 2", in: []string{"2.9.9"}, out: []string{"3.0.0"}},
		{rng: "* - 2", in: []string{"0.0.1"}, out: []string{"3.0.0"}},
		{rng: "v1.2.3 - v2", in: []string{"1.2.3"}},
		// Or with an empty side means anything.
		{rng: "1 || ", in: []string{"5.0.0"}},
		// Not ranges.
		{rng: "lts/*", fail: true},
		{rng: "node", fail: true},
		{rng: "garbage", fail: true},
		{rng: "1.2.3.4", fail: true},
		{rng: ">=", fail: true},
		{rng: "1.x.3", fail: true},
		{rng: "01.2.3", fail: true},
		{rng: ">=1.2.3<2", fail: true},
		{rng: "1.2.3-", fail: true},
		{rng: "9007199254740992", fail: true},
		{rng: "1.2 -", fail: true},
		{rng: strings.Repeat("1 || ", 300), fail: true},
	}
	for _, tc := range tests {
		t.Run(tc.rng, func(t *testing.T) {
			r, err := parseRange(tc.rng)
			if tc.fail {
				if err == nil {
					t.Fatalf("parseRange(%q) = %v, want an error", tc.rng, r)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseRange(%q): %v", tc.rng, err)
			}
			for _, s := range tc.in {
				v, ok := parseSemver(s)
				if !ok {
					t.Fatalf("bad test version %q", s)
				}
				if !r.satisfies(v) {
					t.Errorf("%q does not satisfy %q, want it to", s, tc.rng)
				}
			}
			for _, s := range tc.out {
				v, ok := parseSemver(s)
				if !ok {
					t.Fatalf("bad test version %q", s)
				}
				if r.satisfies(v) {
					t.Errorf("%q satisfies %q, want it not to", s, tc.rng)
				}
			}
		})
	}
}

func TestCompareSemver(t *testing.T) {
	// semver.org §11's precedence example, in order.
	order := []string{"1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-alpha.beta", "1.0.0-beta", "1.0.0-beta.2", "1.0.0-beta.11", "1.0.0-rc.1", "1.0.0", "1.0.1", "1.1.0", "2.0.0"}
	for i := range order {
		for j := range order {
			a, _ := parseSemver(order[i])
			b, _ := parseSemver(order[j])
			want := 0
			switch {
			case i < j:
				want = -1
			case i > j:
				want = 1
			}
			if got := compareSemver(a, b); got != want {
				t.Errorf("compare(%s, %s) = %d, want %d", order[i], order[j], got, want)
			}
		}
	}
	for _, bad := range []string{"", "v", "1", "1.2", "1.2.3.4", "a.b.c", "1.2.3-01", "1.2.3+", "-1.2.3"} {
		if _, ok := parseSemver(bad); ok {
			t.Errorf("parseSemver(%q) accepted it", bad)
		}
	}
	if v, ok := parseSemver("v20.20.2+build.5"); !ok || v.major != 20 || v.minor != 20 || v.patch != 2 {
		t.Errorf("parseSemver with build: %+v %v", v, ok)
	}
}

func TestNodeNote(t *testing.T) {
	req := func(r, src string) *NodeRequirement { return &NodeRequirement{Range: r, Source: src} }
	tests := []struct {
		name string
		req  *NodeRequirement
		node string
		want string // "" or a substring
	}{
		{name: "no requirement", node: "v20.20.2"},
		{name: "unknown node", req: req(">=22", SourceEnginesNode), node: ""},
		{name: "unparseable node", req: req(">=22", SourceEnginesNode), node: "twenty"},
		{name: "satisfied", req: req(">=18", SourceEnginesNode), node: "v20.20.2"},
		{name: "satisfied major in .nvmrc", req: req("20", NodeVersionFileNVM), node: "v20.20.2"},
		{name: "satisfied or", req: req("^18 || ^20 || >=22", SourceEnginesNode), node: "v20.20.2"},
		{name: "not satisfied", req: req(">=22", SourceEnginesNode), node: "v20.20.2",
			want: `the worker's node v20.20.2 does not satisfy engines.node ">=22"; the scripts ran on it anyway`},
		{name: "exact .nvmrc", req: req("v20.11.1", NodeVersionFileNVM), node: "v20.20.2",
			want: `the worker's node v20.20.2 does not satisfy .nvmrc "v20.11.1"`},
		{name: "lts alias", req: req("lts/*", NodeVersionFileNVM), node: "v20.20.2", want: "not checked"},
		{name: "lts codename", req: req("lts/hydrogen", NodeVersionFileNode), node: "v20.20.2", want: "alias"},
		{name: "node alias", req: req("node", NodeVersionFileNVM), node: "v20.20.2", want: "alias"},
		{name: "stable alias", req: req("stable", NodeVersionFileNVM), node: "v20.20.2", want: "alias"},
		{name: "latest alias", req: req("latest", NodeVersionFileNVM), node: "v20.20.2", want: "alias"},
		{name: "system alias", req: req("system", NodeVersionFileNVM), node: "v20.20.2", want: "alias"},
		{name: "garbage", req: req("twenty-two", SourceEnginesNode), node: "v20.20.2", want: "is not a semver range"},
		{name: "quoted safely", req: req("\"\x1b[31m", SourceEnginesNode), node: "v20.20.2", want: `"\"\x1b[31m"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := NodeNote(tc.req, tc.node)
			if tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
				t.Errorf("NodeNote = %q, want %q", got, tc.want)
			}
		})
	}
}
