package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"time"

	"github.com/gilf-review/gilf/webhook"
)

// Exit code of `gilf deliver` when gilf answered, but not 2xx (besides
// exitOK and exitUsage: usage, configuration, an unreadable file, no
// answer).
const exitDeliveryRefused = 3

// DefaultDeliverTimeout bounds one delivery: GitHub's own is 10 s.
const DefaultDeliverTimeout = 10 * time.Second

// maxDeliverAnswer bounds how much of gilf's answer is read and printed.
const maxDeliverAnswer = 64 << 10

const deliverUsage = `usage: gilf deliver [--event E] [--url URL] [--id ID] FILE

Post the JSON payload in FILE to a running gilf serve as GitHub would: signed
with GILF_WEBHOOK_SECRET (X-Hub-Signature-256), X-GitHub-Event set, and a new
random X-GitHub-Delivery (a UUID) unless --id gives one (the same id twice is
a redelivery, answered "duplicate"). The event is read from the payload
(pull_request, check_run, check_suite, installation, ping …) unless --event
names it. The target is POST /webhook on GILF_ADDR (127.0.0.1:8080 by
default) unless --url names another.

It prints gilf's answer. Exit codes: 0 gilf took it (2xx), 3 gilf answered
another status, 2 usage, configuration, an unreadable FILE or no answer.

`

// runDeliver is `gilf deliver`: an operator's first test delivery, as
// probot receive is for Probot apps.
func runDeliver(ctx context.Context, env Env, args []string) int {
	fs := newFlagSet("deliver", deliverUsage, env.Stderr, true)
	event := fs.String("event", "", "the X-GitHub-Event; default: read from the payload")
	target := fs.String("url", "", "where gilf serve's /webhook is; default: http://GILF_ADDR/webhook")
	id := fs.String("id", "", "the X-GitHub-Delivery; default: a new random UUID")
	timeout := fs.Duration("timeout", DefaultDeliverTimeout, "how long to wait for gilf's answer")
	if exit, ok := parseFlags(fs, args); !ok {
		return exit
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(env.Stderr, "gilf deliver: want one payload FILE (see gilf deliver -h)")
		return exitUsage
	}
	if *timeout <= 0 {
		fmt.Fprintf(env.Stderr, "gilf deliver: --timeout %s: want a positive duration\n", *timeout)
		return exitUsage
	}
	cfg, err := loadDeliver(env.Getenv)
	if err != nil && *target == "" || !cfg.Secret.IsSet() {
		fmt.Fprintf(env.Stderr, "gilf deliver: configuration:\n%v\n", err)
		return exitUsage
	}
	u := cfg.URL
	if *target != "" {
		p, err := url.Parse(*target)
		if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			fmt.Fprintf(env.Stderr, "gilf deliver: --url %q: want http(s)://host[:port]/webhook\n", *target)
			return exitUsage
		}
		u = p.String()
	}
	body, err := readPayload(fs.Arg(0))
	if err != nil {
		fmt.Fprintf(env.Stderr, "gilf deliver: %v\n", err)
		return exitUsage
	}
	if *event == "" {
		if *event, err = eventOf(body); err != nil {
			fmt.Fprintf(env.Stderr, "gilf deliver: %s: %v; name it with --event\n", fs.Arg(0), err)
			return exitUsage
		}
	}
	if *id == "" {
		if *id, err = newUUID(); err != nil {
			fmt.Fprintf(env.Stderr, "gilf deliver: %v\n", err)
			return exitUsage
		}
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	code, answer, err := postDelivery(ctx, u, *event, *id, cfg.Secret.Reveal(), body)
	if err != nil {
		fmt.Fprintf(env.Stderr, "gilf deliver: %v\n", err)
		return exitUsage
	}
	fmt.Fprintf(env.Stdout, "POST %s\nevent %s, delivery %s, %d bytes\n%d %s\n%s\n", u, *event, *id, len(body), code,
		http.StatusText(code), bytes.TrimSpace(answer))
	if code/100 != 2 {
		return exitDeliveryRefused
	}
	return exitOK
}

// readPayload reads FILE: JSON, at most webhook.MaxBodyBytes (what gilf
// accepts).
func readPayload(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	body, err := io.ReadAll(io.LimitReader(f, webhook.MaxBodyBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if len(body) > webhook.MaxBodyBytes {
		return nil, fmt.Errorf("%s is over %d bytes, the most gilf (and GitHub) accept", path, webhook.MaxBodyBytes)
	}
	if !json.Valid(body) {
		return nil, fmt.Errorf("%s is not JSON", path)
	}
	return body, nil
}

// eventOf names a payload's event by the object it carries.
func eventOf(body []byte) (string, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		return "", errors.New("the payload is not a JSON object")
	}
	has := func(k string) bool { _, ok := top[k]; return ok }
	switch {
	case has("pull_request"):
		return "pull_request", nil
	case has("check_run"):
		return "check_run", nil
	case has("check_suite"):
		return "check_suite", nil
	case has("repositories_added") || has("repositories_removed"):
		return "installation_repositories", nil
	case has("zen"):
		return "ping", nil
	case has("installation") && has("action"):
		return "installation", nil
	}
	return "", errors.New("cannot tell its event")
}

// uuidRe is what newUUID makes: RFC 9562 version 4.
var uuidRe = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

// newUUID is a random (version 4) UUID, as GitHub's delivery ids are.
func newUUID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("delivery id: %w", err)
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16]), nil
}

// postDelivery posts body as GitHub does and returns gilf's status and
// (bounded) answer.
func postDelivery(ctx context.Context, target, event, id, secret string, body []byte) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "GitHub-Hookshot/gilf-deliver")
	req.Header.Set("X-GitHub-Event", event)
	req.Header.Set("X-GitHub-Delivery", id)
	req.Header.Set(webhook.SignatureHeader, webhook.Sign([]byte(secret), body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("post to %s: %w", target, err)
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, maxDeliverAnswer))
	if err != nil {
		return resp.StatusCode, nil, fmt.Errorf("read gilf's answer: %w", err)
	}
	return resp.StatusCode, answer, nil
}
