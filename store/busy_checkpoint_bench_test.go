package store

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gilf-review/gilf/validation"
)

// BenchmarkBusyCheckpointStall: how long the intake writer's own
// checkpoints hold every waiting delivery, with the checkpointer's pass
// before them (prepared, the store's way) and without it (unprepared, the
// baseline), in the same run. Each iteration records stallDeliveries new
// heads of 500 pull requests from 64 goroutines, with FULL sync and the
// default checkpointer, on a WAL capped at stallWALBytes so that the
// writer checkpoints several times; it reports each way's mean stall per
// writer checkpoint, the frames the writer copied itself, and the ratio.
//
//	go test ./store -run '^$' -bench BusyCheckpointStall -benchtime 3x
func BenchmarkBusyCheckpointStall(b *testing.B) {
	const stallDeliveries, stallWALBytes = 20_000, 16 << 20
	body := make([]byte, 2048)
	var seq atomic.Int64
	measure := func(unprepared bool) (stall time.Duration, copied float64) {
		db := openInternal(b, Options{BusyCheckpointBytes: stallWALBytes})
		db.busyUnprepared = unprepared
		recordNewHeads(b, db, stallDeliveries, &seq, body)
		n := db.busyCheckpoints.Load()
		if n == 0 {
			b.Fatalf("no writer checkpoint in %d deliveries with a %d-byte WAL cap", stallDeliveries, stallWALBytes)
		}
		return time.Duration(db.busyStall.Load() / n), float64(db.busyCopied.Load()) / float64(n)
	}
	var base, prep time.Duration
	var baseCopied, prepCopied float64
	for b.Loop() {
		s, c := measure(true)
		base, baseCopied = base+s, baseCopied+c
		s, c = measure(false)
		prep, prepCopied = prep+s, prepCopied+c
	}
	n := float64(b.N)
	b.ReportMetric(float64(base)/float64(time.Millisecond)/n, "unprepared-stall-ms")
	b.ReportMetric(float64(prep)/float64(time.Millisecond)/n, "prepared-stall-ms")
	b.ReportMetric(baseCopied/n, "unprepared-frames")
	b.ReportMetric(prepCopied/n, "prepared-frames")
	b.ReportMetric(float64(prep)/float64(base), "stall-ratio")
}

// recordNewHeads records n deliveries from 64 goroutines, each a new head
// (numbered by seq) of one of 500 pull requests.
func recordNewHeads(tb testing.TB, db *DB, n int64, seq *atomic.Int64, body []byte) {
	var wg sync.WaitGroup
	var sent atomic.Int64
	for range 64 {
		wg.Go(func() {
			for sent.Add(1) <= n {
				k := seq.Add(1)
				d := validation.Delivery{ID: fmt.Sprintf("d-%d", k), Event: "pull_request", Action: "synchronize",
					InstallationID: 1, Repo: "o/r", ReceivedAt: time.Now(), Status: validation.DeliveryQueued, Body: body}
				j := &validation.JobSpec{Repo: "o/r", PR: 1 + int(k%500), HeadSHA: fmt.Sprintf("%040x", k), BaseRef: "main",
					InstallationID: 1, Trigger: "synchronize", PRUpdatedAt: time.Now()}
				if _, err := db.RecordDelivery(context.Background(), d, j); err != nil {
					tb.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}
