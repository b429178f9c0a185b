package toolchain

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gilf-review/gilf/validation"
)

func TestParseWanted(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want wanted
		ok   bool
	}{
		{"", wanted{}, true},
		{"9", wanted{major: "9"}, true},
		{"0", wanted{major: "0"}, true},
		{"9999", wanted{major: "9999"}, true},
		{"10000", wanted{}, false}, // MaxMajorDigits+1
		{"09", wanted{}, false},
		{"10.14.0", wanted{exact: "10.14.0"}, true},
		{"0.0.0", wanted{exact: "0.0.0"}, true},
		{"4.0.0-rc.48", wanted{exact: "4.0.0-rc.48"}, true},
		{"1.0.0-alpha-1.x-y.0", wanted{exact: "1.0.0-alpha-1.x-y.0"}, true},
		{"1.0.0-0a", wanted{exact: "1.0.0-0a"}, true},
		{"1.0.0-01", wanted{}, false},
		{"1.0.0-", wanted{}, false},
		{"1.0.0-a..b", wanted{}, false},
		{"1.0.0+build", wanted{}, false},
		{"01.0.0", wanted{}, false},
		{"1.0", wanted{}, false},
		{"v1.0.0", wanted{}, false},
		{"^9.0.0", wanted{}, false},
		{"9.x", wanted{}, false},
		{"latest", wanted{}, false},
		{"1.0.0/../../x", wanted{}, false},
		{"1.0.0\n", wanted{}, false},
		{" 1.0.0", wanted{}, false},
		{"1.0.0-" + strings.Repeat("a", MaxVersionBytes-6), wanted{exact: "1.0.0-" + strings.Repeat("a", MaxVersionBytes-6)}, true},
		{"1.0.0-" + strings.Repeat("a", MaxVersionBytes-5), wanted{}, false},
	} {
		got, err := parseWanted(validation.PNPM, tt.in)
		if tt.ok != (err == nil) {
			t.Errorf("parseWanted(%q): %v, want ok %v", tt.in, err, tt.ok)
			continue
		}
		if err != nil {
			if r, ok := errors.AsType[*validation.Refusal](err); !ok || r.Code != validation.CodePackageManagerUnavailable {
				t.Errorf("parseWanted(%q): %v, want a refusal", tt.in, err)
			}
			continue
		}
		if got != tt.want {
			t.Errorf("parseWanted(%q) = %+v, want %+v", tt.in, got, tt.want)
		}
	}
}

func TestHighestStable(t *testing.T) {
	versions := []string{"9.0.0", "9.15.9", "9.15.10", "9.16.0-rc.1", "10.0.0", "9.2.0", "junk", "9.100.0-0", "09.99.99"}
	for _, tt := range []struct{ major, want string }{
		{"9", "9.15.10"},
		{"10", "10.0.0"},
		{"11", ""},
	} {
		if got := highestStable(versions, tt.major); got != tt.want {
			t.Errorf("highestStable(%s) = %q, want %q", tt.major, got, tt.want)
		}
	}
}

func TestBunPackage(t *testing.T) {
	const avx2 = "processor\t: 0\nvendor_id\t: GenuineIntel\nflags\t\t: fpu vme sse4_2 avx avx2 bmi2\n\nprocessor\t: 1\nflags\t\t: fpu avx2\n"
	const noAVX2 = "processor\t: 0\nflags\t\t: fpu vme sse4_2 avx\n"
	const arm = "processor\t: 0\nFeatures\t: fp asimd evtstrm aes\n"
	for _, tt := range []struct {
		goos, goarch, cpuinfo, want string
	}{
		{"linux", "amd64", avx2, "@oven/bun-linux-x64"},
		{"linux", "amd64", noAVX2, "@oven/bun-linux-x64-baseline"},
		{"linux", "amd64", "", "@oven/bun-linux-x64-baseline"},
		{"linux", "amd64", "flags: avx2x avx512f", "@oven/bun-linux-x64-baseline"},
		{"linux", "arm64", arm, "@oven/bun-linux-aarch64"},
		{"linux", "386", noAVX2, ""},
		{"linux", "riscv64", "", ""},
		{"darwin", "arm64", "", ""},
		{"windows", "amd64", avx2, ""},
	} {
		if got := bunPackage(tt.goos, tt.goarch, tt.cpuinfo); got != tt.want {
			t.Errorf("bunPackage(%s, %s, %.20q) = %q, want %q", tt.goos, tt.goarch, tt.cpuinfo, got, tt.want)
		}
	}
}

func TestParseCorepackHash(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want corepackHash
		ok   bool
	}{
		{"sha1." + strings.Repeat("a", 40), corepackHash{"sha1", strings.Repeat("a", 40)}, true},
		{"sha224." + strings.Repeat("B", 56), corepackHash{"sha224", strings.Repeat("b", 56)}, true},
		{"sha256." + strings.Repeat("0", 64), corepackHash{"sha256", strings.Repeat("0", 64)}, true},
		{"sha512." + strings.Repeat("f", 128), corepackHash{"sha512", strings.Repeat("f", 128)}, true},
		{"sha384." + strings.Repeat("0", 96), corepackHash{}, false},
		{"md5." + strings.Repeat("0", 32), corepackHash{}, false},
		{"sha256." + strings.Repeat("0", 63), corepackHash{}, false},
		{"sha256." + strings.Repeat("g", 64), corepackHash{}, false},
		{"sha256-" + strings.Repeat("0", 64), corepackHash{}, false},
		{"SHA256." + strings.Repeat("0", 64), corepackHash{}, false},
		{"sha256", corepackHash{}, false},
	} {
		got, err := parseCorepackHash(tt.in)
		if tt.ok != (err == nil) || got != tt.want {
			t.Errorf("parseCorepackHash(%q) = %+v, %v; want %+v, ok %v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}

func TestParseSRI(t *testing.T) {
	d := func(n int, b byte) []byte { return []byte(strings.Repeat(string(b), n)) }
	b64 := func(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
	for _, tt := range []struct {
		in   string
		want []sriEntry
	}{
		{"", nil},
		{"sha512-" + b64(d(64, 1)), []sriEntry{{"sha512", d(64, 1)}}},
		{"sha256-" + b64(d(32, 1)) + " sha384-" + b64(d(48, 2)), []sriEntry{{"sha384", d(48, 2)}}},
		{"sha512-" + b64(d(64, 1)) + "?foo\tsha512-" + b64(d(64, 2)), []sriEntry{{"sha512", d(64, 1)}, {"sha512", d(64, 2)}}},
		{"sha512-" + b64(d(63, 1)) + " sha256-" + b64(d(32, 3)), []sriEntry{{"sha256", d(32, 3)}}},
		{"sha512-!!! md5-" + b64(d(16, 1)), nil},
		{"sha1-" + b64(d(20, 1)), nil},
	} {
		if diff := cmp.Diff(tt.want, parseSRI(tt.in), cmp.AllowUnexported(sriEntry{})); diff != "" {
			t.Errorf("parseSRI(%.40q) (-want +got):\n%s", tt.in, diff)
		}
	}
}

func TestParseBins(t *testing.T) {
	for _, tt := range []struct {
		pkg, raw string
		want     map[string]string
		ok       bool
	}{
		{"pnpm", `{"pnpm":"bin/pnpm.cjs","pnpx":"./bin/pnpx.cjs"}`, map[string]string{"pnpm": "bin/pnpm.cjs", "pnpx": "bin/pnpx.cjs"}, true},
		{"@yarnpkg/cli-dist", `"bin/yarn.js"`, map[string]string{"cli-dist": "bin/yarn.js"}, true},
		{"yarn", `null`, map[string]string{}, true},
		{"yarn", ``, map[string]string{}, true},
		{"yarn", `{"yarn":"bin//x/./y.js"}`, map[string]string{"yarn": "bin/x/y.js"}, true},
		{"yarn", `{"yarn":"../x"}`, nil, false},
		{"yarn", `{"yarn":"x/../../y"}`, nil, false},
		{"yarn", `{"yarn":"/x"}`, nil, false},
		{"yarn", `{"yarn":"x\\..\\..\\y"}`, nil, false},
		{"yarn", `{"yarn":"x\u0000"}`, nil, false},
		{"yarn", `{"yarn":""}`, nil, false},
		{"yarn", `{"":"x"}`, nil, false},
		{"yarn", `{".":"x"}`, nil, false},
		{"yarn", `{"a/b":"x"}`, nil, false},
		{"yarn", `{"a\\b":"x"}`, nil, false},
		{"yarn", `{"a\u001bb":"x"}`, nil, false},
		{"yarn", `{"` + strings.Repeat("a", 256) + `":"x"}`, nil, false},
		{"yarn", `{"` + strings.Repeat("a", 255) + `":"x"}`, map[string]string{strings.Repeat("a", 255): "x"}, true},
		{"yarn", `{"yarn":1}`, nil, false},
		{"yarn", `[]`, nil, false},
	} {
		got, err := parseBins(tt.pkg, json.RawMessage(tt.raw))
		if tt.ok != (err == nil) {
			t.Errorf("parseBins(%s): %v, want ok %v", tt.raw, err, tt.ok)
			continue
		}
		if diff := cmp.Diff(tt.want, got); tt.ok && diff != "" {
			t.Errorf("parseBins(%s) (-want +got):\n%s", tt.raw, diff)
		}
	}
}

// The parsers that meet registry bytes never panic, and what they accept
// stays inside its bounds.
func FuzzParseBins(f *testing.F) {
	for _, s := range []string{`{"pnpm":"bin/pnpm.cjs"}`, `"x"`, `{"../a":"b"}`, `{"a":"../b"}`, `null`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		bins, err := parseBins("pkg", json.RawMessage(raw))
		if err != nil {
			return
		}
		for name, target := range bins {
			if !plainName(name) || strings.HasPrefix(target, "../") || strings.HasPrefix(target, "/") || target == "." || target == ".." {
				t.Fatalf("accepted %q → %q", name, target)
			}
		}
	})
}

func FuzzParseSRI(f *testing.F) {
	f.Add("sha512-" + strings.Repeat("A", 86) + "== sha256-x")
	f.Fuzz(func(t *testing.T, s string) {
		for _, e := range parseSRI(s) {
			if len(e.digest) != digestSize(e.algo) {
				t.Fatalf("%s digest of %d bytes", e.algo, len(e.digest))
			}
		}
	})
}

func FuzzParseWanted(f *testing.F) {
	for _, s := range []string{"", "9", "10.14.0", "1.0.0-rc.1", "../x", "1.0.0/x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		w, err := parseWanted(validation.PNPM, v)
		if err != nil {
			return
		}
		if strings.ContainsAny(w.exact+w.major, "/\\\x00 ") || strings.Contains(w.exact, "..") {
			t.Fatalf("accepted %q as %+v", v, w)
		}
	})
}
