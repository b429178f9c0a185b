package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cpuTimes is the machine's "cpu" line of /proc/stat: time spent by all
// CPUs, in clock ticks, per state.
type cpuTimes struct {
	busy   uint64 // user, nice, system, irq, softirq: the work done here
	idle   uint64
	iowait uint64 // idle with a disk request outstanding
	steal  uint64 // taken by the hypervisor for other guests
}

// clockTick is the length of one /proc/stat tick (USER_HZ, 100 on Linux).
const clockTick = 10e6 // ns

// machineTimes reads /proc/stat.
func machineTimes() (cpuTimes, error) {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return cpuTimes{}, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "cpu ") {
			return parseCPULine(sc.Text())
		}
	}
	return cpuTimes{}, errors.Join(errors.New("/proc/stat: no cpu line"), sc.Err())
}

// parseCPULine parses "cpu user nice system idle iowait irq softirq
// steal [guest guest_nice]" (guest time is already in user and nice).
func parseCPULine(line string) (cpuTimes, error) {
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return cpuTimes{}, fmt.Errorf("/proc/stat: %q is not a cpu line with 8 counters", line)
	}
	var v [8]uint64
	for i := range v {
		n, err := strconv.ParseUint(f[i+1], 10, 64)
		if err != nil {
			return cpuTimes{}, fmt.Errorf("/proc/stat: counter %d of %q: %w", i+1, line, err)
		}
		v[i] = n
	}
	return cpuTimes{busy: v[0] + v[1] + v[2] + v[5] + v[6], idle: v[3], iowait: v[4], steal: v[7]}, nil
}

// machineShare is what the machine did during one run.
type machineShare struct {
	busyNs        float64 // CPU time of everything running here: generator, servers, PostgreSQL
	steal, iowait float64 // shares of all the CPUs' time
}

// share is the machine's work between two readings.
func (a cpuTimes) share(b cpuTimes) machineShare {
	d := func(x, y uint64) float64 {
		if y < x { // a counter went back (it does not): nothing to say
			return 0
		}
		return float64(y - x)
	}
	busy, idle, io, steal := d(a.busy, b.busy), d(a.idle, b.idle), d(a.iowait, b.iowait), d(a.steal, b.steal)
	total := busy + idle + io + steal
	if total == 0 {
		return machineShare{}
	}
	return machineShare{busyNs: busy * clockTick, steal: steal / total, iowait: io / total}
}

// processCPU is this process's CPU time so far (user and system, all its
// threads): the load generator's, since the servers run in a child.
func processCPU() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, fmt.Errorf("getrusage: %w", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}
