package main

import (
	"math"
	"testing"
	"time"
)

// TestMachineShare: two readings of /proc/stat's cpu line (the kernel's
// format: user nice system idle iowait irq softirq steal guest
// guest_nice) give the CPU time worked between them — user, nice,
// system, irq and softirq, not idle, iowait or steal — and the shares of
// steal and iowait in all the CPUs' time.
func TestMachineShare(t *testing.T) {
	a, err := parseCPULine("cpu  1575006 377 434917 2418131 80509 0 82591 152841 0 0")
	if err != nil {
		t.Fatal(err)
	}
	// 600 ticks of work (400 user, 50 nice, 100 system, 20 irq, 30
	// softirq), 250 idle, 50 iowait, 100 steal: 1,000 in all.
	b, err := parseCPULine("cpu  1575406 427 435017 2418381 80559 20 82621 152941 7 0")
	if err != nil {
		t.Fatal(err)
	}
	m := a.share(b)
	if m.busyNs != 600*clockTick {
		t.Errorf("busy = %v ns, want %v (600 ticks)", m.busyNs, 600*clockTick)
	}
	if math.Abs(m.steal-0.10) > 1e-9 || math.Abs(m.iowait-0.05) > 1e-9 {
		t.Errorf("steal %.4f, iowait %.4f; want 0.10 and 0.05", m.steal, m.iowait)
	}
	if (b.share(b) != machineShare{}) {
		t.Errorf("no time between two equal readings: %+v, want zero", b.share(b))
	}
	r := result{ok: 2000, machine: m}
	if got := r.cpuPerRequest(); got != 3000 { // 6 s of CPU for 2,000 answers
		t.Errorf("cpu per answer = %v µs, want 3000", got)
	}
	for _, bad := range []string{"", "cpu0 1 2 3 4 5 6 7 8", "cpu 1 2 3", "cpu 1 2 3 4 x 6 7 8"} {
		if _, err := parseCPULine(bad); err == nil {
			t.Errorf("parseCPULine(%q) = nil error, want one", bad)
		}
	}
}

// TestProcessCPU: the generator's CPU time counts this process's work.
func TestProcessCPU(t *testing.T) {
	before, err := processCPU()
	if err != nil {
		t.Fatal(err)
	}
	const want = 20 * time.Millisecond
	deadline := time.Now().Add(10 * time.Second)
	x := uint64(1)
	for {
		for range 1 << 20 { // work the compiler keeps
			x = x*6364136223846793005 + 1442695040888963407
		}
		now, err := processCPU()
		if err != nil {
			t.Fatal(err)
		}
		if now-before >= want {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("CPU time rose %v in 10 s of work (x=%d), want %v", now-before, x, want)
		}
	}
}
