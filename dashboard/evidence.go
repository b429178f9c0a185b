package dashboard

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"strings"

	"github.com/gilf-review/gilf/internal/logkey"
	"github.com/gilf-review/gilf/store"
	"github.com/gilf-review/gilf/validation"
)

// Evidence opens the evidence store's objects for the dashboard's links,
// so a stored key opens whatever the store is.
type Evidence interface {
	// OpenEvidence returns the object under key: its bytes (the
	// filesystem store, served here behind the dashboard's token), or a
	// short-lived URL to send the browser to (S3, presigned). An object
	// that is not there is an error matching fs.ErrNotExist, a key that
	// cannot be one an error matching fs.ErrInvalid.
	OpenEvidence(ctx context.Context, key string) (EvidenceObject, error)
}

// EvidenceObject is an opened evidence object: Body, or else URL.
type EvidenceObject struct {
	Body io.ReadCloser
	URL  string
}

// MaxEvidenceKey bounds ?key= of /dashboard/evidence (evidence keys are
// a few hundred bytes).
const MaxEvidenceKey = 1024

// EvidencePath is the dashboard's link to a stored evidence key.
func EvidencePath(key string) string { return "/dashboard/evidence?key=" + url.QueryEscape(key) }

// artifactURL is where an artifact's link goes: the dashboard's evidence
// route when an evidence store is wired and the upload was persisted,
// else the stored reference's URL when it is http(s), else "".
func (h *Handler) artifactURL(a store.ArtifactView) string {
	if u := h.openURL(a); u != "" {
		return u
	}
	return safeURL(a.URL)
}

// openURL is the dashboard's evidence route of a persisted artifact, ""
// without an evidence store.
func (h *Handler) openURL(a store.ArtifactView) string {
	if h.cfg.Evidence != nil && a.Status == "persisted" && a.Key != "" {
		return EvidencePath(a.Key)
	}
	return ""
}

// evidenceURL is artifactURL for a finding's reference (attached only
// once the store accepted the upload).
func (h *Handler) evidenceURL(e validation.EvidenceRef) string {
	if h.cfg.Evidence != nil && e.Key != "" {
		return EvidencePath(e.Key)
	}
	return safeURL(e.URL)
}

// evidence serves GET /dashboard/evidence?key=K: the object's bytes, or a
// redirect to its presigned URL. Text is shown as text; anything else is a
// download. The answer runs nothing: a sandboxing CSP, nosniff.
func (h *Handler) evidence(w http.ResponseWriter, r *http.Request) {
	if _, ok := h.authenticate(r); !ok {
		h.showLogin(w, r, http.StatusUnauthorized, "")
		return
	}
	key := r.URL.Query().Get("key")
	if h.cfg.Evidence == nil {
		h.fail(w, r, errNotFound)
		return
	}
	if key == "" || len(key) > MaxEvidenceKey {
		h.fail(w, r, badRequest{"key: want an evidence key"})
		return
	}
	obj, err := h.cfg.Evidence.OpenEvidence(r.Context(), key)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		err = errNotFound
	case errors.Is(err, fs.ErrInvalid):
		err = badRequest{"key: not an evidence key"}
	}
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if obj.Body == nil {
		if safeURL(obj.URL) == "" {
			h.fail(w, r, errors.New("evidence store gave no http(s) URL"))
			return
		}
		http.Redirect(w, r, obj.URL, http.StatusSeeOther)
		return
	}
	defer obj.Body.Close()
	head := make([]byte, 512)
	n, err := io.ReadFull(obj.Body, head)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		h.fail(w, r, err)
		return
	}
	head = head[:n]
	hd := w.Header()
	hd.Set("Content-Security-Policy", "sandbox; default-src 'none'")
	name := key[strings.LastIndexByte(key, '/')+1:]
	if ct := http.DetectContentType(head); strings.HasPrefix(ct, "text/plain") {
		hd.Set("Content-Type", "text/plain; charset=utf-8")
	} else {
		hd.Set("Content-Type", "application/octet-stream")
		hd.Set("Content-Disposition", `attachment; filename="`+strings.Map(safeFileRune, name)+`"`)
	}
	if _, err := w.Write(head); err != nil {
		return // the client went away
	}
	if _, err := io.Copy(w, obj.Body); err != nil {
		h.cfg.Logger.Warn("evidence not served whole", logkey.Key, key, logkey.Err, err)
	}
}

// safeFileRune keeps a download's file name to plain characters.
func safeFileRune(r rune) rune {
	switch {
	case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '-', r == '_':
		return r
	}
	return '_'
}
