package egress

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseRule(t *testing.T) {
	tests := []struct {
		in   string
		want Rule
		str  string // String(); "" means in
	}{
		{in: "registry.npmjs.org", want: Rule{Host: "registry.npmjs.org"}},
		{in: "Registry.NPMJS.org.", want: Rule{Host: "registry.npmjs.org"}, str: "registry.npmjs.org"},
		{in: "  registry.npmjs.org  ", want: Rule{Host: "registry.npmjs.org"}, str: "registry.npmjs.org"},
		{in: "npm.example.com:8443", want: Rule{Host: "npm.example.com", Port: 8443}},
		{in: "localhost:4873", want: Rule{Host: "localhost", Port: 4873}},
		{in: "*.example.com", want: Rule{Host: "example.com", Wildcard: true}},
		{in: "*.example.com:443", want: Rule{Host: "example.com", Port: 443, Wildcard: true}},
		{in: "*.co.uk", want: Rule{Host: "co.uk", Wildcard: true}},
		{in: "xn--bcher-kva.example", want: Rule{Host: "xn--bcher-kva.example"}},
		{in: "a-b.c1", want: Rule{Host: "a-b.c1"}},
		{in: "127.0.0.1:4873", want: Rule{Host: "127.0.0.1", Port: 4873}},
		{in: "127.1.2.3:1", want: Rule{Host: "127.1.2.3", Port: 1}},
		{in: "10.1.2.3", want: Rule{Host: "10.1.2.3"}},
		{in: "93.184.216.34:65535", want: Rule{Host: "93.184.216.34", Port: 65535}},
		{in: "[::1]:4873", want: Rule{Host: "::1", Port: 4873}},
		{in: "[2001:DB8::1]", want: Rule{Host: "2001:db8::1"}, str: "[2001:db8::1]"},
		{in: "[2001:db8:0::1]:443", want: Rule{Host: "2001:db8::1", Port: 443}, str: "[2001:db8::1]:443"},
		{in: "[::ffff:127.0.0.1]:4873", want: Rule{Host: "127.0.0.1", Port: 4873}, str: "127.0.0.1:4873"},
		{in: "[::ffff:93.184.216.34]", want: Rule{Host: "93.184.216.34"}, str: "93.184.216.34"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseRule(tt.in)
			if err != nil {
				t.Fatalf("ParseRule: %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("rule (-want +got):\n%s", diff)
			}
			str := tt.str
			if str == "" {
				str = tt.in
			}
			if got.String() != str {
				t.Errorf("String() = %q, want %q", got.String(), str)
			}
			back, err := ParseRule(got.String())
			if err != nil || back != got {
				t.Errorf("String() does not parse back: %v %+v", err, back)
			}
		})
	}
}

func TestParseRuleRejects(t *testing.T) {
	tests := []struct{ in, why string }{
		{"", "empty"},
		{"   ", "empty"},
		{"https://registry.npmjs.org", "no scheme"},
		{"registry.npmjs.org/path", "no path"},
		{"registry.npmjs.org?x", "no path"},
		{"registry.npmjs.org#x", "no path"},
		{"user@registry.npmjs.org", "user info"},
		{"user:pw@registry.npmjs.org:443", "user info"},
		{"registry.npmjs.org:0", "port"},
		{"registry.npmjs.org:65536", "port"},
		{"registry.npmjs.org:-1", "port"},
		{"registry.npmjs.org:+80", "port"},
		{"registry.npmjs.org:", "port"},
		{"registry.npmjs.org:80x", "port"},
		{"registry.npmjs.org:0000080", "port"},
		{"registry..npmjs.org", "empty label"},
		{".registry.npmjs.org", "empty label"},
		{"registry.npmjs.org..", "empty label"},
		{"-bad.example.com", "hyphen"},
		{"bad-.example.com", "hyphen"},
		{"under_score.example.com", "letters, digits"},
		{"späm.example.com", "letters, digits"},
		{"sp ace.example.com", "letters, digits"},
		{strings.Repeat("a", 64) + ".example.com", "label is at most"},
		{strings.Repeat("a.", 127) + "com", "at most 253"},
		{"127.1", "reads as an IPv4"},
		{"0x7f.1", "reads as an IPv4"},
		{"example.0x1f", "reads as an IPv4"},
		{"010.0.0.1", "reads as an IPv4"},
		{"*", `"*" alone`},
		{"*:443", `"*" alone`},
		{"a.*.example.com", "whole first label"},
		{"*a.example.com", "whole first label"},
		{"**.example.com", "whole first label"},
		{"*.*.example.com", "whole first label"},
		{"example.*", "whole first label"},
		{"*.com", "top-level domain"},
		{"*.10.1.2.3", "IP address"},
		{"*.[::1]:443", "brackets"},
		{"127.0.0.1", "explicit port"},
		{"127.9.9.9", "explicit port"},
		{"[::1]", "explicit port"},
		{"[::ffff:127.0.0.1]", "explicit port"},
		{"[64:ff9b::7f00:1]", "explicit port"},
		{"::1", "brackets"},
		{"::1:4873", "brackets"},
		{"2001:db8::1", "brackets"},
		{"[2001:db8::1", "unclosed"},
		{"[2001:db8::1]x", "only a port"},
		{"[registry.npmjs.org]:443", "brackets hold"},
		{"[10.0.0.1]:443", "brackets hold"},
		{"[fe80::1%eth0]:443", "zone"},
		{"0.0.0.0:4873", "unspecified"},
		{"[::]:4873", "unspecified"},
		{"224.0.0.1:4873", "multicast"},
		{"255.255.255.255:80", "multicast"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			r, err := ParseRule(tt.in)
			if err == nil {
				t.Fatalf("ParseRule accepted it: %+v", r)
			}
			if !strings.Contains(err.Error(), tt.why) {
				t.Errorf("error %q does not say %q", err, tt.why)
			}
			if !strings.Contains(err.Error(), "allow-list entry") {
				t.Errorf("error %q does not name the entry", err)
			}
		})
	}
}

func TestParseAllowList(t *testing.T) {
	got, err := ParseAllowList(" registry.npmjs.org, ,*.example.com:8443,,127.0.0.1:4873,[::1]:4873,registry.npmjs.org, ")
	if err != nil {
		t.Fatal(err)
	}
	want := []Rule{
		{Host: "registry.npmjs.org"},
		{Host: "example.com", Port: 8443, Wildcard: true},
		{Host: "127.0.0.1", Port: 4873},
		{Host: "::1", Port: 4873},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("rules (-want +got):\n%s", diff)
	}
	for _, empty := range []string{"", " ", ",,", " , "} {
		if got, err := ParseAllowList(empty); err != nil || len(got) != 0 {
			t.Errorf("ParseAllowList(%q) = %v, %v; want nothing", empty, got, err)
		}
	}
}

func TestParseAllowListReportsEveryBadEntry(t *testing.T) {
	got, err := ParseAllowList("registry.npmjs.org,https://x.example,ok.example,127.0.0.1,*,a..b")
	if err == nil {
		t.Fatalf("accepted: %v", got)
	}
	if got != nil {
		t.Errorf("rules returned with an error: %v", got)
	}
	for _, entry := range []string{`"https://x.example"`, `"127.0.0.1"`, `"*"`, `"a..b"`} {
		if !strings.Contains(err.Error(), entry) {
			t.Errorf("error does not name %s:\n%v", entry, err)
		}
	}
	if n := strings.Count(err.Error(), "allow-list entry"); n != 4 {
		t.Errorf("%d errors, want 4:\n%v", n, err)
	}
}

func TestRuleFromURL(t *testing.T) {
	tests := []struct {
		in   string
		want Rule
	}{
		{"https://registry.npmjs.org/", Rule{Host: "registry.npmjs.org", Port: 443}},
		{"https://registry.npmjs.org", Rule{Host: "registry.npmjs.org", Port: 443}},
		{"HTTPS://Registry.Yarnpkg.com/", Rule{Host: "registry.yarnpkg.com", Port: 443}},
		{"http://127.0.0.1:4873/", Rule{Host: "127.0.0.1", Port: 4873}},
		{"http://localhost:4873/", Rule{Host: "localhost", Port: 4873}},
		{"http://npm.internal.example/", Rule{Host: "npm.internal.example", Port: 80}},
		{"https://npm.example.com:8443/path/", Rule{Host: "npm.example.com", Port: 8443}},
		{"https://npm.example.com:/x", Rule{Host: "npm.example.com", Port: 443}},
		{"http://[::1]:4873/", Rule{Host: "::1", Port: 4873}},
		{"http://[::1]/", Rule{Host: "::1", Port: 80}},
		{"https://user:secret@npm.example.com/", Rule{Host: "npm.example.com", Port: 443}},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := RuleFromURL(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("rule (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRuleFromURLRejects(t *testing.T) {
	for _, in := range []string{
		"ftp://registry.npmjs.org/",
		"git+ssh://github.com/x",
		"registry.npmjs.org",
		"/relative/path",
		"https://",
		"https:opaque",
		"https://*.example.com/",
		"https://bad_host.example/",
		"https://registry.npmjs.org:99999/",
		"http://user:s3cret@[::1/",
		"https://user:s3cret@bad_host/",
	} {
		t.Run(in, func(t *testing.T) {
			r, err := RuleFromURL(in)
			if err == nil {
				t.Fatalf("accepted: %+v", r)
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Errorf("error repeats the URL's password: %v", err)
			}
		})
	}
}

func TestMatches(t *testing.T) {
	rules := []Rule{
		{Host: "registry.npmjs.org"},
		{Host: "example.com", Wildcard: true},
		{Host: "npm.example.com", Port: 8443},
		{Host: "127.0.0.1", Port: 4873},
		{Host: "::1", Port: 4874},
		{Host: "2001:db8::1"},
		{Host: "10.1.2.3"},
		{Host: "10.1.2.3", Port: 443},
	}
	tests := []struct {
		name string
		host string
		port int
		want Rule
		ok   bool
	}{
		{"name 443", "registry.npmjs.org", 443, rules[0], true},
		{"name 80", "registry.npmjs.org", 80, rules[0], true},
		{"name other port", "registry.npmjs.org", 8080, Rule{}, false},
		{"case", "REGISTRY.NpmJS.org", 443, rules[0], true},
		{"trailing dot", "registry.npmjs.org.", 443, rules[0], true},
		{"two trailing dots", "registry.npmjs.org..", 443, Rule{}, false},
		{"suffix is not the name", "evilregistry.npmjs.org", 443, Rule{}, false},
		{"name below a non-wildcard", "a.registry.npmjs.org", 443, Rule{}, false},
		{"wildcard apex", "example.com", 443, Rule{}, false},
		{"wildcard sub-domain", "a.example.com", 443, rules[1], true},
		{"wildcard deeper", "a.b.example.com.", 80, rules[1], true},
		{"wildcard look-alike", "aexample.com", 443, Rule{}, false},
		{"wildcard empty label", ".example.com", 443, Rule{}, false},
		{"wildcard other port", "a.example.com", 8443, Rule{}, false},
		{"explicit port beats wildcard", "npm.example.com", 8443, rules[2], true},
		{"wildcard still covers default ports", "npm.example.com", 443, rules[1], true},
		{"v4 literal", "127.0.0.1", 4873, rules[3], true},
		{"v4 literal other port", "127.0.0.1", 4874, Rule{}, false},
		{"v4 literal 443 not default", "127.0.0.1", 443, Rule{}, false},
		{"v4 other loopback", "127.0.0.2", 4873, Rule{}, false},
		{"v4-mapped literal", "::ffff:127.0.0.1", 4873, rules[3], true},
		{"v4-mapped bracketed", "[::ffff:127.0.0.1]", 4873, rules[3], true},
		{"v6 literal", "::1", 4874, rules[4], true},
		{"v6 bracketed", "[::1]", 4874, rules[4], true},
		{"v6 long form", "0:0:0:0:0:0:0:1", 4874, rules[4], true},
		{"v6 other port", "::1", 4873, Rule{}, false},
		{"v6 default ports", "2001:DB8::1", 443, rules[5], true},
		{"v6 zone", "fe80::1%eth0", 443, Rule{}, false},
		{"literal explicit port preferred", "10.1.2.3", 443, rules[7], true},
		{"literal default port", "10.1.2.3", 80, rules[6], true},
		{"name is not a literal", "localhost", 4873, Rule{}, false},
		{"numeric name", "127.1", 4873, Rule{}, false},
		{"port 0", "registry.npmjs.org", 0, Rule{}, false},
		{"port too big", "registry.npmjs.org", 65536, Rule{}, false},
		{"garbage", "registry.npmjs.org/x", 443, Rule{}, false},
		{"empty", "", 443, Rule{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := Matches(rules, tt.host, tt.port)
			if ok != tt.ok || got != tt.want {
				t.Errorf("Matches(%q, %d) = %+v, %v; want %+v, %v", tt.host, tt.port, got, ok, tt.want, tt.ok)
			}
		})
	}
	if _, ok := Matches(nil, "registry.npmjs.org", 443); ok {
		t.Error("no rules matched")
	}
}

func FuzzParseRule(f *testing.F) {
	for _, s := range []string{"registry.npmjs.org", "*.example.com:443", "[::1]:4873", "127.0.0.1:4873", "a..b", "[::ffff:1.2.3.4]", "*"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRule(s)
		if err != nil {
			return
		}
		back, err := ParseRule(r.String())
		if err != nil || back != r {
			t.Fatalf("%q → %+v → %q → %+v, %v", s, r, r.String(), back, err)
		}
		if r.Port < 0 || r.Port > 65535 || r.Host == "" {
			t.Fatalf("%q → %+v", s, r)
		}
	})
}
