package githubtest

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

// getDeliveries fetches one page of the delivery list and returns the
// status, the ids served and the Link header.
func getDeliveries(t *testing.T, url, auth string) (int, []int64, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, nil, ""
	}
	var items []struct {
		ID          int64  `json:"id"`
		GUID        string `json:"guid"`
		DeliveredAt string `json:"delivered_at"`
		Status      string `json:"status"`
		StatusCode  int    `json:"status_code"`
		Redelivery  bool   `json:"redelivery"`
	}
	if err := json.Unmarshal(b, &items); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	var ids []int64
	for _, it := range items {
		if it.GUID == "" || it.DeliveredAt == "" || it.Status == "" {
			t.Errorf("incomplete item %+v", it)
		}
		ids = append(ids, it.ID)
	}
	return resp.StatusCode, ids, resp.Header.Get("Link")
}

// linkNext extracts the rel="next" URL of a Link header.
func linkNext(link string) string {
	u, rest, ok := strings.Cut(strings.TrimPrefix(link, "<"), ">")
	if !ok || !strings.Contains(rest, `rel="next"`) {
		return ""
	}
	return u
}

func TestServerDeliveries(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().Truncate(time.Second)
	srv := New(t, Options{AppID: 7, PublicKey: &key.PublicKey, Now: func() time.Time { return now }})
	var ds []Delivery
	for i := range 5 {
		ds = append(ds, Delivery{GUID: "g" + string(rune('a'+i)), DeliveredAt: now.Add(time.Duration(i-5) * time.Minute), StatusCode: 503, Event: "pull_request"})
	}
	srv.SetDeliveries(ds)
	jwtAuth := "Bearer " + signed(t, key, "7", now.Add(-time.Minute), now.Add(9*time.Minute))
	list := srv.URL + "app/hook/deliveries"

	t.Run("auth", func(t *testing.T) {
		if code, _, _ := getDeliveries(t, list, ""); code != 401 {
			t.Errorf("no auth: %d, want 401", code)
		}
		code, m := do(t, "POST", srv.URL+"app/installations/1/access_tokens", jwtAuth, `{"repositories":["Hello-World"]}`)
		if code != 201 {
			t.Fatalf("mint: %d", code)
		}
		if code, _, _ := getDeliveries(t, list, "Bearer "+m["token"].(string)); code != 401 {
			t.Errorf("installation token: %d, want 401 (App JWT only)", code)
		}
		var auths []string
		for _, r := range srv.Requests() {
			if r.Endpoint == ListDeliveries {
				auths = append(auths, r.Auth)
			}
		}
		if want := []string{"none", "token"}; !slices.Equal(auths, want) {
			t.Errorf("recorded auth %v, want %v", auths, want)
		}
	})
	t.Run("cursor pagination newest first", func(t *testing.T) {
		var all []int64
		next := list + "?per_page=2"
		for pages := 0; next != ""; pages++ {
			if pages == 10 {
				t.Fatal("more than 10 pages for 5 deliveries")
			}
			code, ids, link := getDeliveries(t, next, jwtAuth)
			if code != 200 {
				t.Fatalf("page %d: %d", pages, code)
			}
			all = append(all, ids...)
			next = linkNext(link)
			if next != "" && !strings.Contains(next, "cursor=v1_") {
				t.Errorf("next link %q has no cursor", next)
			}
		}
		if want := []int64{5, 4, 3, 2, 1}; !slices.Equal(all, want) {
			t.Errorf("ids %v, want %v", all, want)
		}
	})
	t.Run("per_page bounds", func(t *testing.T) {
		for _, tc := range []struct {
			q    string
			want int
		}{{"1", 200}, {"100", 200}, {"0", 422}, {"101", 422}, {"x", 422}} {
			if code, _, _ := getDeliveries(t, list+"?per_page="+tc.q, jwtAuth); code != tc.want {
				t.Errorf("per_page=%s: %d, want %d", tc.q, code, tc.want)
			}
		}
	})
	t.Run("redeliver", func(t *testing.T) {
		if code, _ := do(t, "POST", srv.URL+"app/hook/deliveries/3/attempts", "", ""); code != 401 {
			t.Errorf("no auth: %d, want 401", code)
		}
		if code, _ := do(t, "POST", srv.URL+"app/hook/deliveries/99/attempts", jwtAuth, ""); code != 404 {
			t.Errorf("unknown id: %d, want 404", code)
		}
		if code, _ := do(t, "POST", srv.URL+"app/hook/deliveries/3/attempts", jwtAuth, ""); code != 202 {
			t.Errorf("redeliver: %d, want 202", code)
		}
		if n := len(srv.Deliveries()); n != 5 {
			t.Errorf("result 0 added an attempt: %d deliveries", n)
		}
		srv.SetRedeliveryResult(202)
		if code, _ := do(t, "POST", srv.URL+"app/hook/deliveries/2/attempts", jwtAuth, ""); code != 202 {
			t.Errorf("redeliver: %d, want 202", code)
		}
		if got := srv.Redeliveries(); !slices.Equal(got, []int64{3, 2}) {
			t.Errorf("Redeliveries() = %v, want [3 2]", got)
		}
		newest := srv.Deliveries()[0]
		if newest.ID != 6 || newest.GUID != "gb" || !newest.Redelivery || newest.StatusCode != 202 || !newest.DeliveredAt.Equal(now) {
			t.Errorf("added attempt = %+v", newest)
		}
	})
}
