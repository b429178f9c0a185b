package local

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// cgroupVersion says which cgroup interface the host offers.
type cgroupVersion int

const (
	cgroupNone cgroupVersion = iota
	cgroupV1
	cgroupV2
)

func (v cgroupVersion) String() string {
	switch v {
	case cgroupV1:
		return "v1"
	case cgroupV2:
		return "v2"
	}
	return "none"
}

// v1Controllers are the cgroup v1 hierarchies a step joins. memory, pids
// and cpu carry the limits; freezer makes the final kill atomic.
func v1Controllers() []string { return []string{"memory", "pids", "cpu", "freezer"} }

// cgroupPollInterval is how often a cgroup's state is polled while it is
// being frozen or removed; emptying it polls from cgroupPollFirst up,
// doubling, since a killed process is usually gone within microseconds.
const (
	cgroupPollInterval = time.Millisecond
	cgroupPollFirst    = 50 * time.Microsecond
)

// cgroupHost is where the step cgroups of this worker are made: below the
// worker's own cgroup in each hierarchy.
type cgroupHost struct {
	version cgroupVersion
	// v1 maps a controller to the worker's own cgroup directory in it.
	v1 map[string]string
	// v2 is the worker's own cgroup directory in the unified hierarchy.
	v2 string
	// limits is true when memory, pids and cpu limits can be set.
	limits bool
	// why says, when limits is false, why not.
	why string
}

// detectCgroups finds the worker's cgroups under root from the content of
// /proc/self/cgroup. A root holding cgroup.controllers is cgroup v2.
func detectCgroups(root string, self []byte) cgroupHost {
	if _, err := os.Stat(filepath.Join(root, "cgroup.controllers")); err == nil {
		for _, line := range strings.Split(string(self), "\n") {
			if rest, ok := strings.CutPrefix(line, "0::"); ok {
				dir := filepath.Join(root, filepath.Clean("/"+rest))
				h := cgroupHost{version: cgroupV2, v2: dir}
				h.limits, h.why = v2Controllers(dir)
				return h
			}
		}
		return cgroupHost{why: "cgroup v2 is mounted but /proc/self/cgroup has no unified entry"}
	}
	h := cgroupHost{version: cgroupV1, v1: map[string]string{}}
	for _, line := range strings.Split(string(self), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 || parts[1] == "" {
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			for _, want := range v1Controllers() {
				if c != want {
					continue
				}
				for _, mount := range []string{c, parts[1]} {
					dir := filepath.Join(root, mount, filepath.Clean("/"+parts[2]))
					if st, err := os.Stat(dir); err == nil && st.IsDir() {
						h.v1[c] = dir
						break
					}
				}
			}
		}
	}
	if len(h.v1) == 0 {
		return cgroupHost{why: "no cgroup v1 controller or v2 hierarchy found under " + root}
	}
	var missing []string
	for _, c := range []string{"memory", "pids", "cpu"} {
		if h.v1[c] == "" {
			missing = append(missing, c)
		}
	}
	h.limits = len(missing) == 0
	if !h.limits {
		h.why = "cgroup v1 controllers missing: " + strings.Join(missing, ", ")
	}
	return h
}

// v2Controllers reports whether memory, pids and cpu are enabled for the
// children of dir, enabling them when they are available but off.
func v2Controllers(dir string) (bool, string) {
	want := []string{"memory", "pids", "cpu"}
	if hasWords(filepath.Join(dir, "cgroup.subtree_control"), want) {
		return true, ""
	}
	if !hasWords(filepath.Join(dir, "cgroup.controllers"), want) {
		return false, "cgroup v2 controllers memory, pids and cpu are not all available in " + dir
	}
	if err := writeFile(filepath.Join(dir, "cgroup.subtree_control"), "+memory +pids +cpu"); err != nil {
		return false, fmt.Sprintf("cannot enable cgroup v2 controllers in %s (a delegated cgroup without processes is needed): %v", dir, err)
	}
	return true, ""
}

func hasWords(file string, want []string) bool {
	b, err := os.ReadFile(file)
	if err != nil {
		return false
	}
	have := strings.Fields(string(b))
	for _, w := range want {
		found := false
		for _, h := range have {
			found = found || h == w
		}
		if !found {
			return false
		}
	}
	return true
}

// stepCgroup is the cgroup the steps of one run share, one after another
// (empty between steps): one directory per v1 controller, or one v2
// directory.
type stepCgroup struct {
	version cgroupVersion
	dirs    map[string]string // v1 controller → dir; v2: "" → dir
}

// create makes the cgroup name and, when the host allows it, sets lim on
// it. On cgroup v1 the freezer hierarchy is joined only when freezer is
// set. On error nothing is left behind.
func (h cgroupHost) create(name string, lim Limits, freezer bool) (*stepCgroup, error) {
	cg := &stepCgroup{version: h.version, dirs: map[string]string{}}
	switch h.version {
	case cgroupV1:
		for c, parent := range h.v1 {
			if c != "freezer" || freezer {
				cg.dirs[c] = filepath.Join(parent, name)
			}
		}
	case cgroupV2:
		cg.dirs[""] = filepath.Join(h.v2, name)
	default:
		return nil, errors.New("no cgroup hierarchy")
	}
	for _, d := range cg.dirs {
		if err := os.Mkdir(d, 0o700); err != nil {
			return nil, errors.Join(fmt.Errorf("create cgroup: %w", err), cg.remove())
		}
	}
	if h.limits {
		if err := cg.setLimits(lim); err != nil {
			return nil, errors.Join(err, cg.remove())
		}
	}
	return cg, nil
}

func (cg *stepCgroup) setLimits(lim Limits) error {
	period := 100000
	quota := int64(lim.CPUs * float64(period))
	var sets [][2]string
	switch cg.version {
	case cgroupV1:
		sets = [][2]string{
			{filepath.Join(cg.dirs["memory"], "memory.limit_in_bytes"), strconv.FormatInt(lim.MemoryBytes, 10)},
			{filepath.Join(cg.dirs["pids"], "pids.max"), strconv.FormatInt(lim.Pids, 10)},
			{filepath.Join(cg.dirs["cpu"], "cpu.cfs_period_us"), strconv.Itoa(period)},
			{filepath.Join(cg.dirs["cpu"], "cpu.cfs_quota_us"), strconv.FormatInt(quota, 10)},
		}
		// With swap accounting, memory+swap gets the same ceiling so a
		// step cannot swap its way past the limit.
		if sw := filepath.Join(cg.dirs["memory"], "memory.memsw.limit_in_bytes"); fileExists(sw) {
			sets = append(sets, [2]string{sw, strconv.FormatInt(lim.MemoryBytes, 10)})
		}
	case cgroupV2:
		d := cg.dirs[""]
		sets = [][2]string{
			{filepath.Join(d, "memory.max"), strconv.FormatInt(lim.MemoryBytes, 10)},
			{filepath.Join(d, "pids.max"), strconv.FormatInt(lim.Pids, 10)},
			{filepath.Join(d, "cpu.max"), fmt.Sprintf("%d %d", quota, period)},
		}
		if f := filepath.Join(d, "memory.swap.max"); fileExists(f) {
			sets = append(sets, [2]string{f, "0"})
		}
		if f := filepath.Join(d, "memory.oom.group"); fileExists(f) {
			sets = append(sets, [2]string{f, "1"})
		}
	}
	for _, s := range sets {
		if err := writeFile(s[0], s[1]); err != nil {
			return fmt.Errorf("set cgroup limit: %w", err)
		}
	}
	return nil
}

// fd opens the v2 directory for clone3's CLONE_INTO_CGROUP.
func (cg *stepCgroup) fd() (*os.File, error) {
	f, err := os.OpenFile(cg.dirs[""], unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open cgroup: %w", err)
	}
	return f, nil
}

// add moves pid into the step cgroup in every hierarchy.
func (cg *stepCgroup) add(pid int) error {
	for _, d := range cg.dirs {
		if err := writeFile(filepath.Join(d, "cgroup.procs"), strconv.Itoa(pid)); err != nil {
			return fmt.Errorf("join cgroup: %w", err)
		}
	}
	return nil
}

// trackDir is the directory whose cgroup.procs lists the step's processes.
func (cg *stepCgroup) trackDir() string {
	for _, c := range []string{"", "freezer", "pids", "memory", "cpu"} {
		if d, ok := cg.dirs[c]; ok {
			return d
		}
	}
	return ""
}

// pids lists the processes in the step cgroup.
func (cg *stepCgroup) pids() ([]int, error) {
	b, err := os.ReadFile(filepath.Join(cg.trackDir(), "cgroup.procs"))
	switch {
	case errors.Is(err, os.ErrNotExist):
		b = nil // a cgroup that is gone holds nothing
	case err != nil:
		return nil, fmt.Errorf("read cgroup procs: %w", err)
	}
	var out []int
	for _, f := range strings.Fields(string(b)) {
		if n, err := strconv.Atoi(f); err == nil && !zombie(n) {
			out = append(out, n)
		}
	}
	return out, nil
}

// zombie reports whether pid has exited and only waits to be reaped. bwrap
// exits as soon as its sandbox reports the command's status, so the
// sandbox's own init is reaped by the host's init, which may take a while;
// it runs nothing and holds no descriptor meanwhile.
func zombie(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// The state follows the command name, which is in parentheses and
	// may itself hold any byte.
	i := bytes.LastIndexByte(b, ')')
	return i >= 0 && i+2 < len(b) && b[i+2] == 'Z'
}

// signal sends sig to every process of the step cgroup except those in
// skip.
func (cg *stepCgroup) signal(sig syscall.Signal, skip ...int) error {
	pids, err := cg.pids()
	if err != nil {
		return err
	}
	for _, p := range pids {
		if !containsInt(skip, p) {
			// ESRCH: it died meanwhile, which is what we want.
			if err := unix.Kill(p, sig); err != nil && !errors.Is(err, unix.ESRCH) {
				return fmt.Errorf("signal %d: %w", p, err)
			}
		}
	}
	return nil
}

// kill SIGKILLs every process of the cgroup and waits, at most
// CgroupKillTimeout, until it is empty. When processes outlive the first
// SIGKILL (a fork racing the listing), the cgroup is frozen around the
// next one. final uses v2's cgroup.kill, only when the cgroup is about to
// be removed: this kernel kills every process later cloned into a cgroup
// that was once killed that way.
func (cg *stepCgroup) kill(ctx context.Context, final bool) error {
	ctx, cancel := context.WithTimeout(ctx, CgroupKillTimeout)
	defer cancel()
	if cg.version == cgroupV2 && final {
		if f := filepath.Join(cg.dirs[""], "cgroup.kill"); fileExists(f) {
			if err := writeFile(f, "1"); err != nil {
				return fmt.Errorf("kill cgroup: %w", err)
			}
		}
	}
	// Usually only the sandbox's init is left, dying already: one
	// SIGKILL ends it and whatever is still in its pid namespace.
	if err := cg.signal(unix.SIGKILL); err != nil {
		return err
	}
	wait := cgroupPollFirst
	for i := 0; ; i++ {
		pids, err := cg.pids()
		if err != nil {
			return err
		}
		if len(pids) == 0 {
			return nil
		}
		// Give the first SIGKILL a moment before freezing: a process
		// forked between the listing and the kill is what the freezer
		// is for.
		frozen := false
		if i >= 5 {
			if frozen, err = cg.setFrozen(ctx, true); err != nil {
				return err
			}
		}
		if err := cg.signal(unix.SIGKILL); err != nil {
			return err
		}
		if frozen {
			if _, err := cg.setFrozen(ctx, false); err != nil {
				return err
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cgroup %s still has processes %v: %w", cg.trackDir(), pids, ctx.Err())
		case <-time.After(wait):
		}
		wait = min(2*wait, 5*cgroupPollInterval)
	}
}

// setFrozen freezes or thaws the cgroup (v1 freezer, v2 cgroup.freeze)
// and, when freezing, waits until it is frozen. It reports false when the
// cgroup cannot be frozen.
func (cg *stepCgroup) setFrozen(ctx context.Context, frozen bool) (bool, error) {
	var file, value, stateFile, key, want string
	switch {
	case cg.version == cgroupV1 && cg.dirs["freezer"] != "":
		file = filepath.Join(cg.dirs["freezer"], "freezer.state")
		value, stateFile, want = "THAWED", file, "FROZEN"
		if frozen {
			value = "FROZEN"
		}
	case cg.version == cgroupV2 && fileExists(filepath.Join(cg.dirs[""], "cgroup.freeze")):
		file = filepath.Join(cg.dirs[""], "cgroup.freeze")
		value, stateFile, key, want = "0", filepath.Join(cg.dirs[""], "cgroup.events"), "frozen", "1"
		if frozen {
			value = "1"
		}
	default:
		return false, nil
	}
	if err := writeFile(file, value); err != nil {
		return false, fmt.Errorf("freeze cgroup: %w", err)
	}
	if !frozen {
		return true, nil
	}
	for {
		b, err := os.ReadFile(stateFile)
		if err != nil {
			return false, fmt.Errorf("freeze cgroup: %w", err)
		}
		state := strings.TrimSpace(string(b))
		if key != "" {
			state = strconv.FormatInt(keyedValue(stateFile, key), 10)
		}
		if state == want {
			return true, nil
		}
		select {
		case <-ctx.Done():
			// A process stuck in the kernel cannot be frozen; killing
			// it unfrozen is still right.
			return true, nil
		case <-time.After(cgroupPollInterval):
		}
	}
}

// oomKills is how many processes the kernel's OOM killer killed in the
// step cgroup because of its memory limit.
func (cg *stepCgroup) oomKills() int64 {
	switch cg.version {
	case cgroupV1:
		if d := cg.dirs["memory"]; d != "" {
			return keyedValue(filepath.Join(d, "memory.oom_control"), "oom_kill")
		}
	case cgroupV2:
		return keyedValue(filepath.Join(cg.dirs[""], "memory.events"), "oom_kill")
	}
	return 0
}

// pidsMaxHits is how many forks the pids limit refused.
func (cg *stepCgroup) pidsMaxHits() int64 {
	d := cg.dirs["pids"]
	if cg.version == cgroupV2 {
		d = cg.dirs[""]
	}
	if d == "" {
		return 0
	}
	return keyedValue(filepath.Join(d, "pids.events"), "max")
}

// remove deletes the step cgroup. It must be empty (kill first).
func (cg *stepCgroup) remove() error {
	var errs []error
	for _, d := range cg.dirs {
		var err error
		for range 50 {
			err = unix.Rmdir(d)
			if err == nil || errors.Is(err, unix.ENOENT) {
				err = nil
				break
			}
			if !errors.Is(err, unix.EBUSY) {
				break
			}
			time.Sleep(cgroupPollInterval)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("remove cgroup %s: %w", d, err))
		}
	}
	return errors.Join(errs...)
}

// keyedValue reads "key value" lines and returns key's value, 0 if absent.
func keyedValue(file, key string) int64 {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 2 && f[0] == key {
			n, err := strconv.ParseInt(f[1], 10, 64)
			if err == nil {
				return n
			}
		}
	}
	return 0
}

func writeFile(name, data string) error {
	f, err := os.OpenFile(name, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, werr := f.WriteString(data)
	cerr := f.Close()
	return errors.Join(werr, cerr)
}

func fileExists(name string) bool {
	_, err := os.Stat(name)
	return err == nil
}

func containsInt(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// cgroupPrefix starts the name of every cgroup this package makes; the
// worker's tag follows (workerTag), so that cgroups of a worker that died
// can be told from those of a live one.
const cgroupPrefix = "gilf-local-"

// cgroupName names a cgroup of this worker.
func cgroupName(suffix string) string {
	return cgroupPrefix + workerTag(os.Getpid()) + "-" + suffix
}

// workerTag stands for the worker with pid in its cgroups' names: "w" and
// a hash of the boot, the pid and the process's start time. A step reads
// its cgroup's name (/proc/self/cgroup under cgroup v1), and learns no pid
// of the worker's from it; a sweep finds the tags of the live processes
// and so the cgroups of dead workers. Where /proc does not say (it always
// does on Linux), the tag is the bare pid, which the sweep also reads.
func workerTag(pid int) string {
	start, ok := processStart(pid)
	boot, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if !ok || err != nil {
		return strconv.Itoa(pid)
	}
	h := sha256.Sum256([]byte(strings.TrimSpace(string(boot)) + "/" + strconv.Itoa(pid) + "/" + start))
	return "w" + hex.EncodeToString(h[:8])
}

// processStart is the start time of pid (field 22 of /proc/pid/stat).
func processStart(pid int) (string, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "", false
	}
	// The command name is in parentheses and may hold anything.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return "", false
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state): the start time is field 22.
	if len(f) < 20 {
		return "", false
	}
	return f[19], true
}

// liveTags are the workerTags of every live process.
func liveTags() map[string]bool {
	live := map[string]bool{}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return live
	}
	for _, en := range entries {
		if pid, err := strconv.Atoi(en.Name()); err == nil {
			live[workerTag(pid)] = true
		}
	}
	return live
}

// staleTag reports whether tag (a cgroup name's) is that of a worker that
// is gone: a bare pid that no longer exists, or a hash no live process
// has. Anything else is not ours to judge.
func staleTag(tag string, live func() map[string]bool) bool {
	if pid, err := strconv.Atoi(tag); err == nil {
		if pid <= 0 || pid == os.Getpid() {
			return false
		}
		_, err := os.Stat("/proc/" + tag)
		return err != nil // its worker lives (or its pid was reused)
	}
	if len(tag) != 17 || tag[0] != 'w' {
		return false
	}
	return !live()[tag]
}

// sweep kills and removes the cgroups left by workers that died (their
// pid no longer exists) under this worker's own cgroup, and reports how
// many it removed. A sandbox dies with its worker (--die-with-parent);
// what can be left is an empty cgroup, or in tier none a daemon.
func (h cgroupHost) sweep(ctx context.Context) (int, error) {
	parents := map[string]string{}
	switch h.version {
	case cgroupV1:
		parents = h.v1
	case cgroupV2:
		parents[""] = h.v2
	}
	stale := map[string]*stepCgroup{}
	// The live tags are read once, when the first hash is met.
	live := sync.OnceValue(liveTags)
	for c, parent := range parents {
		entries, err := os.ReadDir(parent)
		if err != nil {
			return 0, fmt.Errorf("sweep cgroups: %w", err)
		}
		for _, en := range entries {
			rest, ok := strings.CutPrefix(en.Name(), cgroupPrefix)
			if !ok || !en.IsDir() {
				continue
			}
			tag, _, _ := strings.Cut(rest, "-")
			if !staleTag(tag, live) {
				continue
			}
			cg := stale[en.Name()]
			if cg == nil {
				cg = &stepCgroup{version: h.version, dirs: map[string]string{}}
				stale[en.Name()] = cg
			}
			cg.dirs[c] = filepath.Join(parent, en.Name())
		}
	}
	var errs []error
	for _, cg := range stale {
		if err := cg.kill(ctx, true); err != nil {
			errs = append(errs, err)
			continue
		}
		if err := cg.remove(); err != nil {
			errs = append(errs, err)
		}
	}
	return len(stale), errors.Join(errs...)
}
