package githubtest

import (
	"net/http"
	"strings"
)

// GetApp is GET /app, the authenticated App (App JWT only, like GitHub).
const GetApp Endpoint = "apps/get-authenticated"

// getApp serves GitHub's documented example of GET /app with the
// server's App id, the slug of its bot login, and Options.AppPermissions
// and Options.AppEvents when set.
func (s *Server) getApp(w http.ResponseWriter, r *http.Request) {
	a := s.example("apps.get-authenticated.response.200.default.json")
	a["id"] = s.opts.AppID
	a["slug"] = strings.TrimSuffix(s.opts.BotLogin, "[bot]")
	if s.opts.AppPermissions != nil {
		a["permissions"] = s.opts.AppPermissions
	}
	if s.opts.AppEvents != nil {
		a["events"] = s.opts.AppEvents
	}
	writeJSON(w, http.StatusOK, a)
}
