package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync/atomic"
	"syscall"

	"github.com/gilf-review/gilf/internal/logkey"
	"github.com/gilf-review/gilf/validation"
	"github.com/gilf-review/gilf/webhook"
)

// /healthz is liveness: 200 while the process serves HTTP, whatever its
// store or disk. /readyz is readiness: 503 with a short reason while the
// process would refuse deliveries, so a load balancer sends them
// elsewhere and an operator sees why.

// readyStore is the store's readiness: nil when it accepts writes.
type readyStore interface {
	Ready(ctx context.Context) error
}

// readiness decides /readyz: draining, a store that refuses writes, or
// too little free space under the data directory.
type readiness struct {
	store    readyStore
	dataDir  string
	minFree  int64 // 0: no free-space check
	log      *slog.Logger
	draining atomic.Bool
	last     atomic.Pointer[string] // the last notReady.kind logged; "" once ready
}

func newReadiness(store readyStore, dataDir string, minFree int64, log *slog.Logger) *readiness {
	return &readiness{store: store, dataDir: dataDir, minFree: minFree, log: log}
}

// drain marks the process as stopping: /readyz answers 503 and intake
// refuses new deliveries (503, so GitHub redelivers them elsewhere or
// later); running jobs finish.
func (r *readiness) drain() { r.draining.Store(true) }

// errDraining is intake's refusal while the process stops.
var errDraining = errors.New("draining: this process is stopping")

// notReady is why the process should not take traffic: a public reason
// for the body, a cause for the log.
type notReady struct {
	kind   string // what is wrong, stable across probes: logged on change
	reason string
	cause  error
}

// check returns nil when ready.
func (r *readiness) check(ctx context.Context) *notReady {
	if r.draining.Load() {
		return &notReady{kind: "draining", reason: "draining", cause: errDraining}
	}
	if err := r.store.Ready(ctx); err != nil {
		return &notReady{kind: "store", reason: "store refuses writes", cause: err}
	}
	return r.space()
}

// space checks the free space under the data directory against the
// floor: nil when there is enough (or no floor). Intake asks it for every
// delivery (one statfs), so a delivery is refused exactly when /readyz
// says so.
func (r *readiness) space() *notReady {
	if r.minFree <= 0 {
		return nil
	}
	free, err := freeBytes(r.dataDir)
	if err != nil {
		return &notReady{kind: "free_space_unknown", reason: "free space unknown", cause: err}
	}
	if free < r.minFree {
		return &notReady{
			kind:   "low_free_space",
			reason: fmt.Sprintf("low free space: %d bytes free in the data directory, below GILF_MIN_FREE_BYTES=%d", free, r.minFree),
			cause:  fmt.Errorf("%d bytes free under %s, want at least %d", free, r.dataDir, r.minFree),
		}
	}
	return nil
}

// freeBytes is what an unprivileged writer may still use on the file
// system holding dir.
func freeBytes(dir string) (int64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, fmt.Errorf("statfs %s: %w", dir, err)
	}
	free := st.Bavail * uint64(st.Bsize)
	if free > 1<<62 {
		free = 1 << 62
	}
	return int64(free), nil
}

// serveReadyz answers 200 "ready", or 503 with the reason.
func (r *readiness) serveReadyz(w http.ResponseWriter, req *http.Request) {
	ctx, cancel := context.WithTimeout(req.Context(), HealthTimeout)
	defer cancel()
	plainNoStore(w)
	nr := r.check(ctx)
	r.logChange(nr)
	if nr != nil {
		http.Error(w, "not ready: "+nr.reason, http.StatusServiceUnavailable)
		return
	}
	if _, err := w.Write([]byte("ready\n")); err != nil {
		return // the client went away
	}
}

// logChange logs readiness when its reason changes, not on every probe.
func (r *readiness) logChange(nr *notReady) {
	kind := ""
	if nr != nil {
		kind = nr.kind
	}
	if prev := r.last.Swap(&kind); prev != nil && *prev == kind || prev == nil && kind == "" {
		return
	}
	if nr != nil {
		r.log.Warn("not ready", logkey.Reason, nr.reason, logkey.Err, nr.cause)
		return
	}
	r.log.Info("ready again")
}

// serveHealthz is liveness: this answer is the proof.
func serveHealthz(w http.ResponseWriter, _ *http.Request) {
	plainNoStore(w)
	if _, err := w.Write([]byte("ok\n")); err != nil {
		return // the client went away
	}
}

func plainNoStore(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
}

// intake wraps the webhook's Inbox: while the process drains, or the data
// directory's free space is below the floor, every delivery is refused
// (the webhook answers 503, ErrUnavailable) — what /readyz says. A store
// that refuses writes refuses the delivery itself.
func (r *readiness) intake(in webhook.Inbox) webhook.Inbox {
	return drainingInbox{in: in, r: r}
}

type drainingInbox struct {
	in webhook.Inbox
	r  *readiness
}

var _ webhook.Inbox = drainingInbox{}

func (d drainingInbox) RecordDelivery(ctx context.Context, del validation.Delivery, job *validation.JobSpec) (validation.RecordResult, error) {
	if d.r.draining.Load() {
		return validation.RecordResult{}, errDraining // the webhook answers 503
	}
	if nr := d.r.space(); nr != nil {
		d.r.logChange(nr)
		return validation.RecordResult{}, fmt.Errorf("%s: %w", nr.reason, nr.cause)
	}
	return d.in.RecordDelivery(ctx, del, job)
}
