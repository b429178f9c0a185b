package githubtest

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// createToken verifies the App JWT and mints a scoped token.
func (s *Server) createToken(w http.ResponseWriter, r *http.Request) {
	body, err := readBody(r)
	authErr := s.verifyJWT(r)
	auth := "jwt"
	if authErr != nil {
		auth = "invalid"
	}
	s.record(r, CreateToken, auth, body)
	if f, ok := s.takeFault(CreateToken); ok && f.Kind != LandThenStatus {
		s.writeFault(w, f)
		return
	}
	if authErr != nil {
		s.basicError(w, http.StatusUnauthorized, "A JSON web token could not be decoded: "+authErr.Error())
		return
	}
	if err != nil {
		s.basicError(w, http.StatusBadRequest, "Problems parsing JSON")
		return
	}
	if !s.installed(r.PathValue("id")) {
		s.basicError(w, http.StatusNotFound, "Not Found")
		return
	}
	var repos []string
	if rs, ok := body["repositories"].([]any); ok {
		for _, x := range rs {
			if n, ok := x.(string); ok {
				repos = append(repos, n)
			}
		}
	}
	if len(repos) == 0 {
		s.basicError(w, http.StatusUnprocessableEntity, "githubtest: a token must be scoped with repositories")
		return
	}
	resp := s.example("apps.create-installation-access-token.response.201.default.json")
	tok := "ghs_" + randHex(18)
	exp := s.opts.Now().Add(s.opts.TokenTTL).UTC()
	perms, _ := body["permissions"].(map[string]any)
	s.mu.Lock()
	s.tokens[tok] = token{repos: repos, perms: perms, expires: exp}
	s.minted++
	s.mu.Unlock()
	resp["token"] = tok
	resp["expires_at"] = exp.Format(time.RFC3339)
	resp["permissions"] = perms
	writeJSON(w, http.StatusCreated, resp)
}

// installed says whether id is an installation of the App.
func (s *Server) installed(id string) bool {
	for _, n := range append([]int64{s.opts.InstallationID}, s.opts.OtherInstallations...) {
		if id == strconv.FormatInt(n, 10) {
			return true
		}
	}
	return false
}

func (s *Server) verifyJWT(r *http.Request) error {
	raw, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return fmt.Errorf("no bearer token")
	}
	claims := &jwt.RegisteredClaims{}
	_, err := jwt.ParseWithClaims(raw, claims, func(*jwt.Token) (any, error) { return s.opts.PublicKey, nil },
		jwt.WithValidMethods([]string{"RS256"}), jwt.WithTimeFunc(s.opts.Now), jwt.WithIssuedAt(),
		jwt.WithIssuer(strconv.FormatInt(s.opts.AppID, 10)), jwt.WithExpirationRequired())
	if err != nil {
		return err
	}
	if claims.IssuedAt == nil || claims.ExpiresAt.Sub(claims.IssuedAt.Time) > 11*time.Minute ||
		claims.ExpiresAt.Sub(s.opts.Now()) > 10*time.Minute {
		return fmt.Errorf("'Expiration time' claim ('exp') is too far in the future")
	}
	s.mu.Lock()
	s.lastJWTTimes = [2]time.Time{claims.IssuedAt.Time, claims.ExpiresAt.Time}
	s.mu.Unlock()
	return nil
}

// LastJWT returns the iat and exp of the last valid App JWT.
func (s *Server) LastJWT() (iat, exp time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastJWTTimes[0], s.lastJWTTimes[1]
}

// repo wraps a repository endpoint: installation-token auth scoped to the
// repository, recording, faults.
func (s *Server) repo(ep Endpoint, h func(http.ResponseWriter, *http.Request, map[string]any)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body, err := readBody(r)
		auth := s.checkToken(r)
		s.record(r, ep, auth, body)
		f, faulted := s.takeFault(ep)
		if faulted && f.Kind != LandThenStatus {
			s.writeFault(w, f)
			return
		}
		if auth != "token" {
			s.basicError(w, http.StatusUnauthorized, "Bad credentials")
			return
		}
		if err != nil {
			s.basicError(w, http.StatusBadRequest, "Problems parsing JSON")
			return
		}
		if !strings.EqualFold(r.PathValue("owner"), s.opts.Owner) || !strings.EqualFold(r.PathValue("repo"), s.opts.Repo) {
			s.basicError(w, http.StatusNotFound, "Not Found")
			return
		}
		if faulted { // LandThenStatus: do the work, lose the answer
			h(httptest.NewRecorder(), r, body)
			s.writeFault(w, f)
			return
		}
		h(w, r, body)
	}
}

// checkToken classifies the request's credential: "token" only for an
// installation token scoped to the path's repository.
func (s *Server) checkToken(r *http.Request) string {
	t, auth := s.installationToken(r)
	if auth != "token" {
		return auth
	}
	repo := r.PathValue("repo")
	for _, n := range t.repos {
		if strings.EqualFold(n, repo) {
			return "token"
		}
	}
	return "invalid"
}

// installationToken finds the request's installation token: "token"
// when it is one that is valid now, else "none" or "invalid".
func (s *Server) installationToken(r *http.Request) (token, string) {
	h := r.Header.Get("Authorization")
	raw, ok := strings.CutPrefix(h, "Bearer ")
	if !ok {
		raw, ok = strings.CutPrefix(h, "token ")
	}
	if !ok {
		return token{}, "none"
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.tokens[raw]
	if !ok || t.revoked || !s.opts.Now().Before(t.expires) {
		return token{}, "invalid"
	}
	return t, "token"
}

func (s *Server) number(w http.ResponseWriter, r *http.Request) bool {
	if r.PathValue("number") != strconv.Itoa(s.opts.Number) {
		s.basicError(w, http.StatusNotFound, "Not Found")
		return false
	}
	return true
}

func (s *Server) getPull(w http.ResponseWriter, r *http.Request, _ map[string]any) {
	if !s.number(w, r) {
		return
	}
	pr := s.example("pulls.get.response.200.default.json")
	s.mu.Lock()
	o := s.opts
	s.mu.Unlock()
	pr["number"] = o.Number
	pr["draft"] = o.Draft
	head := pr["head"].(map[string]any)
	head["sha"] = o.HeadSHA
	if o.HeadRepoMissing {
		head["repo"] = nil
	}
	base := pr["base"].(map[string]any)
	base["ref"] = o.BaseRef
	base["sha"] = o.BaseSHA
	if o.Author != "" {
		pr["user"].(map[string]any)["login"] = o.Author
	}
	if o.Labels != nil {
		var labels []any
		for i, l := range o.Labels {
			labels = append(labels, map[string]any{"id": i + 1, "name": l, "color": "f29513", "default": false})
		}
		pr["labels"] = labels
	}
	writeJSON(w, http.StatusOK, pr)
}

func (s *Server) listFiles(w http.ResponseWriter, r *http.Request, _ map[string]any) {
	if !s.number(w, r) {
		return
	}
	var example []map[string]any
	s.load("pulls.list-files.response.200.default.json", &example)
	all := example
	s.mu.Lock()
	files, patches := s.opts.Files, s.opts.Patches
	s.mu.Unlock()
	if files != nil {
		all = nil
		for _, name := range files {
			e := map[string]any{}
			for k, v := range example[0] {
				e[k] = v
			}
			e["filename"] = name
			e["status"] = "modified"
			if patch, ok := patches[name]; ok {
				e["patch"] = patch
			}
			all = append(all, e)
		}
	}
	s.paginate(w, r, all)
}

// paginate serves items page by page with GitHub's Link header.
func (s *Server) paginate(w http.ResponseWriter, r *http.Request, items []map[string]any) {
	per, _ := strconv.Atoi(r.URL.Query().Get("per_page"))
	if per <= 0 || per > 100 {
		per = 30
	}
	page, _ := strconv.Atoi(r.URL.Query().Get("page"))
	if page <= 0 {
		page = 1
	}
	lo := min((page-1)*per, len(items))
	hi := min(lo+per, len(items))
	if hi < len(items) {
		q := r.URL.Query()
		q.Set("page", strconv.Itoa(page+1))
		q.Set("per_page", strconv.Itoa(per))
		next := url.URL{Scheme: "http", Host: r.Host, Path: r.URL.Path, RawQuery: q.Encode()}
		w.Header().Set("Link", fmt.Sprintf(`<%s>; rel="next"`, next.String()))
	}
	out := items[lo:hi]
	if out == nil {
		out = []map[string]any{}
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) getContent(w http.ResponseWriter, r *http.Request, _ map[string]any) {
	path := r.PathValue("path")
	ref := r.URL.Query().Get("ref")
	data, ok := s.opts.BaseFiles[path]
	if !ok || (ref != s.opts.BaseRef && ref != "") {
		s.basicError(w, http.StatusNotFound, "Not Found")
		return
	}
	if strings.Contains(r.Header.Get("Accept"), "application/vnd.github.raw") {
		w.Header().Set("Content-Type", "application/vnd.github.raw")
		w.WriteHeader(http.StatusOK)
		if _, err := w.Write(data); err != nil {
			return
		}
		return
	}
	f := s.example("repos.get-content.response.200.response-if-content-is-a-file.json")
	f["name"] = filepath.Base(path)
	f["path"] = path
	f["size"] = len(data)
	if len(data) > 1_000_000 { // GitHub: over 1 MB, no content in JSON
		f["encoding"] = "none"
		f["content"] = ""
	} else {
		f["encoding"] = "base64"
		f["content"] = wrap60(base64.StdEncoding.EncodeToString(data))
	}
	writeJSON(w, http.StatusOK, f)
}

// wrap60 breaks base64 into 60-column lines with real newlines, as the
// live API does.
func wrap60(s string) string {
	var b strings.Builder
	for len(s) > 60 {
		b.WriteString(s[:60])
		b.WriteByte('\n')
		s = s[60:]
	}
	b.WriteString(s)
	b.WriteByte('\n')
	return b.String()
}

func (s *Server) tarball(w http.ResponseWriter, r *http.Request, _ map[string]any) {
	ref := r.PathValue("ref")
	s.mu.Lock()
	tar := s.opts.Tarball
	if ref == s.opts.BaseSHA && ref != s.opts.HeadSHA {
		tar = s.opts.BaseTarball
	}
	loc := s.redirect
	s.mu.Unlock()
	if tar == nil {
		s.basicError(w, http.StatusNotFound, "Not Found")
		return
	}
	cred := randHex(16)
	s.mu.Lock()
	s.downloads[cred] = tar
	s.mu.Unlock()
	if loc == "" {
		loc = fmt.Sprintf("%s/%s/%s/legacy.tar.gz/%s?token=%s", s.codeload.URL, s.opts.Owner, s.opts.Repo, ref, cred)
	}
	w.Header().Set("Location", loc)
	w.Header().Set("Content-Type", "text/html;charset=utf-8")
	w.WriteHeader(http.StatusFound)
}

func (s *Server) serveCodeload(w http.ResponseWriter, r *http.Request) {
	s.record(r, Codeload, "none", nil)
	if r.Header.Get("Authorization") != "" {
		s.basicError(w, http.StatusBadRequest, "githubtest: the API token must not be sent to codeload")
		return
	}
	if f, ok := s.takeFault(Codeload); ok {
		s.writeFault(w, f)
		return
	}
	s.mu.Lock()
	tar, ok := s.downloads[r.URL.Query().Get("token")]
	s.mu.Unlock()
	if !ok {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/x-gzip")
	w.Header().Set("Content-Disposition", "attachment; filename=archive.tar.gz")
	w.WriteHeader(http.StatusOK)
	if _, err := io.Copy(w, bytes.NewReader(tar)); err != nil {
		return
	}
}
