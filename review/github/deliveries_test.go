package github

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gilf-review/gilf/review/github/githubtest"
)

// deliveryLog builds n deliveries one minute apart, the newest at end;
// failing(i) gives the status code of the i-th (0-based, oldest first).
func deliveryLog(end time.Time, n int, code func(i int) int) []githubtest.Delivery {
	out := make([]githubtest.Delivery, 0, n)
	for i := range n {
		out = append(out, githubtest.Delivery{
			ID: int64(1000 + i), GUID: fmt.Sprintf("guid-%03d", i),
			DeliveredAt: end.Add(-time.Duration(n-1-i) * time.Minute),
			StatusCode:  code(i), Event: "pull_request", Action: "opened",
			InstallationID: 1, RepositoryID: 1296269,
		})
	}
	return out
}

func ids(ds []HookDelivery) []int64 {
	out := []int64{}
	for _, d := range ds {
		out = append(out, d.ID)
	}
	return out
}

func listCalls(srv *githubtest.Server) []githubtest.Request {
	var out []githubtest.Request
	for _, r := range srv.Requests() {
		if r.Endpoint == githubtest.ListDeliveries {
			out = append(out, r)
		}
	}
	return out
}

func TestFailedDeliveriesPaginates(t *testing.T) {
	e := newEnv(t, githubtest.Options{}, nil)
	now := e.clock.Now()
	// 150 deliveries: two pages of per_page=100; every tenth failed.
	e.srv.SetDeliveries(deliveryLog(now, 150, func(i int) int {
		if i%10 == 0 {
			return http.StatusServiceUnavailable
		}
		return http.StatusAccepted
	}))
	got, err := e.c.FailedDeliveries(t.Context(), now.Add(-24*time.Hour), 0)
	if err != nil {
		t.Fatalf("FailedDeliveries: %v", err)
	}
	var want []int64
	for i := 149; i >= 0; i-- {
		if i%10 == 0 {
			want = append(want, int64(1000+i))
		}
	}
	if diff := cmp.Diff(want, ids(got)); diff != "" {
		t.Errorf("failed ids, newest first (-want +got):\n%s", diff)
	}
	first := got[0]
	wantFirst := HookDelivery{ID: 1140, GUID: "guid-140", DeliveredAt: now.Add(-9 * time.Minute).UTC(),
		StatusCode: 503, Event: "pull_request", Action: "opened"}
	if diff := cmp.Diff(wantFirst, first); diff != "" {
		t.Errorf("decoded delivery (-want +got):\n%s", diff)
	}
	calls := listCalls(e.srv)
	if len(calls) != 2 {
		t.Fatalf("%d list requests, want 2 pages", len(calls))
	}
	if c := calls[0].Query.Get("cursor"); c != "" {
		t.Errorf("first page sent cursor %q", c)
	}
	if c := calls[1].Query.Get("cursor"); c != "v1_1050" {
		t.Errorf("second page cursor = %q, want the Link header's v1_1050", c)
	}
	for _, c := range calls {
		if c.Query.Get("per_page") != "100" {
			t.Errorf("per_page = %q, want 100", c.Query.Get("per_page"))
		}
	}
}

// TestFailedDeliveriesSinceCutOff: the listing stops at the first
// delivery older than since, without reading further pages.
func TestFailedDeliveriesSinceCutOff(t *testing.T) {
	e := newEnv(t, githubtest.Options{}, nil)
	now := e.clock.Now()
	e.srv.SetDeliveries(deliveryLog(now, 250, func(int) int { return 500 }))
	tests := []struct {
		name  string
		since time.Time
		want  int // deliveries returned
		pages int
	}{
		{"within the first page", now.Add(-9 * time.Minute), 10, 1},
		{"exactly at a delivery is included", now.Add(-99 * time.Minute), 100, 2},
		{"on the second page", now.Add(-149 * time.Minute), 150, 2},
		{"nothing new", now.Add(time.Second), 0, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := len(listCalls(e.srv))
			got, err := e.c.FailedDeliveries(t.Context(), tc.since, 0)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != tc.want {
				t.Errorf("got %d deliveries, want %d", len(got), tc.want)
			}
			for _, d := range got {
				if d.DeliveredAt.Before(tc.since) {
					t.Errorf("delivery %d at %s is before since %s", d.ID, d.DeliveredAt, tc.since)
				}
			}
			if n := len(listCalls(e.srv)) - before; n != tc.pages {
				t.Errorf("%d pages read, want %d", n, tc.pages)
			}
		})
	}
}

// TestFailedDeliveriesLimit: at most limit deliveries are read, at the
// boundary and one past it.
func TestFailedDeliveriesLimit(t *testing.T) {
	e := newEnv(t, githubtest.Options{}, nil)
	now := e.clock.Now()
	e.srv.SetDeliveries(deliveryLog(now, 150, func(int) int { return 0 }))
	tests := []struct {
		name    string
		limit   int
		want    int
		perPage string
	}{
		{"limit under a page", 5, 5, "5"},
		{"limit of one page", 100, 100, "100"},
		{"limit one past a page", 101, 101, "100"},
		{"limit over the log", 1000, 150, "100"},
		{"zero takes the default", 0, 150, "100"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := len(listCalls(e.srv))
			got, err := e.c.FailedDeliveries(t.Context(), time.Time{}, tc.limit)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != tc.want {
				t.Errorf("got %d, want %d", len(got), tc.want)
			}
			if got := listCalls(e.srv)[before].Query.Get("per_page"); got != tc.perPage {
				t.Errorf("per_page = %s, want %s", got, tc.perPage)
			}
		})
	}
}

// TestFailedDeliveriesFilter: 2xx attempts are dropped and so is every
// attempt of a GUID that a 2xx attempt covered; a GUID failed twice is
// returned once (its newest attempt).
func TestFailedDeliveriesFilter(t *testing.T) {
	e := newEnv(t, githubtest.Options{}, nil)
	now := e.clock.Now()
	at := func(m int) time.Time { return now.Add(-time.Duration(m) * time.Minute) }
	e.srv.SetDeliveries([]githubtest.Delivery{
		{ID: 1, GUID: "ok", DeliveredAt: at(10), StatusCode: 202, Event: "pull_request"},
		{ID: 2, GUID: "ok-200", DeliveredAt: at(10), StatusCode: 200, Event: "ping"},
		{ID: 3, GUID: "fixed-later", DeliveredAt: at(9), StatusCode: 503, Event: "pull_request"},
		{ID: 4, GUID: "fixed-later", DeliveredAt: at(8), StatusCode: 202, Redelivery: true, Event: "pull_request"},
		{ID: 5, GUID: "failed-twice", DeliveredAt: at(7), StatusCode: 503, Event: "pull_request"},
		{ID: 6, GUID: "failed-twice", DeliveredAt: at(6), StatusCode: 0, Redelivery: true, Event: "pull_request"},
		{ID: 7, GUID: "no-answer", DeliveredAt: at(5), StatusCode: 0, Event: "pull_request", Action: "synchronize"},
		{ID: 8, GUID: "bad-signature", DeliveredAt: at(4), StatusCode: 401, Event: "pull_request"},
		{ID: 9, GUID: "redirect", DeliveredAt: at(3), StatusCode: 302, Event: "pull_request"},
		{ID: 10, GUID: "top-of-2xx", DeliveredAt: at(2), StatusCode: 299, Event: "pull_request"},
		{ID: 11, GUID: "past-2xx", DeliveredAt: at(1), StatusCode: 300, Event: "pull_request"},
	})
	got, err := e.c.FailedDeliveries(t.Context(), at(60), 0)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]int64{11, 9, 8, 7, 6}, ids(got)); diff != "" {
		t.Errorf("failed ids (-want +got):\n%s", diff)
	}
	if !got[4].Redelivery || got[4].GUID != "failed-twice" {
		t.Errorf("failed-twice: got %+v, want its newest attempt (a redelivery)", got[4])
	}
	if got[3].Action != "synchronize" {
		t.Errorf("action = %q", got[3].Action)
	}
}

// TestDeliveriesUseTheAppJWT: both endpoints authenticate as the App,
// never with an installation token, even when one is cached.
func TestDeliveriesUseTheAppJWT(t *testing.T) {
	e := newEnv(t, githubtest.Options{}, nil)
	now := e.clock.Now()
	if _, err := e.c.PullRequest(t.Context(), e.repo, 1347); err != nil {
		t.Fatalf("PullRequest (mints a token first): %v", err)
	}
	e.srv.SetDeliveries(deliveryLog(now, 3, func(int) int { return 503 }))
	got, err := e.c.FailedDeliveries(t.Context(), now.Add(-time.Hour), 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.c.Redeliver(t.Context(), got[0].ID); err != nil {
		t.Fatalf("Redeliver: %v", err)
	}
	n := 0
	for _, r := range e.srv.Requests() {
		if r.Endpoint == githubtest.ListDeliveries || r.Endpoint == githubtest.Redeliver {
			n++
			if r.Auth != "jwt" {
				t.Errorf("%s %s authenticated with %q, want jwt", r.Method, r.Path, r.Auth)
			}
		}
	}
	if n != 2 {
		t.Errorf("%d delivery requests, want 2", n)
	}
	if diff := cmp.Diff([]int64{1002}, e.srv.Redeliveries()); diff != "" {
		t.Errorf("redeliveries (-want +got):\n%s", diff)
	}
}

func TestRedeliver(t *testing.T) {
	tests := []struct {
		name       string
		id         int64
		fault      *githubtest.Fault
		wantErr    error // errors.Is; nil for success
		wantStatus int   // statusOf(err) when not 0
		wantCalls  int
		wantAsked  []int64
	}{
		{name: "accepted", id: 1001, wantCalls: 1, wantAsked: []int64{1001}},
		{name: "5xx is retried", id: 1001, fault: &githubtest.Fault{Kind: githubtest.Status, Status: 502},
			wantCalls: 2, wantAsked: []int64{1001}},
		{name: "unknown id is a 404, not retried", id: 77, wantStatus: 404, wantCalls: 1},
		{name: "zero id is refused before sending", id: 0, wantErr: ErrInvalidInput},
		{name: "negative id is refused before sending", id: -5, wantErr: ErrInvalidInput},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, githubtest.Options{}, nil)
			e.srv.SetDeliveries(deliveryLog(e.clock.Now(), 3, func(int) int { return 503 }))
			if tc.fault != nil {
				e.srv.Fail(githubtest.Redeliver, *tc.fault)
			}
			err := e.c.Redeliver(t.Context(), tc.id)
			switch {
			case tc.wantErr != nil:
				if !errors.Is(err, tc.wantErr) {
					t.Errorf("err = %v, want %v", err, tc.wantErr)
				}
			case tc.wantStatus != 0:
				if statusOf(err) != tc.wantStatus {
					t.Errorf("err = %v, want HTTP %d", err, tc.wantStatus)
				}
				var te *TransientError
				if errors.As(err, &te) {
					t.Errorf("a %d is not transient: %v", tc.wantStatus, err)
				}
			case err != nil:
				t.Errorf("Redeliver: %v", err)
			}
			if n := e.srv.Count(githubtest.Redeliver); n != tc.wantCalls {
				t.Errorf("%d redeliver requests, want %d", n, tc.wantCalls)
			}
			if diff := cmp.Diff(tc.wantAsked, e.srv.Redeliveries()); diff != "" {
				t.Errorf("redeliveries (-want +got):\n%s", diff)
			}
		})
	}
}

// TestFailedDeliveriesRetriesAndGivesUp: a 5xx page is retried; attempts
// used up give a *TransientError.
func TestFailedDeliveriesRetriesAndGivesUp(t *testing.T) {
	e := newEnv(t, githubtest.Options{}, nil)
	e.srv.SetDeliveries(deliveryLog(e.clock.Now(), 2, func(int) int { return 503 }))
	e.srv.Fail(githubtest.ListDeliveries, githubtest.Fault{Kind: githubtest.Status, Status: 502})
	got, err := e.c.FailedDeliveries(t.Context(), time.Time{}, 0)
	if err != nil || len(got) != 2 {
		t.Fatalf("after one 502: %d deliveries, err %v; want 2, nil", len(got), err)
	}
	e.srv.Fail(githubtest.ListDeliveries, githubtest.Fault{Kind: githubtest.Status, Status: 502, Times: DefaultRetryAttempts})
	_, err = e.c.FailedDeliveries(t.Context(), time.Time{}, 0)
	var te *TransientError
	if !errors.As(err, &te) {
		t.Fatalf("err = %v, want *TransientError", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := e.c.FailedDeliveries(ctx, time.Time{}, 0); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled ctx: err = %v", err)
	}
}
