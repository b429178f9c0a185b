package store_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gilf-review/gilf/store"
)

func cpuNow() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func TestZZCPU(t *testing.T) {
	db := openAt(t, filepath.Join(t.TempDir(), "gilf.db"), store.Options{Synchronous: store.SynchronousNormal})
	body := payload(t)
	pad := make([]byte, 25<<10)
	copy(pad, body)
	const n = 2000
	c0 := cpuNow()
	w0 := time.Now()
	var wg sync.WaitGroup
	for g := range 64 {
		wg.Go(func() {
			for i := g; i < n; i += 64 {
				now := time.Now()
				if _, err := db.RecordDelivery(context.Background(), delivery(fmt.Sprintf("d-%d", i), pad, now), spec(sha(i), now)); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	fmt.Printf("cpu per delivery %v wall %v\n", (cpuNow()-c0)/n, time.Since(w0)/n)
}
