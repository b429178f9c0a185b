package dashboard

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/gilf-review/gilf/internal/logkey"
	"github.com/gilf-review/gilf/validation"
)

// view is what every page template gets.
type view struct {
	Template string // the page's template name
	Title    string
	Active   string // the navigation entry to mark
	CSRF     string // the session's form token; empty for bearer requests
	LoggedIn bool
	Data     any
}

// pageFunc fills a page's view; an error is answered by status.
type pageFunc func(r *http.Request, v *view) error

// postFunc handles a state-changing form; it answers (usually a redirect)
// unless it returns an error.
type postFunc func(w http.ResponseWriter, r *http.Request, s session) error

// apiFunc returns a JSON answer.
type apiFunc func(r *http.Request) (any, error)

// page serves an authenticated HTML page; without credentials it answers
// 401 with the login form.
func (h *Handler) page(fn pageFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s, ok := h.authenticate(r)
		if !ok {
			h.showLogin(w, r, http.StatusUnauthorized, "")
			return
		}
		v := &view{CSRF: h.csrf(s), LoggedIn: s.nonce != ""}
		if err := fn(r, v); err != nil {
			h.fail(w, r, err)
			return
		}
		h.render(w, r, http.StatusOK, v)
	})
}

// post serves an authenticated, CSRF-checked form submission.
func (h *Handler) post(fn postFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
		s, ok := h.authenticate(r)
		if !ok {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		if !h.checkPost(r, s) {
			http.Error(w, "missing or invalid form token, or a cross-origin request", http.StatusForbidden)
			return
		}
		if err := fn(w, r, s); err != nil {
			h.fail(w, r, err)
		}
	})
}

// api serves an authenticated JSON answer.
func (h *Handler) api(fn apiFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !h.authorized(r) {
			h.apiUnauthorized(w)
			return
		}
		body, err := fn(r)
		if err != nil {
			code, msg := h.status(r, err)
			writeJSON(w, code, apiError{Error: msg})
			return
		}
		writeJSON(w, http.StatusOK, body)
	})
}

type apiError struct {
	Error string `json:"error"`
}

func (h *Handler) apiUnauthorized(w http.ResponseWriter) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="gilf"`)
	writeJSON(w, http.StatusUnauthorized, apiError{Error: "unauthorized"})
}

func writeJSON(w http.ResponseWriter, code int, body any) {
	b, err := json.MarshalIndent(body, "", "  ")
	if err != nil {
		code, b = http.StatusInternalServerError, []byte(`{"error":"internal error"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	if _, err := w.Write(append(b, '\n')); err != nil {
		return // the client went away
	}
}

// fail answers an HTML request's error with its public message.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, err error) {
	code, msg := h.status(r, err)
	h.render(w, r, code, &view{Template: "error", Title: http.StatusText(code), Data: msg})
}

// render executes a page into a buffer, so a template error is a clean 500.
func (h *Handler) render(w http.ResponseWriter, r *http.Request, code int, v *view) {
	var buf bytes.Buffer
	if err := h.pages.ExecuteTemplate(&buf, v.Template, v); err != nil {
		h.cfg.Logger.Error("dashboard template failed", "template", v.Template, "path", r.URL.Path, logkey.Err, err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(code)
	if _, err := buf.WriteTo(w); err != nil {
		return // the client went away
	}
}

// safeURL is u when it is an absolute http(s) URL, else "": evidence
// links come from the evidence store's configuration and the records, and
// only web URLs become links.
func safeURL(u string) string {
	p, err := url.Parse(u)
	if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
		return ""
	}
	return p.String()
}

// funcs are the templates' functions.
func funcs() template.FuncMap {
	return template.FuncMap{
		"safeURL": safeURL,
		"when": func(t time.Time) string {
			if t.IsZero() {
				return "—"
			}
			return t.UTC().Format("2006-01-02 15:04:05")
		},
		"day": func(t time.Time) string {
			if t.IsZero() {
				return ""
			}
			return t.UTC().Format("2006-01-02")
		},
		"usd": func(v *float64) string {
			if v == nil {
				return "unknown"
			}
			return fmt.Sprintf("$%.4f", *v)
		},
		"tokens": func(in, out int64) string {
			if in == 0 && out == 0 {
				return "—" // an executor's row: no model, no tokens
			}
			return fmt.Sprintf("%d in / %d out", in, out)
		},
		"ms": func(v int64) string { return (time.Duration(v) * time.Millisecond).String() },
		"dur": func(d time.Duration) string {
			return d.Round(time.Millisecond).String()
		},
		"span": func(a, b time.Time) string {
			if a.IsZero() || b.IsZero() {
				return "—"
			}
			return b.Sub(a).Round(time.Millisecond).String()
		},
		"short": func(s string) string {
			if len(s) > 12 {
				return s[:12]
			}
			return s
		},
		"exit": func(p *int) string {
			if p == nil {
				return "—"
			}
			return fmt.Sprint(*p)
		},
		"pct": func(a, b int) string {
			if b == 0 {
				return "—"
			}
			return fmt.Sprintf("%.0f%%", 100*float64(a)/float64(b))
		},
		"join": strings.Join,
		"move": func(id int64, state, csrf string, back bool) jobMove {
			return jobMove{ID: id, State: state, CSRF: csrf, Back: back}
		},
		"bytes": humanBytes,
		"outcomeClass": func(o validation.Outcome) string {
			return "o-" + string(o)
		},
		"statusClass": func(s validation.Status) string {
			return "s-" + string(s)
		},
	}
}

// jobMove is the retry or cancel button of a job.
type jobMove struct {
	ID    int64
	State string
	CSRF  string
	Back  bool // return to the job's page, not the queue
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
