package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/gilf-review/gilf/dashboard"
	"github.com/gilf-review/gilf/evidence"
	"github.com/gilf-review/gilf/store"
)

// DashboardConfig is the dashboard's setting (docs/configuration.md, docs/operating.md "Dashboard").
type DashboardConfig struct {
	// Token is GILF_DASHBOARD_TOKEN: unset, /dashboard and /api/v1/ are
	// not served (404); set, it is the bearer token and the login
	// form's password, at least dashboard.MinTokenLen bytes.
	Token Secret
	// URL is GILF_DASHBOARD_URL, the dashboard's public base URL
	// (https://gilf.example.com): each check run's details_url links to
	// its job's page there. Unset, check runs carry none.
	URL string
}

// DetailsURL is the check run's details_url of a job, "" without a
// public URL.
func (c DashboardConfig) DetailsURL(jobID int64) string {
	if !c.Enabled() || c.URL == "" {
		return ""
	}
	return c.URL + dashboard.JobPath(jobID)
}

// Enabled reports whether the dashboard is served.
func (c DashboardConfig) Enabled() bool { return c.Token.Reveal() != "" }

func loadDashboard(getenv func(string) string) (DashboardConfig, error) {
	tok := strings.TrimSpace(getenv("GILF_DASHBOARD_TOKEN"))
	if tok != "" && len(tok) < dashboard.MinTokenLen {
		return DashboardConfig{}, fmt.Errorf("GILF_DASHBOARD_TOKEN: want at least %d characters, got %d", dashboard.MinTokenLen, len(tok))
	}
	c := DashboardConfig{Token: NewSecret(tok)}
	if raw := strings.TrimSpace(getenv("GILF_DASHBOARD_URL")); raw != "" {
		u, err := url.Parse(raw)
		switch {
		case err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil:
			return DashboardConfig{}, fmt.Errorf("GILF_DASHBOARD_URL=%q: want the dashboard's public base URL, http(s)://host[/path], no query, fragment or credentials", raw)
		case tok == "":
			return DashboardConfig{}, errors.New("GILF_DASHBOARD_URL is set but GILF_DASHBOARD_TOKEN is not: the dashboard is off, so check runs would link to a 404")
		}
		c.URL = strings.TrimSuffix(u.String(), "/")
	}
	return c, nil
}

// The store is the dashboard's reader, queue and canceller.
var (
	_ dashboard.Reader    = (*store.DB)(nil)
	_ dashboard.Requeuer  = (*store.DB)(nil)
	_ dashboard.Canceller = (*store.DB)(nil)
)

// newDashboard builds the dashboard's handler (serve builds it only when
// c is Enabled). ev is the evidence store, nil when evidence is off.
func newDashboard(c DashboardConfig, trusted []netip.Prefix, db *store.DB, ev evidence.Store, log *slog.Logger) (http.Handler, error) {
	h, err := dashboard.New(dashboard.Config{Token: c.Token.Reveal(), Reader: db, Queue: db, Cancel: db,
		Evidence: dashboardEvidence(ev), IsNotFound: func(err error) bool { return errors.Is(err, store.ErrNotFound) },
		Logger: log, TrustedProxies: trusted})
	if err != nil {
		return nil, fmt.Errorf("dashboard: %w", err)
	}
	return h, nil
}

// EvidenceLinkTTL is how long a presigned evidence link the dashboard
// hands out lives: long enough to load, not to keep.
const EvidenceLinkTTL = 5 * time.Minute

// dashboardEvidence opens the evidence store's objects for the
// dashboard: the filesystem store's bytes, or a presigned S3 link. nil
// when there is no store.
func dashboardEvidence(ev evidence.Store) dashboard.Evidence {
	switch s := ev.(type) {
	case *evidence.FSStore:
		return fsEvidence{s}
	case *evidence.S3Store:
		return s3Evidence{s}
	}
	return nil
}

type fsEvidence struct{ s *evidence.FSStore }

func (e fsEvidence) OpenEvidence(_ context.Context, key string) (dashboard.EvidenceObject, error) {
	rc, err := e.s.Open(key)
	return dashboard.EvidenceObject{Body: rc}, err
}

type s3Evidence struct{ s *evidence.S3Store }

func (e s3Evidence) OpenEvidence(ctx context.Context, key string) (dashboard.EvidenceObject, error) {
	u, err := e.s.PresignGet(ctx, key, EvidenceLinkTTL)
	return dashboard.EvidenceObject{URL: u}, err
}
