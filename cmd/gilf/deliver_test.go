package main

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/gilf-review/gilf/internal/shared"
	"github.com/gilf-review/gilf/webhook"
)

// `gilf deliver` posts real GitHub payloads to a real intake over a real
// store, signed with the configured secret, each under a new UUID; the
// event is read from the payload.
func TestDeliver(t *testing.T) {
	const secret = "deliver-test-secret-0123456789"
	db := newTestStore(t, nil)
	log := slog.New(slog.DiscardHandler)
	hook, err := webhook.New(db, log, webhook.Config{Secret: []byte(secret), AppID: 1})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(hook)
	defer srv.Close()
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))
	env := func(out *bytes.Buffer, kv ...string) Env {
		m := map[string]string{"GILF_WEBHOOK_SECRET": secret, "GILF_ADDR": ":" + port}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return Env{Stdout: out, Stderr: out, Getenv: func(k string) string { return m[k] }}
	}
	idRe := regexp.MustCompile(`delivery ([0-9a-f-]+),`)
	for _, c := range []struct{ dir, file, status string }{
		{"pull_request", "opened.json", "202 Accepted"},
		{"ping", "payload.json", "200 OK"},
		{"check_run", "rerequested.json", "202 Accepted"},
		{"check_suite", "requested.json", "202 Accepted"},
		{"installation", "deleted.json", "202 Accepted"},
		{"installation_repositories", "added.json", "202 Accepted"},
	} {
		var out bytes.Buffer
		code := run(context.Background(), env(&out), []string{"deliver", shared.Data(t, "webhooks", c.dir, c.file)})
		m := idRe.FindStringSubmatch(out.String())
		if code != exitOK || m == nil || !uuidRe.MatchString(m[1]) || !strings.Contains(out.String(), c.status) {
			t.Errorf("deliver %s/%s: exit %d\n%s", c.dir, c.file, code, out.String())
			continue
		}
		d, err := db.Delivery(context.Background(), m[1])
		if err != nil || d.Event != c.dir {
			t.Errorf("stored delivery of %s/%s: %v event %q", c.dir, c.file, err, d.Event)
		}
	}
	payload := shared.Data(t, "webhooks", "ping", "payload.json")

	// The same id again is a redelivery.
	var out bytes.Buffer
	for range 2 {
		out.Reset()
		if code := run(context.Background(), env(&out), []string{"deliver", "--id", "0b6d6f40-0000-11ef-8000-000000000001", payload}); code != exitOK {
			t.Fatalf("deliver with --id: %d\n%s", code, out.String())
		}
	}
	if !strings.Contains(out.String(), `"status":"duplicate"`) {
		t.Errorf("second delivery of one id:\n%s", out.String())
	}
	// A wrong secret: gilf answers 401, deliver exits 3.
	out.Reset()
	if code := run(context.Background(), env(&out, "GILF_WEBHOOK_SECRET", "not-the-secret"), []string{"deliver", payload}); code != exitDeliveryRefused || !strings.Contains(out.String(), "401") {
		t.Errorf("wrong secret: exit %d\n%s", code, out.String())
	}
	// --url and --event win.
	out.Reset()
	if code := run(context.Background(), env(&out, "GILF_ADDR", "bad"), []string{"deliver", "--url", srv.URL + "/", "--event", "push", payload}); code != exitOK || !strings.Contains(out.String(), "event push") || !strings.Contains(out.String(), "ignored") {
		t.Errorf("--url and --event: exit %d\n%s", code, out.String())
	}

	notJSON := filepath.Join(t.TempDir(), "x.json")
	if err := os.WriteFile(notJSON, []byte("not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	unknown := filepath.Join(t.TempDir(), "y.json")
	if err := os.WriteFile(unknown, []byte(`{"action":"opened"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	dead := httptest.NewServer(nil)
	dead.Close() // a port nothing listens on
	for name, c := range map[string]struct {
		env  Env
		args []string
		want string
	}{
		"no secret":     {env(&out, "GILF_WEBHOOK_SECRET", ""), []string{"deliver", payload}, "GILF_WEBHOOK_SECRET is not set"},
		"no file":       {env(&out), []string{"deliver"}, "want one payload FILE"},
		"missing file":  {env(&out), []string{"deliver", "/nonexistent/p.json"}, "no such file"},
		"not JSON":      {env(&out), []string{"deliver", notJSON}, "is not JSON"},
		"unknown event": {env(&out), []string{"deliver", unknown}, "name it with --event"},
		"bad url":       {env(&out), []string{"deliver", "--url", "ftp://x", payload}, "want http(s)"},
		"no answer":     {env(&out), []string{"deliver", "--url", dead.URL + "/webhook", payload}, "connection refused"},
	} {
		out.Reset()
		if code := run(context.Background(), c.env, c.args); code != exitUsage || !strings.Contains(out.String(), c.want) {
			t.Errorf("%s: exit %d, want %d saying %q:\n%s", name, code, exitUsage, c.want, out.String())
		}
	}
}

func TestReadPayloadLimit(t *testing.T) {
	dir := t.TempDir()
	at := filepath.Join(dir, "at.json")
	over := filepath.Join(dir, "over.json")
	pad := func(n int) []byte { return append(append([]byte(`"`), bytes.Repeat([]byte("a"), n-2)...), '"') }
	if err := os.WriteFile(at, pad(webhook.MaxBodyBytes), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(over, pad(webhook.MaxBodyBytes+1), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, err := readPayload(at); err != nil || len(b) != webhook.MaxBodyBytes {
		t.Errorf("a payload of exactly the limit: %d bytes, %v", len(b), err)
	}
	if _, err := readPayload(over); err == nil || !strings.Contains(err.Error(), "over") {
		t.Errorf("a payload one byte over: %v", err)
	}
}
