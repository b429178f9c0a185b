// Package webhook is gilf's intake: it verifies a GitHub delivery's
// signature over the raw body, decides what the delivery asks for (the
// action table), and commits the delivery and its job to the store before
// answering. All real work happens later, in the workers.
package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gilf-review/gilf/internal/failguard"
	"github.com/gilf-review/gilf/internal/logkey"
	"github.com/gilf-review/gilf/validation"
)

// Inbox is where intake commits deliveries; *store.DB implements it.
// RecordDelivery must return only after the delivery, its job, its
// cancellation and its re-run are durably committed, or with an error. It
// must not keep d.Body after it returns: the handler reuses the buffer.
type Inbox interface {
	RecordDelivery(ctx context.Context, d validation.Delivery, job *validation.JobSpec) (validation.RecordResult, error)
}

// Limits and recommended server settings. cmd/gilf sets the http.Server
// fields from these.
const (
	// MaxBodyBytes is GitHub's own payload cap (25 MB), as 25 MiB: a
	// larger body is answered 413 without being read past the limit.
	MaxBodyBytes = 25 << 20
	// MaxDeliveryIDLen bounds X-GitHub-Delivery (a GUID is 36).
	MaxDeliveryIDLen = 64
	// MaxEventLen bounds X-GitHub-Event.
	MaxEventLen = 64
	// DefaultCommitTimeout bounds the wait for the store's commit, below
	// GitHub's 10 s delivery timeout, so a stuck store answers 503 in time.
	DefaultCommitTimeout = 8 * time.Second

	ReadHeaderTimeout = 5 * time.Second   // slowloris headers
	ReadTimeout       = 30 * time.Second  // a 25 MiB body at about 7 Mbit/s
	WriteTimeout      = 45 * time.Second  // covers reading the body, the commit and the answer
	IdleTimeout       = 120 * time.Second // keep-alive between deliveries
	MaxHeaderBytes    = 64 << 10
)

// Config configures a Handler. Secret is required.
type Config struct {
	// Secret is the App's webhook secret. Empty is refused.
	Secret []byte
	// AppID is gilf's own GitHub App id: a re-run asked for a check run
	// or check suite of this App re-queues its jobs. 0 (not configured)
	// ignores every re-run request.
	AppID int64
	// CommitTimeout defaults to DefaultCommitTimeout.
	CommitTimeout time.Duration
	// MaxBodyBytes defaults to MaxBodyBytes; it cannot be raised above it.
	MaxBodyBytes int64
	// Now stamps deliveries; default time.Now.
	Now func() time.Time
	// Allow limits which accounts and installations get jobs; empty allows
	// all.
	Allow Allowlist
	// BadSignatureLimit is how many failed signature checks one client
	// address may make per BadSignatureWindow before its further failures
	// are answered 429 (DefaultBadSignatureLimit when 0; negative turns
	// the guard off). A delivery that verifies is never limited.
	BadSignatureLimit  int
	BadSignatureWindow time.Duration
	// TrustedProxies are the peers whose X-Forwarded-For names the
	// client the guard counts (the operator's reverse proxies); for any
	// other peer, its own address is the client.
	TrustedProxies []netip.Prefix
	// Commands: pull-request comments addressed to gilf are queued for
	// the command worker (comment.go); off, every comment is ignored.
	// AppSlug is the App's slug for the "@<slug> <command>" form; empty
	// accepts "/gilf <command>" only.
	Commands bool
	AppSlug  string
	// Rejected, when set, is told why each refused delivery was refused
	// (RejectReason); it must not block.
	Rejected func(reason string)
}

// Handler is the http.Handler for POST /webhook.
type Handler struct {
	inbox   Inbox
	log     *slog.Logger
	secret  []byte
	appID   int64
	timeout time.Duration
	maxBody int64
	now     func() time.Time
	allow   Allowlist
	bad     *failguard.Guard
	trusted []netip.Prefix
	rules   rules

	rejected func(string) // Config.Rejected, or nil
}

// New returns the intake handler. It refuses an empty secret: a webhook
// that checks nothing must not start.
func New(inbox Inbox, logger *slog.Logger, cfg Config) (*Handler, error) {
	switch {
	case inbox == nil:
		return nil, errors.New("webhook: nil inbox")
	case logger == nil:
		return nil, errors.New("webhook: nil logger")
	case len(cfg.Secret) == 0:
		return nil, errors.New("webhook: empty secret")
	}
	h := &Handler{
		inbox: inbox, log: logger, secret: append([]byte(nil), cfg.Secret...), appID: cfg.AppID,
		timeout: cfg.CommitTimeout, maxBody: cfg.MaxBodyBytes, now: cfg.Now,
	}
	if h.timeout <= 0 {
		h.timeout = DefaultCommitTimeout
	}
	if h.maxBody <= 0 || h.maxBody > MaxBodyBytes {
		h.maxBody = MaxBodyBytes
	}
	if h.now == nil {
		h.now = time.Now
	}
	h.allow = cfg.Allow
	h.rules = rules{appID: cfg.AppID, commands: cfg.Commands, slug: cfg.AppSlug}
	h.rejected = cfg.Rejected
	h.trusted = append([]netip.Prefix(nil), cfg.TrustedProxies...)
	h.bad = newBadSignatures(cfg.BadSignatureLimit, cfg.BadSignatureWindow, h.now)
	return h, nil
}

// reply is a successful answer.
type reply struct {
	code int
	Body replyBody
}

type replyBody struct {
	Status     string `json:"status"`
	Delivery   string `json:"delivery"`
	Reason     string `json:"reason,omitempty"`
	Job        int64  `json:"job,omitempty"`
	JobState   string `json:"jobState,omitempty"`
	Superseded int    `json:"superseded,omitempty"`
	Cancelled  int    `json:"cancelled,omitempty"`
	Rerun      int    `json:"rerun,omitempty"`
}

// ServeHTTP handles one delivery. Nothing is stored before the signature
// checks; nothing is answered 2xx before the store committed.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var buf bodyBuffer
	defer buf.release()
	rep, err := h.serve(w, r, &buf)
	if err != nil {
		code, msg := statusOf(err)
		if h.rejected != nil {
			h.rejected(RejectReason(err))
		}
		attrs := []any{"delivery_id", safeHeader(r.Header.Get("X-GitHub-Delivery")), "event",
			safeHeader(r.Header.Get("X-GitHub-Event")), "status", code, "err", err}
		if code >= 500 {
			h.log.Error("webhook delivery failed", attrs...)
		} else {
			h.log.Warn("webhook delivery refused", attrs...)
		}
		writeJSON(w, code, map[string]string{"error": msg})
		return
	}
	writeJSON(w, rep.code, rep.Body)
}

// serve takes one delivery through intake's phases: receive (read and
// authenticate it), decide (what it asks for), record (commit it and its
// job) and answer.
func (h *Handler) serve(w http.ResponseWriter, r *http.Request, buf *bodyBuffer) (reply, error) {
	del, err := h.receive(w, r, buf)
	if err != nil {
		return reply{}, err
	}
	dec, decodeErr := h.decide(&del)
	ctx, cancel := context.WithTimeout(r.Context(), h.timeout)
	defer cancel()
	res, err := h.inbox.RecordDelivery(ctx, del, dec.job)
	if err != nil {
		return reply{}, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return h.answer(del, dec, res, decodeErr)
}

// receive reads a delivery and checks that it is one: a POST whose body
// bears the webhook secret's signature, with a delivery id and an event.
func (h *Handler) receive(w http.ResponseWriter, r *http.Request, buf *bodyBuffer) (validation.Delivery, error) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		return validation.Delivery{}, ErrMethodNotAllowed
	}
	body, err := h.readBody(w, r, buf)
	if err != nil {
		return validation.Delivery{}, err
	}
	// The signature is checked before the guard is asked: only a request
	// that failed it can be limited.
	if err := VerifySignature(h.secret, body, r.Header.Values(SignatureHeader)); err != nil {
		client := failguard.ClientOf(r, h.trusted)
		if h.bad.Limited(client) {
			return validation.Delivery{}, fmt.Errorf("%w: %v", ErrTooManyBadSignatures, err)
		}
		h.bad.Failed(client)
		return validation.Delivery{}, err
	}
	id, err := deliveryID(r.Header.Values("X-GitHub-Delivery"))
	if err != nil {
		return validation.Delivery{}, err
	}
	event, err := eventName(r.Header.Values("X-GitHub-Event"))
	if err != nil {
		return validation.Delivery{}, err
	}
	return validation.Delivery{ID: id, Event: event, ReceivedAt: h.now(), Body: body}, nil
}

// decide reads del's payload and decides what it asks for, filling del's
// row with what the payload says and the decision. decodeErr is why a
// payload intake acts on could not be read.
func (h *Handler) decide(del *validation.Delivery) (dec decision, decodeErr error) {
	p, decodeErr := decodePayload(del.Body)
	switch {
	case decodeErr != nil && !actsOn(del.Event):
		// Nothing of it would be used: keep it, answer as for any other
		// ignored event, so GitHub shows no failure for events gilf skips.
		dec, decodeErr = classify(del.Event, payload{}, h.rules), nil
	case decodeErr != nil:
		dec = invalid(decodeErr.Error())
	default:
		dec = classify(del.Event, p, h.rules)
		describe(del, p)
	}
	command := del.Event == "issue_comment" && dec.status == validation.DeliveryQueued
	if dec.job != nil && !h.allow.allows(dec.job.InstallationID, dec.job.Repo) ||
		dec.rerun != nil && !h.allow.allows(dec.rerun.InstallationID, dec.rerun.Repo) ||
		command && !h.allow.allows(del.InstallationID, del.Repo) {
		dec = notAllowed()
	}
	del.Status, del.Reason, del.Cancel, del.Rerun = dec.status, dec.reason, dec.cancel, dec.rerun
	return dec, decodeErr
}

// describe fills del's row with what its payload p says: the action, the
// installation, the repository, the pull request and its head.
func describe(del *validation.Delivery, p payload) {
	del.Action = p.Action
	if p.Installation != nil {
		del.InstallationID = p.Installation.ID
	}
	if p.Repository != nil && validRepo(p.Repository.FullName) {
		del.Repo = p.Repository.FullName
	}
	if p.Issue != nil && p.Issue.IsPR && p.Issue.Number > 0 {
		del.PR = p.Issue.Number
	}
	if p.PullRequest != nil {
		del.PR = p.PullRequest.Number
		if validSHA(p.PullRequest.HeadSHA) {
			del.HeadSHA = p.PullRequest.HeadSHA
		}
	}
	if c := checkOf(del.Event, p); c != nil && validSHA(c.HeadSHA) {
		del.HeadSHA = c.HeadSHA
	}
}

// answer is the reply to a recorded delivery, or the error GitHub should
// show for one recorded as invalid.
func (h *Handler) answer(del validation.Delivery, dec decision, res validation.RecordResult, decodeErr error) (reply, error) {
	id, event := del.ID, del.Event
	rep := reply{code: dec.code, Body: replyBody{
		Status: string(dec.status), Delivery: id, Reason: dec.reason, Job: res.JobID, JobState: res.JobState,
		Superseded: res.Superseded, Cancelled: res.Cancelled, Rerun: res.Rerun,
	}}
	switch {
	case res.Duplicate:
		rep.code, rep.Body = http.StatusOK, replyBody{Status: "duplicate", Delivery: id, Job: res.JobID, JobState: res.JobState}
		h.log.Info("webhook redelivery", logkey.DeliveryID, id, logkey.Event, event, logkey.JobID, res.JobID)
	case decodeErr != nil:
		// Recorded, so nothing is lost, but GitHub should show the failure.
		return reply{}, fmt.Errorf("delivery recorded as invalid: %w", decodeErr)
	case dec.status == validation.DeliveryInvalid:
		return reply{}, fmt.Errorf("%w: delivery recorded as invalid: %s", ErrBadPayload, dec.reason)
	case dec.job != nil:
		if !res.JobCreated && res.JobID != 0 && res.JobState != "queued" && res.JobState != "running" {
			// Attached to the head's job, which stays as it ended: say so
			// rather than "queued" with nothing queued.
			rep.Body.Status = "recorded"
			rep.Body.Reason = fmt.Sprintf("the head's job %d is already %s, so nothing was queued (GitHub's Re-run button on its check run runs it again)",
				res.JobID, res.JobState)
		}
		h.log.Info("webhook job", logkey.DeliveryID, id, logkey.Event, event, logkey.Action, del.Action,
			logkey.InstallationID, del.InstallationID, logkey.Repo, dec.job.Repo, logkey.PR, dec.job.PR, logkey.HeadSHA, dec.job.HeadSHA,
			logkey.JobID, res.JobID, "job_created", res.JobCreated, logkey.JobState, res.JobState, "superseded", res.Superseded,
			logkey.Rerun, res.Rerun)
	case dec.rerun != nil:
		h.log.Info("webhook re-run", logkey.DeliveryID, id, logkey.Event, event, logkey.Action, del.Action,
			logkey.InstallationID, del.InstallationID, logkey.Repo, dec.rerun.Repo, logkey.HeadSHA, dec.rerun.HeadSHA,
			logkey.JobID, res.JobID, logkey.JobState, res.JobState, logkey.Rerun, res.Rerun)
	default:
		h.log.Debug("webhook recorded", logkey.DeliveryID, id, logkey.Event, event, logkey.Action, safeHeader(del.Action),
			logkey.Status, dec.status, logkey.Reason, dec.reason, "cancelled", res.Cancelled)
	}
	return rep, nil
}

// bodyPool recycles the buffers of ordinary deliveries: a fresh 25 KB
// buffer per delivery is zeroed and collected, which costs about as much
// as reading it. Nothing keeps a delivery's bytes after ServeHTTP: the
// decoder copies the strings it keeps, and the store encodes the body
// before RecordDelivery returns.
var bodyPool sync.Pool

// maxPooledBody bounds the buffers bodyPool keeps; larger bodies get
// their own.
const maxPooledBody = 256 << 10

// bodyBuffer is one request's body buffer, returned to bodyPool after the
// answer.
type bodyBuffer struct{ p *[]byte }

// get returns a zero-length slice with room for n bytes.
func (b *bodyBuffer) get(n int64) []byte {
	if n > maxPooledBody {
		return make([]byte, n)
	}
	p, _ := bodyPool.Get().(*[]byte)
	if p == nil {
		buf := make([]byte, 0, max(n, 64<<10))
		p = &buf
	}
	if int64(cap(*p)) < n {
		*p = make([]byte, 0, n)
	}
	b.p = p
	return (*p)[:n]
}

func (b *bodyBuffer) release() {
	if b.p != nil {
		bodyPool.Put(b.p)
		b.p = nil
	}
}

// readBody reads the raw body, at most maxBody bytes.
func (h *Handler) readBody(w http.ResponseWriter, r *http.Request, buf *bodyBuffer) ([]byte, error) {
	if r.ContentLength > h.maxBody {
		return nil, fmt.Errorf("%w: content-length %d", ErrBodyTooLarge, r.ContentLength)
	}
	rd := http.MaxBytesReader(w, r.Body, h.maxBody)
	var body []byte
	var err error
	if r.ContentLength >= 0 {
		body = buf.get(r.ContentLength)
		_, err = io.ReadFull(rd, body)
	} else {
		body, err = io.ReadAll(rd)
	}
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, fmt.Errorf("%w: %w", ErrBodyTooLarge, err)
		}
		return nil, fmt.Errorf("%w: %w", ErrBodyUnreadable, err)
	}
	return body, nil
}

// deliveryID validates X-GitHub-Delivery: exactly one value, GUID-like
// (hex digits and dashes), at most MaxDeliveryIDLen, returned lower case.
func deliveryID(values []string) (string, error) {
	if len(values) != 1 {
		return "", fmt.Errorf("%w: %d values", ErrBadDeliveryID, len(values))
	}
	v := values[0]
	if len(v) == 0 || len(v) > MaxDeliveryIDLen {
		return "", fmt.Errorf("%w: length %d", ErrBadDeliveryID, len(v))
	}
	hex := 0
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case '0' <= c && c <= '9', 'a' <= c && c <= 'f', 'A' <= c && c <= 'F':
			hex++
		case c == '-':
		default:
			return "", fmt.Errorf("%w: character %q", ErrBadDeliveryID, c)
		}
	}
	if hex == 0 {
		return "", fmt.Errorf("%w: no hex digits", ErrBadDeliveryID)
	}
	return strings.ToLower(v), nil
}

// eventName validates X-GitHub-Event: one value of [a-z_], bounded.
func eventName(values []string) (string, error) {
	if len(values) != 1 {
		return "", fmt.Errorf("%w: %d values", ErrBadEvent, len(values))
	}
	v := values[0]
	if len(v) == 0 || len(v) > MaxEventLen {
		return "", fmt.Errorf("%w: length %d", ErrBadEvent, len(v))
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; !('a' <= c && c <= 'z' || c == '_') {
			return "", fmt.Errorf("%w: character %q", ErrBadEvent, c)
		}
	}
	return v, nil
}

// safeHeader bounds an unverified header value for a log line.
func safeHeader(s string) string {
	if len(s) > MaxDeliveryIDLen {
		s = s[:MaxDeliveryIDLen] + "…"
	}
	q := strconv.Quote(s)
	return q[1 : len(q)-1]
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		code, b = http.StatusInternalServerError, []byte(`{"error":"internal error"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	if _, err := w.Write(append(b, '\n')); err != nil {
		return // the client went away; nothing left to tell it
	}
}
