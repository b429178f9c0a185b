package store

import (
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// BenchmarkSoloSupersede: the process's CPU time per delivery when new
// heads alone with their pull request in a batch supersede their older
// heads in one statement per batch (solo, the store's way) and one
// statement each (at once, the baseline), in the same run. Each iteration
// records soloDeliveries new heads of 500 pull requests from 64
// goroutines, each way, on a store of its own; it reports each way's CPU
// time and wall time per delivery, and the CPU ratio.
//
//	go test ./store -run '^$' -bench SoloSupersede -benchtime 3x
func BenchmarkSoloSupersede(b *testing.B) {
	const soloDeliveries = 20_000
	body := make([]byte, 2048)
	var seq atomic.Int64
	measure := func(atOnce bool) (cpu, wall time.Duration) {
		db := openInternal(b, Options{})
		db.soloAtOnce = atOnce
		cpu0, start := processCPU(b), time.Now()
		recordNewHeads(b, db, soloDeliveries, &seq, body)
		return (processCPU(b) - cpu0) / soloDeliveries, time.Since(start) / soloDeliveries
	}
	var atOnceCPU, soloCPU, atOnceWall, soloWall time.Duration
	for b.Loop() {
		c, w := measure(true)
		atOnceCPU, atOnceWall = atOnceCPU+c, atOnceWall+w
		c, w = measure(false)
		soloCPU, soloWall = soloCPU+c, soloWall+w
	}
	us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) / float64(b.N) }
	b.ReportMetric(us(atOnceCPU), "at-once-cpu-µs/delivery")
	b.ReportMetric(us(soloCPU), "solo-cpu-µs/delivery")
	b.ReportMetric(us(atOnceWall), "at-once-wall-µs/delivery")
	b.ReportMetric(us(soloWall), "solo-wall-µs/delivery")
	b.ReportMetric(float64(soloCPU)/float64(atOnceCPU), "cpu-ratio")
}

// processCPU is the test process's CPU time so far (user and system).
func processCPU(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
