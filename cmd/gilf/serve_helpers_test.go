package main

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gilf-review/gilf/internal/shared"
	"github.com/gilf-review/gilf/review/github/githubtest"
	"github.com/gilf-review/gilf/store"
	"github.com/gilf-review/gilf/store/sqlite"
)

// Bounds of the serve subprocess tests. Every wait polls with
// servePoll and gives up at its bound.
const (
	serveStartBound = 60 * time.Second
	serveJobBound   = 4 * time.Minute
	serveStopBound  = 60 * time.Second
	servePoll       = 100 * time.Millisecond
	serveAppID      = 4242
	serveSecret     = "e2e-webhook-secret-generated-per-run"
)

func init() {
	if flag.Lookup("update") == nil {
		flag.Bool("update", false, "rewrite golden files")
	}
}

// updateGolden reads -update when it is used (after flag.Parse), whoever
// registered it.
func updateGolden() bool {
	f := flag.Lookup("update")
	return f != nil && f.Value.String() == "true"
}

// lockedBuffer is an io.Writer safe for a subprocess's stderr and the
// test reading it at once.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// logLines decodes the JSON log lines written so far.
func (l *lockedBuffer) logLines() []map[string]any {
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(l.String()))
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

// appKey is a GitHub App key generated for one test, written as a PEM
// file the server reads.
type appKey struct {
	key  *rsa.PrivateKey
	path string
}

func newAppKey(t *testing.T) appKey {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "app.pem")
	b := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)})
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return appKey{key: k, path: p}
}

// prPayload is the real pull_request opened payload and what it names.
type prPayload struct {
	body           []byte
	installationID int64
	owner, repo    string
	number         int
	headSHA        string
	baseRef        string
}

func openedPayload(t *testing.T) prPayload {
	t.Helper()
	b, err := os.ReadFile(shared.Data(t, "webhooks", "pull_request", "opened.json"))
	if err != nil {
		t.Fatal(err)
	}
	var p struct {
		Installation struct {
			ID int64 `json:"id"`
		} `json:"installation"`
		Repository struct {
			Name  string `json:"name"`
			Owner struct {
				Login string `json:"login"`
			} `json:"owner"`
		} `json:"repository"`
		PullRequest struct {
			Number int `json:"number"`
			Head   struct {
				SHA string `json:"sha"`
			} `json:"head"`
			Base struct {
				Ref string `json:"ref"`
			} `json:"base"`
		} `json:"pull_request"`
	}
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatal(err)
	}
	return prPayload{body: b, installationID: p.Installation.ID, owner: p.Repository.Owner.Login,
		repo: p.Repository.Name, number: p.PullRequest.Number, headSHA: p.PullRequest.Head.SHA, baseRef: p.PullRequest.Base.Ref}
}

// fakeGitHub serves the payload's pull request with tarball as its head.
func fakeGitHub(t *testing.T, k appKey, p prPayload, tarball []byte) *githubtest.Server {
	t.Helper()
	return githubtest.New(t, githubtest.Options{
		AppID: serveAppID, PublicKey: &k.key.PublicKey, InstallationID: p.installationID,
		Owner: p.owner, Repo: p.repo, Number: p.number, HeadSHA: p.headSHA, BaseRef: p.baseRef,
		Tarball: tarball,
	})
}

// serveProc is one running `gilf serve`.
type serveProc struct {
	cmd    *exec.Cmd
	url    string
	stderr *lockedBuffer
	done   chan struct{}
	err    error // valid after done
}

// serveEnv is the environment of a serve subprocess against srv.
func serveEnv(t *testing.T, srv *githubtest.Server, k appKey, dataDir string, extra ...string) []string {
	t.Helper()
	return append([]string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + t.TempDir(),
		"GILF_ADDR=127.0.0.1:0",
		"GILF_DATA_DIR=" + dataDir,
		"GILF_LOG_FORMAT=json",
		"GILF_GITHUB_API_URL=" + srv.URL,
		"GILF_GITHUB_DOWNLOAD_HOSTS=" + srv.CodeloadHost(),
		"GILF_GITHUB_APP_ID=" + strconv.Itoa(serveAppID),
		"GILF_GITHUB_PRIVATE_KEY_PATH=" + k.path,
		"GILF_WEBHOOK_SECRET=" + serveSecret,
		"GILF_ALLOW_LOCAL_VALIDATION=1",
		"GILF_VALIDATION_EXECUTOR=local",
		"GILF_WORKERS=1",
	}, extra...)
}

// startServe starts gilf serve and waits for its "listening" line. The
// process is killed when the test ends, if it still runs.
func startServe(t *testing.T, env []string) *serveProc {
	t.Helper()
	cmd := exec.Command(gilfBin, "serve")
	cmd.Env = env
	p := &serveProc{cmd: cmd, stderr: &lockedBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.stderr, p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start gilf serve: %v", err)
	}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
			return
		default:
		}
		if err := cmd.Process.Kill(); err != nil {
			t.Logf("kill gilf serve: %v", err)
		}
		<-p.done
		if t.Failed() {
			t.Logf("gilf serve stderr:\n%s", p.stderr.String())
		}
	})
	deadline := time.Now().Add(serveStartBound)
	for p.url == "" {
		for _, l := range p.stderr.logLines() {
			if l["msg"] == "listening" {
				addr, _ := l["addr"].(string)
				p.url = "http://" + addr
			}
		}
		select {
		case <-p.done:
			t.Fatalf("gilf serve exited before listening: %v\n%s", p.err, p.stderr.String())
		default:
		}
		if p.url != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("gilf serve did not log \"listening\" within %v:\n%s", serveStartBound, p.stderr.String())
		}
		time.Sleep(servePoll)
	}
	return p
}

// stop signals the server and waits for it to exit, bounded.
func (p *serveProc) stop(t *testing.T, sig syscall.Signal) error {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal gilf serve: %v", err)
	}
	select {
	case <-p.done:
		return p.err
	case <-time.After(serveStopBound):
		t.Fatalf("gilf serve did not exit within %v of %v:\n%s", serveStopBound, sig, p.stderr.String())
		return nil
	}
}

// signature is X-Hub-Signature-256 of body under secret.
func signature(secret string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// newGUID is a fresh X-GitHub-Delivery.
func newGUID(t testing.TB) string {
	t.Helper()
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	h := hex.EncodeToString(b)
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// deliveryReply is the webhook's JSON answer.
type deliveryReply struct {
	Status string `json:"status"`
	Job    int64  `json:"job"`
	Error  string `json:"error"`
}

// deliver posts one signed delivery the way GitHub does.
func deliver(t *testing.T, base, guid, event string, body []byte, sig string) (int, deliveryReply) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/webhook", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "GitHub-Hookshot/e2e")
	req.Header.Set("X-GitHub-Delivery", guid)
	req.Header.Set("X-GitHub-Event", event)
	req.Header.Set("X-GitHub-Hook-Installation-Target-Type", "integration")
	if sig != "" {
		req.Header.Set("X-Hub-Signature-256", sig)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST /webhook: %v", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		t.Fatal(err)
	}
	var r deliveryReply
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("webhook answer %d is not JSON: %q", resp.StatusCode, b)
	}
	return resp.StatusCode, r
}

// httpGet fetches base+path, bounded.
func httpGet(t *testing.T, base, path string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// openTestStore opens the server's SQLite file to read job rows (the test
// only reads).
func openTestStore(t *testing.T, dataDir string) *store.DB {
	t.Helper()
	db, err := sqlite.Open(t.Context(), filepath.Join(dataDir, DBFileName), slog.New(slog.DiscardHandler), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Errorf("close store: %v", err)
		}
	})
	return db
}

// waitJob polls the job row until cond holds, bounded by serveJobBound.
// envWith is base with the NAME, value pairs of kv set over it.
func envWith(base map[string]string, kv ...string) map[string]string {
	out := make(map[string]string, len(base)+len(kv)/2)
	for k, v := range base {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i]] = kv[i+1]
	}
	return out
}

// slowTarball is the head tarball of payload's repository whose test
// script is the shell script script (it sleeps, so a test can act while
// the step runs).
func slowTarball(t *testing.T, payload prPayload, name, script string) []byte {
	t.Helper()
	top := payload.owner + "-" + payload.repo + "-" + payload.headSHA[:7]
	return tarball(t, top, map[string]string{
		"package.json":      `{"name":"` + name + `","version":"1.0.0","scripts":{"test":"sh slow-test.sh"}}` + "\n",
		"package-lock.json": emptyLock(name),
		"slow-test.sh":      script,
	})
}

// waitMetrics polls /metrics until it holds every line: a job's row is
// committed before the counters of its ending move, so a scrape right
// after the row says done may not count it yet.
func waitMetrics(t *testing.T, url string, lines ...string) string {
	t.Helper()
	deadline := time.Now().Add(serveJobBound)
	for {
		_, metrics := httpGet(t, url, "/metrics")
		missing := missingMetrics(metrics, lines)
		if len(missing) == 0 {
			return metrics
		}
		if time.Now().After(deadline) {
			t.Errorf("/metrics lacks %q after %v", missing, serveJobBound)
			return metrics
		}
		time.Sleep(servePoll)
	}
}

func waitJob(t *testing.T, db *store.DB, p *serveProc, id int64, what string, cond func(store.JobStatus) bool) store.JobStatus {
	t.Helper()
	deadline := time.Now().Add(serveJobBound)
	for {
		st, err := db.JobState(t.Context(), id)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("job %d: %v", id, err)
		}
		if err == nil && cond(st) {
			return st
		}
		select {
		case <-p.done:
			t.Fatalf("gilf serve exited (%v) while waiting for job %d to be %s (now %+v):\n%s", p.err, id, what, st, p.stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %d not %s within %v (now %+v):\n%s", id, what, serveJobBound, st, p.stderr.String())
		}
		time.Sleep(servePoll)
	}
}

// tarball packs files under one top directory, as GitHub's tarball
// endpoint does ({owner}-{repo}-{sha}/).
func tarball(t *testing.T, top string, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	mtime := time.Date(2019, 5, 15, 15, 20, 33, 0, time.UTC)
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: top + "/", Mode: 0o755, ModTime: mtime}); err != nil {
		t.Fatal(err)
	}
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: top + "/" + n, Mode: 0o644,
			Size: int64(len(files[n])), ModTime: mtime}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(files[n])); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// emptyLock is the package-lock.json of a package with no dependencies,
// so `npm ci` needs no network.
func emptyLock(name string) string {
	return fmt.Sprintf(`{
  "name": %q,
  "version": "1.0.0",
  "lockfileVersion": 3,
  "requires": true,
  "packages": {
    "": {
      "name": %q,
      "version": "1.0.0"
    }
  }
}
`, name, name)
}

// normalizers replace what changes between runs and machines in a posted
// review: durations, times, output sizes (npm prints its own timing),
// versions, the cgroup version of the host and the job id.
var normalizers = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})`), "<time>"},
	{regexp.MustCompile(`\b\d+(\.\d+)? ?(ns|µs|us|ms|s)\b`), "<duration>"},
	{regexp.MustCompile(`\b\d+(\.\d+)? (B|KiB|MiB|GiB)\b`), "<size>"},
	{regexp.MustCompile(`\bcgroup v[12]\b`), "cgroup v<n>"},
	{regexp.MustCompile(`\bv?\d+\.\d+\.\d+([-+][0-9A-Za-z.+-]*)?\b`), "<version>"},
	{regexp.MustCompile(`\b[0-9a-f]{64}\b`), "<sha256>"},
	// A job marker names the store (16 hex digits, made per database)
	// and the job.
	{regexp.MustCompile(`gilf:job=(?:[0-9a-f]{16}-)?\d+`), "gilf:job=<id>"},
	// The install allow-list holds the registries this machine's npm,
	// yarn and pnpm are configured for.
	{regexp.MustCompile("allowed destinations [^\n]*\\.\n"), "allowed destinations <the worker's registries>.\n"},
}

func normalize(s string) string {
	for _, n := range normalizers {
		s = n.re.ReplaceAllString(s, n.with)
	}
	return s
}

// checkGolden compares got with testdata/e2e/name, or rewrites it with
// -update.
func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", "e2e", name)
	if updateGolden() {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s differs (-want +got; -update rewrites it):\n%s", path, diff)
	}
}

// postedView renders what gilf posted to GitHub — the review, the check
// run as created and as completed — normalized for a golden file. The
// in-progress updates between are left out: how many there are depends on
// timing (a newer one replaces one not yet sent).
func postedView(t *testing.T, srv *githubtest.Server) string {
	t.Helper()
	var b strings.Builder
	checkRun := func(r githubtest.Request) {
		out, _ := r.Body["output"].(map[string]any)
		annotations, _ := out["annotations"].([]any)
		fmt.Fprintf(&b, "%s %s\nname: %v\nhead_sha: %v\nstatus: %v\nconclusion: %v\nexternal_id: %s\ncompleted_at: %s\ntitle: %v\nannotations: %d\n--- summary ---\n%v\n--- end summary ---\n",
			r.Method, normalizeCheckRunPath(r.Path), r.Body["name"], r.Body["head_sha"], r.Body["status"], r.Body["conclusion"],
			normalizeID(r.Body["external_id"]), normalize(fmt.Sprint(r.Body["completed_at"])),
			normalize(fmt.Sprint(out["title"])), len(annotations), normalize(fmt.Sprint(out["summary"])))
		if text, ok := out["text"].(string); ok {
			fmt.Fprintf(&b, "--- text ---\n%s\n--- end text ---\n", normalize(text))
		}
		b.WriteString("\n")
	}
	for _, r := range srv.Requests() {
		switch {
		case r.Endpoint == githubtest.CreateReview:
			fmt.Fprintf(&b, "POST %s\nevent: %v\ncommit_id: %v\n--- body ---\n%v\n--- end body ---\n\n",
				r.Path, r.Body["event"], r.Body["commit_id"], normalize(fmt.Sprint(r.Body["body"])))
		case r.Endpoint == githubtest.CreateCheckRun:
			checkRun(r)
		case r.Endpoint == githubtest.UpdateCheckRun && r.Body["conclusion"] != nil:
			checkRun(r)
		}
	}
	return b.String()
}

// normalizeCheckRunPath hides the check run's id.
func normalizeCheckRunPath(p string) string {
	return regexp.MustCompile(`/check-runs/\d+$`).ReplaceAllString(p, "/check-runs/<id>")
}

func normalizeID(v any) string {
	if s, ok := v.(string); ok && regexp.MustCompile(`^(?:[0-9a-f]{16}-)?\d+$`).MatchString(s) {
		return "<job id>"
	}
	return fmt.Sprint(v)
}
