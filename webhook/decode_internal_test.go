package webhook

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/gilf-review/gilf/internal/shared"
)

// stdPayload is the oracle: the same fields decoded by encoding/json.
type stdPayload struct {
	Action       string `json:"action"`
	Number       int    `json:"number"`
	Installation *struct {
		ID int64 `json:"id"`
	} `json:"installation"`
	Repository  *stdRepo `json:"repository"`
	PullRequest *struct {
		Number    int    `json:"number"`
		Draft     bool   `json:"draft"`
		UpdatedAt string `json:"updated_at"`
		Head      struct {
			SHA  string   `json:"sha"`
			Repo *stdRepo `json:"repo"`
		} `json:"head"`
		Base struct {
			Ref string `json:"ref"`
		} `json:"base"`
	} `json:"pull_request"`
	Changes *struct {
		Base json.RawMessage `json:"base"`
	} `json:"changes"`
	RepositoriesRemoved []stdRepo `json:"repositories_removed"`
	CheckRun            *stdCheck `json:"check_run"`
	CheckSuite          *stdCheck `json:"check_suite"`
	Issue               *struct {
		Number      int             `json:"number"`
		PullRequest json.RawMessage `json:"pull_request"`
	} `json:"issue"`
	Comment *struct {
		ID   int64  `json:"id"`
		Body string `json:"body"`
		User *struct {
			Login string `json:"login"`
			Type  string `json:"type"`
		} `json:"user"`
	} `json:"comment"`
}

type stdCheck struct {
	ID         int64  `json:"id"`
	ExternalID string `json:"external_id"`
	HeadSHA    string `json:"head_sha"`
	App        *struct {
		ID int64 `json:"id"`
	} `json:"app"`
}

func (c *stdCheck) ref() *checkRef {
	if c == nil {
		return nil
	}
	r := &checkRef{ID: c.ID, ExternalID: c.ExternalID, HeadSHA: c.HeadSHA}
	if c.App != nil {
		r.AppID = c.App.ID
	}
	return r
}

type stdRepo struct {
	FullName string `json:"full_name"`
}

func decodeStd(body []byte) (payload, error) {
	var s stdPayload
	if err := json.Unmarshal(body, &s); err != nil {
		return payload{}, err
	}
	p := payload{Action: s.Action, Number: s.Number}
	if s.Installation != nil {
		p.Installation = &idRef{ID: s.Installation.ID}
	}
	if s.Repository != nil {
		p.Repository = &repoRef{FullName: s.Repository.FullName}
	}
	if pr := s.PullRequest; pr != nil {
		p.PullRequest = &prRef{Number: pr.Number, Draft: pr.Draft, UpdatedAt: pr.UpdatedAt, HeadSHA: pr.Head.SHA, BaseRef: pr.Base.Ref}
		if pr.Head.Repo != nil {
			p.PullRequest.HeadRepo = &repoRef{FullName: pr.Head.Repo.FullName}
		}
	}
	p.CheckRun, p.CheckSuite = s.CheckRun.ref(), s.CheckSuite.ref()
	if s.Issue != nil {
		p.Issue = &issueRef{Number: s.Issue.Number, IsPR: len(s.Issue.PullRequest) > 0 && string(s.Issue.PullRequest) != "null"}
	}
	if c := s.Comment; c != nil {
		p.Comment = &commentRef{ID: c.ID, Body: c.Body}
		if c.User != nil {
			p.Comment.User = &userRef{Login: c.User.Login, Type: c.User.Type}
		}
	}
	p.BaseChanged = s.Changes != nil && len(s.Changes.Base) > 0 && string(s.Changes.Base) != "null"
	if s.RepositoriesRemoved != nil {
		p.RepositoriesRemoved = []repoRef{}
		for _, r := range s.RepositoriesRemoved {
			p.RepositoriesRemoved = append(p.RepositoriesRemoved, repoRef(r))
		}
	}
	return p, nil
}

func realPayloads(t testing.TB) map[string][]byte {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(shared.Data(t, "webhooks"), "*", "*.json"))
	if err != nil || len(files) < 50 {
		t.Fatalf("payloads: %d files, %v", len(files), err)
	}
	out := map[string][]byte{}
	for _, f := range files {
		if strings.Contains(f, "_schemas") || strings.Contains(f, "_openapi") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out[filepath.Base(filepath.Dir(f))+"/"+filepath.Base(f)] = b
	}
	return out
}

// compareDecoders checks decodePayload against encoding/json on one input.
func compareDecoders(t *testing.T, body []byte) {
	t.Helper()
	got, err := decodePayload(body)
	if errors.Is(err, errDuplicate) || errors.Is(err, errFoldedKey) {
		return // deliberately stricter than encoding/json
	}
	if err != nil && !errors.Is(err, ErrBadPayload) {
		t.Fatalf("error %v does not wrap ErrBadPayload", err)
	}
	want, stdErr := decodeStd(body)
	if (err == nil) != (stdErr == nil) {
		t.Fatalf("decodePayload err = %v, encoding/json err = %v, input %q", err, stdErr, body)
	}
	if err != nil {
		return
	}
	if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
		t.Fatalf("decode differs from encoding/json (-std +fast) on %q:\n%s", body, diff)
	}
}

func TestDecodeMatchesEncodingJSONOnRealPayloads(t *testing.T) {
	for name, b := range realPayloads(t) {
		t.Run(name, func(t *testing.T) {
			if _, err := decodePayload(b); err != nil {
				t.Fatalf("real payload refused: %v", err)
			}
			compareDecoders(t, b)
		})
	}
}

func TestDecodeEdgeCases(t *testing.T) {
	tests := []struct {
		name string
		in   string
		err  error // nil: must match encoding/json
	}{
		{"null document", `null`, nil},
		{"empty object", ` {} `, nil},
		{"eight spaces to the end", `{}        `, nil},
		{"sixteen spaces to the end", `{}                `, nil},
		{"runs of spaces between tokens", "{        \"action\"        :         \"opened\"\t\r\n        }", nil},
		{"only spaces", `        `, nil},
		{"array document", `[]`, nil},
		{"string document", `"x"`, nil},
		{"trailing garbage", `{} x`, nil},
		{"escaped key", `{"act\u0069on":"opened"}`, nil},
		{"escaped value", `{"action":"op\u00e9ned\n"}`, nil},
		{"invalid utf-8 value", "{\"action\":\"\xff\"}", nil},
		{"surrogate pair", `{"action":"\ud83d\ude00"}`, nil},
		{"lone surrogate", `{"action":"\ud83d"}`, nil},
		{"number as string", `{"number":"2"}`, nil},
		{"float number", `{"number":2.0}`, nil},
		{"exponent number", `{"number":2e1}`, nil},
		{"negative zero", `{"number":-0}`, nil},
		{"huge number", `{"number":99999999999999999999}`, nil},
		{"bad number in skipped field", `{"x":01}`, nil},
		{"bad literal", `{"x":tru}`, nil},
		{"control char", "{\"x\":\"a\tb\"}", nil},
		{"null fields", `{"action":null,"number":null,"installation":null,"pull_request":null,"changes":null,"repositories_removed":null}`, nil},
		{"null head and base", `{"pull_request":{"head":null,"base":null,"draft":null}}`, nil},
		{"head repo null", `{"pull_request":{"head":{"sha":"abc","repo":null}}}`, nil},
		{"changes base null", `{"changes":{"base":null}}`, nil},
		{"changes base object", `{"changes":{"base":{"ref":{"from":"main"}}}}`, nil},
		{"wrong type object", `{"installation":5}`, nil},
		{"wrong type bool", `{"pull_request":{"draft":"yes"}}`, nil},
		{"type error then syntax error", `{"installation":5,`, nil},
		{"repo list with null", `{"repositories_removed":[null,{"full_name":"o/r"},{}]}`, nil},
		{"repo list wrong element", `{"repositories_removed":[1]}`, nil},
		{"empty repo list", `{"repositories_removed":[]}`, nil},
		{"check run", `{"check_run":{"id":4,"external_id":"12.3","head_sha":"abc","app":{"id":2,"slug":"gilf"},"check_suite":{"app":{"id":9}}}}`, nil},
		{"check run nulls", `{"check_run":{"id":null,"external_id":null,"head_sha":null,"app":null},"check_suite":null}`, nil},
		{"check run app wrong type", `{"check_run":{"app":"gilf"}}`, nil},
		{"check run id too big", `{"check_run":{"id":9223372036854775808}}`, nil},
		{"check run escaped external id", `{"check_run":{"external_id":"1\u002e2"}}`, nil},
		{"check suite", `{"check_suite":{"id":1,"head_sha":"abc","app":{"id":2},"pull_requests":[{"number":1}]}}`, nil},
		{"duplicate app id", `{"check_suite":{"app":{"id":1,"id":2}}}`, errDuplicate},
		{"folded check key", `{"Check_Run":{}}`, errFoldedKey},
		{"deep skipped nesting", `{"x":` + strings.Repeat("[", 500) + strings.Repeat("]", 500) + `}`, nil},
		{"too deep", strings.Repeat("[", maxDepth+1) + strings.Repeat("]", maxDepth+1), nil},
		{"duplicate wanted key", `{"action":"closed","action":"opened"}`, errDuplicate},
		{"duplicate skipped key is fine", `{"zen":"a","zen":"b","action":"opened"}`, nil},
		{"folded key", `{"Action":"opened"}`, errFoldedKey},
		{"kelvin key that folds to nothing wanted", "{\"\u212aey\":1,\"number\":1}", nil},
		{"long-s key folding to a wanted one", "{\"in\u017ftallation\":{\"id\":1}}", errFoldedKey},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.err != nil {
				if _, err := decodePayload([]byte(tt.in)); !errors.Is(err, tt.err) {
					t.Fatalf("err = %v, want %v", err, tt.err)
				}
				return
			}
			compareDecoders(t, []byte(tt.in))
		})
	}
}

// FuzzDecodeMatchesEncodingJSON: on any input the one-pass decoder agrees
// with encoding/json — same acceptance, same values — except where it is
// deliberately stricter.
func FuzzDecodeMatchesEncodingJSON(f *testing.F) {
	for _, b := range realPayloads(f) {
		f.Add(b)
	}
	f.Add([]byte(`{"action":"edited","changes":{"base":{"ref":{"from":"x"}}},"pull_request":{"number":1,"head":{"sha":"a","repo":null}}}`))
	f.Add([]byte(`{"repositories_removed":[null,{"full_name":"a\u0041/b"}]}`))
	f.Add([]byte(`{"action":"rerequested","check_run":{"id":1,"external_id":"7.2","head_sha":"a","app":{"id":3}},"check_suite":null}`))
	f.Add([]byte(`{"check_suite":{"app":null,"head_sha":"\u0061"}}`))
	f.Add([]byte(`{"action":"created","issue":{"number":2,"pull_request":{}},"comment":{"id":9,"body":"/gilf rerun","user":{"login":"a","type":"User"}}}`))
	f.Add([]byte(`{"issue":{"pull_request":null},"comment":{"user":null}}`))
	f.Fuzz(func(t *testing.T, body []byte) { compareDecoders(t, body) })
}

func BenchmarkDecode(b *testing.B) {
	body, err := os.ReadFile(shared.Data(b, "webhooks", "pull_request", "opened.json"))
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name string
		fn   func([]byte) (payload, error)
	}{{"onepass", decodePayload}, {"encoding-json", decodeStd}} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := bc.fn(body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDecodeCheckRun: a check_run delivery (gilf receives one for
// each of its own check runs) reads four fields and skips the rest.
func BenchmarkDecodeCheckRun(b *testing.B) {
	body, err := os.ReadFile(shared.Data(b, "webhooks", "check_run", "rerequested.json"))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := decodePayload(body); err != nil {
			b.Fatal(err)
		}
	}
}
