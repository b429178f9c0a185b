package github

import (
	"context"
	"errors"
	"fmt"
	"time"

	gh "github.com/google/go-github/v84/github"
)

// Limits of the webhook-delivery listing.
const (
	// DefaultMaxDeliveries bounds how many deliveries FailedDeliveries
	// reads when its limit is 0 or less.
	DefaultMaxDeliveries = 1000
	// MaxDeliveriesPerPage is GitHub's largest per_page for
	// GET /app/hook/deliveries.
	MaxDeliveriesPerPage = 100
)

// HookDelivery is one delivery attempt of the App's webhook, as GitHub
// lists it. GUID is the X-GitHub-Delivery value, the same for every
// redelivery of one event; ID names this one attempt.
type HookDelivery struct {
	ID          int64
	GUID        string
	DeliveredAt time.Time
	// StatusCode is the HTTP status gilf answered; 0 when GitHub got no
	// answer (timeout, connection refused).
	StatusCode int
	Redelivery bool
	Event      string
	Action     string
}

// OK reports whether the attempt was acknowledged (2xx).
func (d HookDelivery) OK() bool { return d.StatusCode >= 200 && d.StatusCode <= 299 }

// FailedDeliveries lists the App webhook's deliveries newest first
// (GET /app/hook/deliveries, authenticated with the App JWT), reading
// pages until a delivery older than since, or limit deliveries were read
// (DefaultMaxDeliveries when limit <= 0), or the last page. It returns the
// deliveries whose status code is not 2xx and whose GUID no 2xx attempt
// among those read has covered (a later delivery or redelivery that
// succeeded), one per GUID: the newest failed attempt, newest first.
//
// Deliveries older than the limit-th are not seen: a caller that sweeps
// before limit deliveries arrive sees them all.
func (c *Client) FailedDeliveries(ctx context.Context, since time.Time, limit int) ([]HookDelivery, error) {
	if limit <= 0 {
		limit = DefaultMaxDeliveries
	}
	var all []HookDelivery
	opts := &gh.ListCursorOptions{PerPage: min(limit, MaxDeliveriesPerPage)}
	seen := make(map[string]bool) // cursors already followed
	for len(all) < limit {
		var page []*gh.HookDelivery
		var resp *gh.Response
		err := c.call(ctx, "list webhook deliveries", func(ctx context.Context) (*gh.Response, error) {
			var err error
			page, resp, err = c.appClient.Apps.ListHookDeliveries(ctx, opts)
			return resp, err
		})
		if err != nil {
			return nil, err
		}
		stop := false
		for _, d := range page {
			hd := hookDelivery(d)
			if hd.DeliveredAt.Before(since) {
				stop = true
				break
			}
			all = append(all, hd)
			if len(all) == limit {
				break
			}
		}
		next := resp.Cursor
		if stop || len(page) == 0 || next == "" || seen[next] {
			break
		}
		seen[next] = true
		opts.Cursor = next
	}
	return failedOnly(all), nil
}

// failedOnly keeps the newest failed attempt of each GUID that has no
// successful attempt.
func failedOnly(all []HookDelivery) []HookDelivery {
	covered := make(map[string]bool)
	for _, d := range all {
		if d.OK() {
			covered[d.GUID] = true
		}
	}
	var out []HookDelivery
	for _, d := range all {
		if covered[d.GUID] {
			continue
		}
		covered[d.GUID] = true // one per GUID: the newest, listed first
		out = append(out, d)
	}
	return out
}

func hookDelivery(d *gh.HookDelivery) HookDelivery {
	return HookDelivery{
		ID:          d.GetID(),
		GUID:        d.GetGUID(),
		DeliveredAt: d.GetDeliveredAt().Time,
		StatusCode:  d.GetStatusCode(),
		Redelivery:  d.GetRedelivery(),
		Event:       d.GetEvent(),
		Action:      d.GetAction(),
	}
}

// Redeliver asks GitHub to deliver the delivery id again
// (POST /app/hook/deliveries/{id}/attempts, App JWT). GitHub answers 202
// Accepted; the new attempt carries the same X-GitHub-Delivery GUID, so a
// retry that asks twice yields a duplicate that intake recognizes.
func (c *Client) Redeliver(ctx context.Context, id int64) error {
	if id <= 0 {
		return fmt.Errorf("redeliver webhook delivery %d: %w: want a positive delivery id", id, ErrInvalidInput)
	}
	return c.call(ctx, fmt.Sprintf("redeliver webhook delivery %d", id), func(ctx context.Context) (*gh.Response, error) {
		_, resp, err := c.appClient.Apps.RedeliverHookDelivery(ctx, id)
		var accepted *gh.AcceptedError
		if errors.As(err, &accepted) {
			return resp, nil // 202 Accepted is the success answer
		}
		return resp, err
	})
}
