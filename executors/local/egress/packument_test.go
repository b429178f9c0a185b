package egress

import (
	"bytes"
	"crypto/sha512"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// decodeIntegrities is what scanIntegrities must answer: the first JSON
// value of b decoded by encoding/json into a packument's shape, each
// version's sha512 taken from its dist.integrity.
func decodeIntegrities(b []byte) (map[string][]byte, error) {
	var doc struct {
		Versions map[string]struct {
			Dist struct {
				Integrity string `json:"integrity"`
			} `json:"dist"`
		} `json:"versions"`
	}
	if err := json.NewDecoder(bytes.NewReader(b)).Decode(&doc); err != nil {
		return nil, err
	}
	out := make(map[string][]byte, len(doc.Versions))
	for v, m := range doc.Versions {
		// sha512Of as it was, every field split by strings.FieldsSeq.
		for f := range strings.FieldsSeq(m.Dist.Integrity) {
			b64, ok := strings.CutPrefix(f, "sha512-")
			if !ok {
				continue
			}
			if i := strings.IndexByte(b64, '?'); i >= 0 {
				b64 = b64[:i]
			}
			if sum, err := base64.StdEncoding.DecodeString(b64); err == nil && len(sum) == 64 {
				out[v] = sum
				break
			}
		}
	}
	return out, nil
}

// sri is the integrity string of b's sha512.
func sri(b string) string {
	sum := sha512.Sum512([]byte(b))
	return "sha512-" + base64.StdEncoding.EncodeToString(sum[:])
}

// packumentSeeds are documents of every shape the scanner must read as
// encoding/json does: what registries publish, and the corners of JSON
// and of encoding/json's matching.
func packumentSeeds() []string {
	a, b := sri("a"), sri("b")
	nest := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	return []string{
		`{"name":"pkg","dist-tags":{"latest":"1.1.0"},"versions":{"1.0.0":{"name":"pkg","version":"1.0.0","dependencies":{"x":"^1"},"dist":{"shasum":"ab","tarball":"https://r/pkg/-/pkg-1.0.0.tgz","integrity":"` + a + `","signatures":[{"keyid":"k","sig":"s"}]},"engines":{"node":">=8"},"deprecated":false,"_hasShrinkwrap":false,"bin":null,"n":-1.5e+3},"1.1.0":{"dist":{"integrity":"` + b + `"}}},"modified":"2024-01-01T00:00:00.000Z"}`,
		" \t\r\n{ \"versions\" : { \"1\" : { \"dist\" : { \"integrity\" : \"" + a + "\" } } } } ",
		`{"versions":{"1":{"dist":{"integrity":"sha1-abc sha512-` + a[len("sha512-"):] + `"}}}}`,
		`{"versions":{"1":{"dist":{"integrity":"` + a + `?foo"}}}}`,
		`{"versions":{"1":{"dist":{"integrity":"sha512-x ` + b + `\t"}},"2":{"dist":{"integrity":"\u00a0` + a + `"}},"3":{"dist":{"integrity":"` + a + `=="}}}}`,
		`{"versions":{"1":{"dist":{"integrity":"sha512-nope"}},"2":{"dist":{}},"3":{},"4":null}}`,
		`null`, `nullx`, `{}`, `{"versions":null}`, `{"versions":{}}`, `{}garbage`, `{"versions":{"1":{"dist":{"integrity":"` + a + `"}}}} {`,
		``, ` `, `[]`, `"s"`, `1`, `true`, `{`, `{"versions"`, `{"versions":{"1":{"dist":{"integrity":"` + a + `"}}}`,
		`{"versions":[]}`, `{"versions":"x"}`, `{"versions":{"1":5}}`, `{"versions":{"1":[]}}`, `{"versions":{"1":{"dist":5}}}`,
		`{"versions":{"1":{"dist":{"integrity":5}}}}`, `{"versions":{"1":{"dist":{"integrity":{}}}}}`, `{"versions":{"1":{"dist":{"integrity":true}}}}`,
		`{"other":{"integrity":"` + a + `"},"versions":{"1":{"integrity":"` + a + `","x":{"dist":{"integrity":"` + b + `"}}}}}`,
		// Duplicates: a later version replaces, a later dist or
		// integrity overrides only where it sets one, null versions
		// forgets.
		`{"versions":{"1":{"dist":{"integrity":"` + a + `"}},"1":{}}}`,
		`{"versions":{"1":{"dist":{"integrity":"` + a + `"},"dist":{"shasum":"x"},"dist":null}}}`,
		`{"versions":{"1":{"dist":{"integrity":"` + a + `","integrity":null}}}}`,
		`{"versions":{"1":{"dist":{"integrity":"` + a + `","integrity":"` + b + `"}}}}`,
		`{"versions":{"1":{"dist":{"integrity":"` + a + `"}}},"versions":{"2":{"dist":{"integrity":"` + b + `"}}}}`,
		`{"versions":{"1":{"dist":{"integrity":"` + a + `"}}},"versions":null,"versions":{"2":{"dist":{"integrity":"` + b + `"}}}}`,
		// Names as encoding/json matches them to fields.
		`{"VERSIONS":{"1":{"Dist":{"INTEGRITY":"` + a + `"}}}}`,
		`{"versionſ":{"1":{"dist":{"integrity":"` + a + `"}}}}`,
		`{"versions":{"1":{"dist":{"integrity":"` + a + `"}}},"versions\u0000":null}`,
		`{"vers\u0069ons":{"1\u002e0":{"d\u0069st":{"integrity":"sha512-` + strings.Replace(a[len("sha512-"):], "/", `\/`, -1) + `"}}}}`,
		`{"versions":{"\ud83d\ude00":{"dist":{"integrity":"` + a + `"}},"\ud83d":{"dist":{"integrity":"` + b + `"}},` + "\"\xff\xfe\"" + `:{"dist":{"integrity":"` + b + `"}},"é":{"dist":{"integrity":"` + a + `"}}}}`,
		// Syntax the skipped parts must still check.
		`{"x":01,"versions":{}}`, `{"x":-,"versions":{}}`, `{"x":1.,"versions":{}}`, `{"x":1e,"versions":{}}`, `{"x":.5}`,
		`{"x":"a` + "\x01" + `b"}`, `{"x":"\q"}`, `{"x":"\u12G4"}`, `{"x":"\u12"}`, `{"x":tru}`, `{"x":[1,]}`, `{"x":{"a":1,}}`,
		`{"x":[1 2]}`, `{"x" 1}`, `{1:2}`, `{"x":1}}`, `{"x":[[{}],{"a":[true,false,null,"s",0,-0.5E-2]}],"versions":{"1":{"dist":{"integrity":"` + a + `"}}}}`,
		`{"x":` + nest(maxPackumentDepth-1) + `,"versions":{"1":{"dist":{"integrity":"` + a + `"}}}}`,
		`{"x":` + nest(maxPackumentDepth) + `,"versions":{"1":{"dist":{"integrity":"` + a + `"}}}}`,
	}
}

// scanIntegrities answers as encoding/json does, document for document:
// the same digests, and an error for the same documents.
func TestScanIntegritiesAsEncodingJSON(t *testing.T) {
	for i, doc := range packumentSeeds() {
		t.Run(strconv.Itoa(i), func(t *testing.T) {
			checkScanAsDecode(t, []byte(doc))
		})
	}
}

func checkScanAsDecode(t *testing.T, doc []byte) {
	t.Helper()
	want, wantErr := decodeIntegrities(doc)
	got, err := scanIntegrities(doc)
	if (err != nil) != (wantErr != nil) {
		t.Fatalf("%.200q: scan error %v, encoding/json error %v", doc, err, wantErr)
	}
	if diff := cmp.Diff(want, got); err == nil && diff != "" {
		t.Fatalf("%.200q (-encoding/json +scan):\n%s", doc, diff)
	}
}

// The nesting limit is encoding/json's, at its boundary: a document
// nested maxPackumentDepth deep is read, one level more is refused.
func TestScanIntegritiesDepth(t *testing.T) {
	for _, tc := range []struct {
		depth int
		ok    bool
	}{{maxPackumentDepth, true}, {maxPackumentDepth + 1, false}} {
		// The top object is one level.
		doc := `{"versions":{"1":{"dist":{"integrity":"` + sri("a") + `"}}},"x":` + strings.Repeat("[", tc.depth-1) + strings.Repeat("]", tc.depth-1) + `}`
		got, err := scanIntegrities([]byte(doc))
		if tc.ok && (err != nil || len(got) != 1) {
			t.Errorf("depth %d: %v %v, want it read", tc.depth, got, err)
		}
		if !tc.ok && err == nil {
			t.Errorf("depth %d: read, want it refused", tc.depth)
		}
		checkScanAsDecode(t, []byte(doc))
	}
}

// Whatever the bytes, scanIntegrities answers as encoding/json does.
func FuzzScanIntegrities(f *testing.F) {
	for _, s := range packumentSeeds() {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		checkScanAsDecode(t, doc)
	})
}

// bigPackument is an abbreviated packument of n versions shaped like the
// registry's (typescript's has about 3500, 10 MB).
func bigPackument(n int) []byte {
	var b strings.Builder
	b.WriteString(`{"name":"big","dist-tags":{"latest":"1.0.0"},"modified":"2025-01-01T00:00:00.000Z","versions":{`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		v := "1.0." + strconv.Itoa(i)
		fmt.Fprintf(&b, `"%s":{"name":"big","version":"%s","bin":{"tsc":"./bin/tsc","tsserver":"./bin/tsserver"},"dist":{"shasum":"%040d","tarball":"https://registry.npmjs.org/big/-/big-%s.tgz","fileCount":200,"integrity":"%s","signatures":[{"sig":"MEUCIQDmY6bXv3BWWQ7j/2LJm9GZ3/8nmKk9X3b0wD7wKk8NkQIgQ8J8P4J0p9cXlQ7YbQnYz4nXo3d1b7HnF9YfQ6X+J0c=","keyid":"SHA256:jl3bwswu80PjjokCgh0o2w5c2U4LhQAE57gj9cz1kzA"}],"unpackedSize":23000000},"engines":{"node":">=4.2.0"},"devDependencies":{"@types/node":"latest","chai":"latest","mocha":"latest","typescript":"latest"}}`, v, v, i, v, sri(v))
	}
	b.WriteString(`}}`)
	return []byte(b.String())
}

// BenchmarkScanIntegrities reads a packument as large as typescript's
// abbreviated one with encoding/json (what publishedIntegrities did)
// and with scanIntegrities.
//
//	go test ./executors/local/egress -run '^$' -bench ScanIntegrities
func BenchmarkScanIntegrities(b *testing.B) {
	doc := bigPackument(3500)
	for _, tc := range []struct {
		name string
		read func([]byte) (map[string][]byte, error)
	}{{"encoding-json", decodeIntegrities}, {"scan", scanIntegrities}} {
		b.Run(tc.name, func(b *testing.B) {
			b.SetBytes(int64(len(doc)))
			b.ReportAllocs()
			for range b.N {
				if m, err := tc.read(doc); err != nil || len(m) != 3500 {
					b.Fatalf("%d digests, %v", len(m), err)
				}
			}
		})
	}
}
