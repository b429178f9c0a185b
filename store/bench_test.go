package store_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gilf-review/gilf/store"
)

// BenchmarkRecordDelivery: group-committed deliveries of a real 28 KB
// payload from 64 goroutines (32 per CPU here), each a new head of one
// pull request (so each also supersedes the previous head's job).
func BenchmarkRecordDelivery(b *testing.B) {
	for _, sync := range []store.Synchronous{store.SynchronousFull, store.SynchronousNormal} {
		b.Run(string(sync), func(b *testing.B) {
			db := openAt(b, filepath.Join(b.TempDir(), "gilf.db"), store.Options{Synchronous: sync})
			body := payload(b)
			var seq atomic.Int64
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			b.SetParallelism(32)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					n := int(seq.Add(1))
					now := time.Now()
					if _, err := db.RecordDelivery(context.Background(), delivery(fmt.Sprintf("d-%d", n), body, now), spec(sha(n), now)); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}
