package dashboard

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Authentication. A request is let in by either
//
//   - a bearer token: "Authorization: Bearer <GILF_DASHBOARD_TOKEN>", for
//     scripts and the JSON API; or
//   - the session cookie the login form sets (POST /dashboard/login with
//     the token as the password), for browsers.
//
// The session cookie is stateless: "<issued>.<nonce>.<mac>", the MAC keyed
// by a key derived from the token, so changing the token ends every
// session, and a session expires SessionTTL after login. It is HttpOnly,
// SameSite=Strict, Path=/, and Secure unless the request came over plain
// HTTP from a loopback address to a loopback host name (a local `gilf
// serve` opened at http://127.0.0.1:8080): behind a TLS-terminating proxy
// the Host is the public name, so the cookie stays Secure.
//
// Every state-changing POST made with the cookie carries the session's
// CSRF token (an HMAC of the session nonce) in a hidden field, and is
// refused when the browser says it is cross-origin (Sec-Fetch-Site, or an
// Origin that is not the Host: http.CrossOriginProtection). The login form
// itself is a double-submit: a random cookie that the form repeats.

const (
	sessionCookie = "gilf_session"
	loginCookie   = "gilf_login"
	csrfField     = "csrf"
	maxFormBytes  = 16 << 10
)

// keys are derived from the token, one per use.
type keys struct {
	token   [32]byte // SHA-256 of the token: compared in constant time and constant length
	session []byte
	csrf    []byte
}

func deriveKeys(token string) keys {
	mac := func(label string) []byte {
		m := hmac.New(sha256.New, []byte(token))
		m.Write([]byte(label))
		return m.Sum(nil)
	}
	return keys{token: sha256.Sum256([]byte(token)), session: mac("gilf dashboard session"), csrf: mac("gilf dashboard csrf")}
}

func (k keys) tokenOK(got string) bool {
	sum := sha256.Sum256([]byte(got))
	return subtle.ConstantTimeCompare(sum[:], k.token[:]) == 1
}

func (k keys) sign(key []byte, msg string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(msg))
	return hex.EncodeToString(m.Sum(nil))
}

// session is a logged-in browser; a zero session is a bearer request.
type session struct {
	nonce string
}

// csrf is the session's form token.
func (h *Handler) csrf(s session) string {
	if s.nonce == "" {
		return ""
	}
	return h.keys.sign(h.keys.csrf, s.nonce)
}

// newSession issues a session cookie value.
func (h *Handler) newSession() (string, error) {
	nonce, err := randomHex()
	if err != nil {
		return "", err
	}
	msg := strconv.FormatInt(h.cfg.Now().Unix(), 10) + "." + nonce
	return msg + "." + h.keys.sign(h.keys.session, msg), nil
}

// sessionFrom checks the request's session cookie.
func (h *Handler) sessionFrom(r *http.Request) (session, bool) {
	c, err := r.Cookie(sessionCookie)
	if err != nil {
		return session{}, false
	}
	parts := strings.Split(c.Value, ".")
	if len(parts) != 3 {
		return session{}, false
	}
	msg := parts[0] + "." + parts[1]
	if !hmac.Equal([]byte(h.keys.sign(h.keys.session, msg)), []byte(parts[2])) {
		return session{}, false
	}
	issued, err := strconv.ParseInt(parts[0], 10, 64)
	if err != nil {
		return session{}, false
	}
	at := time.Unix(issued, 0)
	now := h.cfg.Now()
	if now.Before(at.Add(-time.Minute)) || !now.Before(at.Add(h.cfg.SessionTTL)) {
		return session{}, false
	}
	return session{nonce: parts[1]}, true
}

// bearer reports whether the request carries the token as a bearer.
func (h *Handler) bearer(r *http.Request) bool {
	v := r.Header.Get("Authorization")
	if v == "" {
		return false
	}
	scheme, tok, ok := strings.Cut(v, " ")
	if ok && strings.EqualFold(scheme, "Bearer") && h.keys.tokenOK(strings.TrimSpace(tok)) {
		return true
	}
	h.fails.Failed(h.client(r))
	return false
}

// authenticate lets a request in by bearer token or session cookie.
func (h *Handler) authenticate(r *http.Request) (session, bool) {
	if h.bearer(r) {
		return session{}, true
	}
	return h.sessionFrom(r)
}

func (h *Handler) authorized(r *http.Request) bool {
	_, ok := h.authenticate(r)
	return ok
}

// checkPost holds a state-changing request to the CSRF rules: no
// cross-origin browser request, and a cookie session's form token.
func (h *Handler) checkPost(r *http.Request, s session) bool {
	if err := h.xorig.Check(r); err != nil {
		return false
	}
	if s.nonce == "" { // a bearer request: no ambient credential to forge
		return true
	}
	got := r.PostFormValue(csrfField)
	return hmac.Equal([]byte(got), []byte(h.csrf(s)))
}

// secureCookie decides the cookie's Secure flag (see the top of the file).
func secureCookie(r *http.Request) bool {
	if r.TLS != nil {
		return true
	}
	return !loopbackAddr(r.RemoteAddr) || !loopbackHost(r.Host)
}

func loopbackAddr(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = hostport
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func loopbackHost(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = hostport
	}
	host = strings.Trim(host, "[]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func randomHex() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(b[:]), nil
}

func (h *Handler) setCookie(w http.ResponseWriter, r *http.Request, name, value string, maxAge time.Duration) {
	c := &http.Cookie{Name: name, Value: value, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode,
		Secure: secureCookie(r)}
	switch {
	case maxAge < 0:
		c.MaxAge = -1
	case maxAge > 0:
		c.MaxAge = int(maxAge / time.Second)
	}
	http.SetCookie(w, c)
}

// loginForm shows the login page with a fresh double-submit token.
func (h *Handler) loginForm(w http.ResponseWriter, r *http.Request) {
	if _, ok := h.authenticate(r); ok {
		http.Redirect(w, r, "/dashboard", http.StatusSeeOther)
		return
	}
	h.showLogin(w, r, http.StatusOK, "")
}

func (h *Handler) showLogin(w http.ResponseWriter, r *http.Request, code int, msg string) {
	nonce, err := randomHex()
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.setCookie(w, r, loginCookie, nonce, 10*time.Minute)
	h.render(w, r, code, &view{Template: "login", Title: "Sign in", Data: loginData{CSRF: nonce, Message: msg}})
}

type loginData struct {
	CSRF    string
	Message string
}

// login checks the token of the login form and sets the session cookie.
func (h *Handler) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if err := h.xorig.Check(r); err != nil {
		http.Error(w, "cross-origin request refused", http.StatusForbidden)
		return
	}
	c, err := r.Cookie(loginCookie)
	if err != nil || c.Value == "" || !hmac.Equal([]byte(c.Value), []byte(r.PostFormValue(csrfField))) {
		http.Error(w, "missing or stale form token: reload the login page", http.StatusForbidden)
		return
	}
	if !h.keys.tokenOK(r.PostFormValue("token")) {
		client := h.client(r)
		h.fails.Failed(client)
		h.cfg.Logger.Warn("dashboard login refused", "remote", r.RemoteAddr, "client", client)
		h.showLogin(w, r, http.StatusUnauthorized, "That is not the dashboard token.")
		return
	}
	v, err := h.newSession()
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.setCookie(w, r, loginCookie, "", -1)
	h.setCookie(w, r, sessionCookie, v, h.cfg.SessionTTL)
	http.Redirect(w, r, "/dashboard", http.StatusSeeOther)
}

// logout ends the browser's session (the cookie; the session's MAC stays
// valid until it expires, as the cookie is stateless).
func (h *Handler) logout(w http.ResponseWriter, r *http.Request, _ session) error {
	h.setCookie(w, r, sessionCookie, "", -1)
	http.Redirect(w, r, "/dashboard/login", http.StatusSeeOther)
	return nil
}
