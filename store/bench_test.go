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
// pull request (so each also supersedes the previous head's job), or of
// one of 500 (-500-prs), on SQLite (FULL, NORMAL) and PostgreSQL.
func BenchmarkRecordDelivery(b *testing.B) {
	for _, engine := range []string{string(store.SynchronousFull), string(store.SynchronousFull) + manySuffix, string(store.SynchronousNormal), "postgres", "postgres" + manySuffix} {
		b.Run(engine, func(b *testing.B) {
			loc := filepath.Join(b.TempDir(), "gilf.db")
			if strings.HasPrefix(engine, "postgres") {
				loc = pg.NewDatabase(b)
			}
			db := openAt(b, loc, store.Options{Synchronous: syncOf(engine)})
			body := payload(b)
			manyPRs := strings.HasSuffix(engine, manySuffix) // 500 pull requests: each delivery supersedes its PR's last head
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
						j.PR = 1 + n%500
					}
					if _, err := db.RecordDelivery(context.Background(), delivery(fmt.Sprintf("d-%d", n), body, now), j); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}

// manySuffix names the runs over 500 pull requests.
const manySuffix = "-500-prs"

func syncOf(engine string) store.Synchronous {
	if strings.HasPrefix(engine, "postgres") {
		return ""
	}
	return store.Synchronous(strings.TrimSuffix(engine, manySuffix))
}
