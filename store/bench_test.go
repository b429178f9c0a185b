package store_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gilf-review/gilf/store"
)

// BenchmarkRecordDelivery: group-committed deliveries of a real 28 KB
// payload from 64 goroutines (32 per CPU here), each a new head of one
// pull request (so each also supersedes the previous head's job).
func BenchmarkRecordDelivery(b *testing.B) {
	for _, engine := range []string{string(store.SynchronousFull), string(store.SynchronousNormal), "postgres", "postgres-many-prs"} {
		b.Run(engine, func(b *testing.B) {
			loc := filepath.Join(b.TempDir(), "gilf.db")
			if strings.HasPrefix(engine, "postgres") {
				loc = pg.NewDatabase(b)
			}
			db := openAt(b, loc, store.Options{Synchronous: syncOf(engine)})
			body := payload(b)
			manyPRs := engine == "postgres-many-prs" // a new pull request each: no supersede, no shared lock
			var seq atomic.Int64
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			b.SetParallelism(32)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					n := int(seq.Add(1))
					now := time.Now()
					j := spec(sha(n), now)
					if manyPRs {
						j.PR = n
					}
					if _, err := db.RecordDelivery(context.Background(), delivery(fmt.Sprintf("d-%d", n), body, now), j); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}

func syncOf(engine string) store.Synchronous {
	if strings.HasPrefix(engine, "postgres") {
		return ""
	}
	return store.Synchronous(engine)
}
