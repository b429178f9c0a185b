package githubtest

import (
	"cmp"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The App webhook's delivery endpoints (App JWT only, like GitHub).
const (
	ListDeliveries Endpoint = "apps/list-webhook-deliveries"
	Redeliver      Endpoint = "apps/redeliver-webhook-delivery"
)

// Delivery is one delivery attempt of the App's webhook as
// GET /app/hook/deliveries lists it. A zero ID is assigned by
// SetDeliveries; an empty Status is derived from StatusCode ("OK" for
// 2xx, as GitHub writes it).
type Delivery struct {
	ID             int64
	GUID           string
	DeliveredAt    time.Time
	Redelivery     bool
	Status         string
	StatusCode     int
	Event          string
	Action         string
	InstallationID int64
	RepositoryID   int64
}

// deliveryCursorPrefix starts the opaque cursor the fake puts in Link
// headers; GitHub's look alike (v1_<id>).
const deliveryCursorPrefix = "v1_"

// hookDeliveries is the App webhook's delivery log; guarded by Server.mu.
type hookDeliveries struct {
	list            []Delivery
	nextID          int64
	redeliveries    []int64
	redeliverStatus int
}

// SetDeliveries replaces the delivery log. The list endpoint serves it
// newest first (by DeliveredAt, then ID).
func (s *Server) SetDeliveries(ds []Delivery) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := &s.hooks
	h.list = nil
	for _, d := range ds {
		h.nextID = max(h.nextID, d.ID)
	}
	for _, d := range ds {
		if d.ID == 0 {
			h.nextID++
			d.ID = h.nextID
		}
		h.list = append(h.list, d)
	}
}

// SetRedeliveryResult makes every later redelivery request add an attempt
// to the log, with the same GUID, redelivery true, delivered now and
// answered with code (as if GitHub delivered it and the receiver answered
// code). 0, the default, adds nothing.
func (s *Server) SetRedeliveryResult(code int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hooks.redeliverStatus = code
}

// Deliveries returns the delivery log, newest first.
func (s *Server) Deliveries() []Delivery {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sortedDeliveries()
}

// Redeliveries returns the delivery ids whose redelivery was requested
// (and accepted), in order.
func (s *Server) Redeliveries() []int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.hooks.redeliveries)
}

// sortedDeliveries is the log newest first; s.mu is held.
func (s *Server) sortedDeliveries() []Delivery {
	out := slices.Clone(s.hooks.list)
	slices.SortStableFunc(out, func(a, b Delivery) int {
		if c := b.DeliveredAt.Compare(a.DeliveredAt); c != 0 {
			return c
		}
		return cmp.Compare(b.ID, a.ID)
	})
	return out
}

// app wraps an App-level endpoint: App-JWT auth (an installation token is
// refused, as GitHub refuses it), recording, faults.
func (s *Server) app(ep Endpoint, h func(http.ResponseWriter, *http.Request)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		authErr := s.verifyJWT(r)
		auth := "jwt"
		switch {
		case authErr == nil:
		case r.Header.Get("Authorization") == "":
			auth = "none"
		case s.anyToken(r):
			auth = "token"
		default:
			auth = "invalid"
		}
		s.record(r, ep, auth, nil)
		if f, ok := s.takeFault(ep); ok && f.Kind != LandThenStatus {
			s.writeFault(w, f)
			return
		}
		if authErr != nil {
			s.basicError(w, http.StatusUnauthorized, "A JSON web token could not be decoded")
			return
		}
		h(w, r)
	}
}

// anyToken reports whether the request carries an installation token the
// fake minted (of any repository).
func (s *Server) anyToken(r *http.Request) bool {
	raw, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		raw, ok = strings.CutPrefix(r.Header.Get("Authorization"), "token ")
	}
	if !ok {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	_, minted := s.tokens[raw]
	return minted
}

// listDeliveries serves GET /app/hook/deliveries: per_page (default 30,
// at most 100) and cursor pagination with a Link rel="next" header.
func (s *Server) listDeliveries(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	per := 30
	if v := q.Get("per_page"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100 {
			s.basicError(w, http.StatusUnprocessableEntity, "per_page must be between 1 and 100")
			return
		}
		per = n
	}
	s.mu.Lock()
	all := s.sortedDeliveries()
	s.mu.Unlock()
	start := 0
	if c := q.Get("cursor"); c != "" {
		id, err := strconv.ParseInt(strings.TrimPrefix(c, deliveryCursorPrefix), 10, 64)
		if err != nil || !strings.HasPrefix(c, deliveryCursorPrefix) {
			s.basicError(w, http.StatusUnprocessableEntity, "invalid cursor")
			return
		}
		start = len(all)
		for i, d := range all {
			if d.ID == id {
				start = i + 1
				break
			}
		}
	}
	end := min(start+per, len(all))
	page := all[start:end]
	if end < len(all) {
		nq := url.Values{}
		nq.Set("per_page", strconv.Itoa(per))
		nq.Set("cursor", deliveryCursorPrefix+strconv.FormatInt(page[len(page)-1].ID, 10))
		next := url.URL{Scheme: "http", Host: r.Host, Path: r.URL.Path, RawQuery: nq.Encode()}
		w.Header().Set("Link", fmt.Sprintf(`<%s>; rel="next"`, next.String()))
	}
	out := make([]map[string]any, 0, len(page))
	for _, d := range page {
		out = append(out, deliveryJSON(d))
	}
	writeJSON(w, http.StatusOK, out)
}

// deliveryJSON is a delivery as GitHub's "simple webhook delivery".
func deliveryJSON(d Delivery) map[string]any {
	status := d.Status
	if status == "" {
		switch {
		case d.StatusCode >= 200 && d.StatusCode <= 299:
			status = "OK"
		case d.StatusCode == 0:
			status = "timed out"
		default:
			status = "Invalid HTTP Response: " + strconv.Itoa(d.StatusCode)
		}
	}
	var action any
	if d.Action != "" {
		action = d.Action
	}
	var inst, repo any
	if d.InstallationID != 0 {
		inst = d.InstallationID
	}
	if d.RepositoryID != 0 {
		repo = d.RepositoryID
	}
	return map[string]any{
		"id":              d.ID,
		"guid":            d.GUID,
		"delivered_at":    d.DeliveredAt.UTC().Format(time.RFC3339),
		"redelivery":      d.Redelivery,
		"duration":        0.27,
		"status":          status,
		"status_code":     d.StatusCode,
		"event":           d.Event,
		"action":          action,
		"installation_id": inst,
		"repository_id":   repo,
		"throttled_at":    nil,
	}
}

// redeliver serves POST /app/hook/deliveries/{id}/attempts: 202 for a
// known delivery, 404 otherwise.
func (s *Server) redeliver(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	s.mu.Lock()
	idx := -1
	if err == nil {
		idx = slices.IndexFunc(s.hooks.list, func(d Delivery) bool { return d.ID == id })
	}
	if idx < 0 {
		s.mu.Unlock()
		s.basicError(w, http.StatusNotFound, "Not Found")
		return
	}
	h := &s.hooks
	h.redeliveries = append(h.redeliveries, id)
	if h.redeliverStatus != 0 {
		orig := h.list[idx]
		h.nextID++
		h.list = append(h.list, Delivery{
			ID: h.nextID, GUID: orig.GUID, DeliveredAt: s.opts.Now(), Redelivery: true,
			StatusCode: h.redeliverStatus, Event: orig.Event, Action: orig.Action,
			InstallationID: orig.InstallationID, RepositoryID: orig.RepositoryID,
		})
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusAccepted, map[string]any{})
}
