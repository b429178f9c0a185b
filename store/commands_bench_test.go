package store_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gilf-review/gilf/store"
	"github.com/gilf-review/gilf/store/storetest"
)

// BenchmarkPendingCommandsPoll: what the partial index of migration 0010
// buys. Each replica's command worker polls once a second; the store has
// benchDeliveries ordinary deliveries and one command. "index" is the
// store's statement (on the partial index), "no index" the same statement
// after the index was dropped: the plan without 0010, deliveries having
// no other secondary index. "PendingCommands" adds reading the body.
func BenchmarkPendingCommandsPoll(b *testing.B) {
	const benchDeliveries = 20000
	ctx := context.Background()
	c := newClock()
	db, path := openTest(b, c)
	now := c.Now()
	record(b, db, storetest.CommandDelivery("cmd-1", now.Add(-time.Minute)), nil)
	raw := rawDB(b, path)
	tx, err := raw.Begin()
	if err != nil {
		b.Fatal(err)
	}
	for i := range benchDeliveries {
		if _, err := tx.Exec(`INSERT INTO deliveries (id, event, action, repo, pr, received_at, status, body)
			VALUES (?, 'pull_request', 'synchronize', 'o/r', 1, ?, 'queued', x'7b7d')`,
			fmt.Sprintf("d-%d", i), now.Add(-time.Duration(i)*time.Hour/benchDeliveries).UnixMilli()); err != nil {
			b.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		b.Fatal(err)
	}
	var n int
	if err := raw.QueryRow(`SELECT COUNT(*) FROM deliveries`).Scan(&n); err != nil || n != benchDeliveries+1 {
		b.Fatalf("%d deliveries, %v", n, err)
	}
	since, stale := now.Add(-time.Hour), now.Add(-5*time.Minute)
	poll := func(q string) func(b *testing.B) {
		return func(b *testing.B) {
			for b.Loop() {
				rows, err := raw.Query(q, since.UnixMilli(), stale.UnixMilli(), 10)
				if err != nil {
					b.Fatal(err)
				}
				n := 0
				for rows.Next() {
					n++
				}
				if err := rows.Close(); err != nil || n != 1 {
					b.Fatalf("%d rows, %v", n, err)
				}
			}
		}
	}
	b.Run("PendingCommands", func(b *testing.B) {
		for b.Loop() {
			if p, err := db.PendingCommands(ctx, since, stale, 10); err != nil || len(p) != 1 {
				b.Fatalf("%d pending, %v", len(p), err)
			}
		}
	})
	b.Run("index", poll(store.SQLPendingCommands))
	// The baseline: the same statement on the same rows once the index
	// is gone (SQLite's NOT INDEXED does not keep the OR optimization off
	// a partial index, so the index is dropped).
	if _, err := raw.Exec(`DROP INDEX deliveries_commands`); err != nil {
		b.Fatal(err)
	}
	b.Run("no index", poll(strings.Replace(store.SQLPendingCommands, "INDEXED BY deliveries_commands", "", 1)))
}
