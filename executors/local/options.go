// Package local runs validation plans on the worker itself (SPEC §4.2):
// one bubblewrap sandbox per step over one private, writable copy of the
// checkout, so the host's own wait status decides every step.
//
// The sandbox never runs as the worker's uid: bwrap started by root maps
// its user to real root. Every step's bwrap is started as a dedicated
// unprivileged uid (Options.SandboxUID), which owns the workspace, HOME
// and TMPDIR; the worker keeps root only for cgroups. Only system paths
// (/usr, /bin, /lib, /lib64, /etc), the workspace and Options.AllowRead
// and AllowWrite exist in the sandbox's mount namespace.
//
// Limits (memory, pids, CPU) come from one cgroup per run, v1 or v2. On
// v2 bwrap is cloned into it (CLONE_INTO_CGROUP); on v1 bwrap reports its
// sandbox's pid (--info-fd) and waits (--block-fd) until it is moved in.
// A step's processes die with it: the pid namespace dies with bwrap's
// init, and the cgroup is emptied after every step.
//
// The isolation tier is probed from inside a real sandbox at the first Run
// and cached: read-only (cgroup limits in force), no-network (no cgroup
// limits), or none (no usable bwrap: process hardening only, refused
// unless Options.MinTier allows it).
package local

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/gilf-review/gilf/executors/local/egress"
	"github.com/gilf-review/gilf/validation"
)

// Name is the executor's canonical name.
const Name = "local"

// Defaults of Options. Each limit has a name, a default and a test at its
// boundary.
const (
	// DefaultSandboxUID and DefaultSandboxGID own the workspace and run
	// every sandboxed process. They need not exist in /etc/passwd; they
	// must never be the worker's own ids, nor root.
	DefaultSandboxUID = 64000
	DefaultSandboxGID = 64000

	// DefaultBwrapPath is where Debian's bubblewrap package installs bwrap.
	DefaultBwrapPath = "/usr/bin/bwrap"
	// DefaultCgroupRoot is where cgroup v1 controllers or the v2
	// unified hierarchy are mounted.
	DefaultCgroupRoot = "/sys/fs/cgroup"

	// DefaultMemoryBytes is the cgroup memory limit of one step.
	DefaultMemoryBytes int64 = 4 << 30
	// DefaultPids is the cgroup pids limit of one step (bwrap's own two
	// processes count).
	DefaultPids int64 = 512
	// DefaultCPUs is the cgroup CPU quota of one step, in CPUs.
	DefaultCPUs = 2.0

	// DefaultKillGrace is how long a step's processes have between
	// SIGTERM and SIGKILL when it times out or is cancelled.
	DefaultKillGrace = 2 * time.Second
	// DefaultStepTimeout bounds a step whose plan gives no timeout.
	DefaultStepTimeout = 15 * time.Minute
	// DefaultMaxStreamBytes is the total output one step may print. The
	// capture keeps only MaxOutputBytes of it (head and tail), but every
	// byte is read, redacted and hashed; past this ceiling the step is
	// killed.
	DefaultMaxStreamBytes int64 = 4 << 30
	// DefaultMinTier is the weakest isolation Run accepts.
	DefaultMinTier = validation.TierNoNetwork
)

// Fixed facts of the sandbox layout and its machinery.
const (
	// SandboxWorkspace is where the private copy of the checkout is
	// mounted, and every step's working directory.
	SandboxWorkspace = "/workspace"
	// SandboxHome is the private HOME inside the sandbox.
	SandboxHome = "/home/sandbox"
	// SandboxTmp is the private TMPDIR inside the sandbox.
	SandboxTmp = "/tmp"
	// SandboxHostname is the host name steps see.
	SandboxHostname = "gilf-sandbox"

	// PipeBufferBytes is the size asked for the output pipe
	// (F_SETPIPE_SZ); the kernel's default of 64 KiB caps throughput.
	PipeBufferBytes = 1 << 20
	// OutputDrainTimeout bounds how long output is still read after the
	// step's process has been waited for; a descendant that escaped every
	// kill cannot hold Run open.
	OutputDrainTimeout = 2 * time.Second
	// ProbeTimeout bounds the isolation probe and the platform probe.
	ProbeTimeout = 20 * time.Second
	// SetupTimeout bounds how long bwrap may take to set a sandbox up
	// before its processes are placed in the step's cgroup.
	SetupTimeout = 20 * time.Second
	// CgroupKillTimeout bounds how long Run waits for a step's cgroup to
	// become empty after killing it.
	CgroupKillTimeout = 5 * time.Second
	// ProbeMaxOutputBytes is what is kept of a probe's output.
	ProbeMaxOutputBytes = 4 << 10
)

// DefaultPath is the PATH steps get.
const DefaultPath = "/usr/local/bin:/usr/bin:/bin"

// SystemReadPaths returns the host paths mounted read-only in every
// sandbox: what node, npm and a POSIX shell need, and of /etc only what
// they read (the dynamic loader's cache and configuration, CA
// certificates, name-service and Debian's alternatives links, time zone,
// protocol and service names, the OS release). Nothing else of /etc is
// there: a world-readable file an operator or cloud-init left in it is
// absent. Paths missing on the host are skipped. This is the one list;
// GeneratedEtc is the rest of /etc.
func SystemReadPaths() []string {
	return []string{
		"/usr", "/bin", "/lib", "/lib64",
		"/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d",
		"/etc/ssl/certs", "/etc/ssl/openssl.cnf", "/etc/ca-certificates", "/etc/pki",
		"/etc/nsswitch.conf", "/etc/alternatives",
		"/etc/localtime", "/etc/timezone", "/etc/protocols", "/etc/services",
		"/etc/os-release",
	}
}

// systemRoots are the host trees SystemReadPaths takes from; AllowWrite
// may not overlap them.
func systemRoots() []string { return []string{"/usr", "/bin", "/lib", "/lib64", "/etc"} }

// GeneratedEtc returns the files of the sandbox's /etc that gilf writes
// instead of taking the host's, by name: a passwd and a group that know
// only the sandbox user, a hosts file with localhost alone, an empty
// resolv.conf (there is no resolver to ask) and the host name.
func GeneratedEtc(uid, gid uint32) map[string]string {
	return map[string]string{
		"passwd":      fmt.Sprintf("sandbox:x:%d:%d:gilf sandbox:%s:/bin/sh\n", uid, gid, SandboxHome),
		"group":       fmt.Sprintf("sandbox:x:%d:\n", gid),
		"hosts":       "127.0.0.1\tlocalhost " + SandboxHostname + "\n::1\tlocalhost ip6-localhost ip6-loopback\n",
		"resolv.conf": "",
		"hostname":    SandboxHostname + "\n",
	}
}

// DefaultEnv returns the environment steps get unless Options.Env says
// otherwise. HOME, TMPDIR and CI are always set by the executor.
func DefaultEnv() map[string]string {
	return map[string]string{
		"PATH":   DefaultPath,
		"LANG":   "C.UTF-8",
		"LC_ALL": "C.UTF-8",
		"TERM":   "dumb",
	}
}

// Limits are the cgroup limits of one step. Zero fields take the defaults.
type Limits struct {
	MemoryBytes int64
	Pids        int64
	CPUs        float64
}

// Options configure an Executor. The zero value is valid and takes every
// default. Paths must be absolute.
type Options struct {
	// AllowWrite are host paths bound writable inside, at the same path.
	// The workspace, HOME and TMPDIR are always writable; nil or empty
	// means nothing else.
	AllowWrite []string
	// AllowRead are host paths bound read-only inside, at the same path,
	// besides SystemReadPaths and the workspace. Every other path is
	// absent from the sandbox's mount namespace.
	AllowRead []string
	// DenyRead are paths masked even under an allowed path: a directory
	// with an empty tmpfs, anything else with /dev/null.
	DenyRead []string
	// Egress is the install step's way out (the forward proxy and its
	// allow-list). No step ever shares the host's network: script steps
	// have none at all, and an install step whose plan asks for the
	// registry reaches it only through the proxy.
	Egress EgressOptions
	// Env is the environment of every step; nil means DefaultEnv. HOME,
	// TMPDIR and CI=true are always set. The worker's own environment is
	// never read.
	Env map[string]string
	// MaxOutputBytes is what is kept of one step's output (head and
	// tail); zero means validation.DefaultMaxOutputBytes.
	MaxOutputBytes int
	// MaxStreamBytes is the total output one step may print before it is
	// killed; zero means DefaultMaxStreamBytes.
	MaxStreamBytes int64
	// MinTier is the weakest isolation Run accepts; empty means
	// DefaultMinTier.
	MinTier validation.Tier
	Limits  Limits
	// SandboxUID and SandboxGID are the first uid and gid of the pool
	// sandboxed processes run as; zero means the defaults (root is never
	// allowed).
	SandboxUID uint32
	SandboxGID uint32
	// UIDCount is how many uids (and gids) the pool holds: every
	// concurrent run gets one of its own. Zero means DefaultUIDCount.
	UIDCount uint32
	// UIDLockDir is where the pool's uid locks live; empty means
	// DefaultUIDLockDir.
	UIDLockDir string
	// BwrapPath is the bubblewrap binary; empty means DefaultBwrapPath.
	BwrapPath string
	// WorkRoot is where per-run workspaces are created; empty means
	// DefaultWorkRoot. It must be traversable by the sandbox uid; New
	// creates it 0711 (not listable by others) and refuses one another
	// user owns.
	WorkRoot string
	// CgroupRoot is where cgroups are mounted; empty means
	// DefaultCgroupRoot. A root holding cgroup.controllers is cgroup v2.
	CgroupRoot string
	// KillGrace is the time between SIGTERM and SIGKILL; zero means
	// DefaultKillGrace.
	KillGrace time.Duration
	// StepTimeout bounds a step whose plan gives none; zero means
	// DefaultStepTimeout.
	StepTimeout time.Duration
	// Disk is the disk ceiling of a run (workspace, HOME and TMPDIR on a
	// file system of their own); zero fields mean DefaultDiskBytes and
	// an inode count derived from the size (DerivedInodes), Bytes < 0
	// turns it off.
	Disk DiskLimit
	// Warm keeps warm disks: images of a run's disk holding pnpm's
	// store for a lockfile (warmdisk.go). Off unless Warm.Dir is set.
	Warm WarmOptions
	// MkfsPath is mkfs.ext4; empty means DefaultMkfsPath.
	MkfsPath string
	// Tools prepares the package manager a plan pins (pnpm, yarn, bun at
	// the checkout's version); nil means only what the worker has
	// installed itself, and a plan needing another is refused
	// (validation.CodePackageManagerUnavailable).
	Tools ToolProvider
	// CAFile is a PEM bundle of certificate authorities the sandbox
	// trusts (a TLS-intercepting proxy's), bound read-only at
	// SandboxCAFile and named by NODE_EXTRA_CA_CERTS, SSL_CERT_FILE and
	// the package managers' cafile settings. Empty binds none. It is
	// read once, by New, and at most MaxCAFileBytes.
	CAFile string
	// NoGitWorkTree leaves the checkout as it is: by default, a checkout
	// that is not a git work tree is made one (a single commit of its
	// content, the public clone URL as origin but no base branch, no
	// credentials) before the first step, when
	// git is installed on the worker.
	NoGitWorkTree bool
}

// Facts of the sandbox's certificate authorities.
const (
	// SandboxCAFile is where Options.CAFile is bound.
	SandboxCAFile = "/etc/gilf-ca-certificates.crt"
	// caEtcName is its name in the run's generated /etc directory.
	caEtcName = "gilf-ca-certificates.crt"
	// MaxCAFileBytes bounds Options.CAFile.
	MaxCAFileBytes = 4 << 20
)

// caEnv names SandboxCAFile (at path) in every variable node, OpenSSL,
// git and npm (pnpm too) read a CA bundle from; Yarn's own settings
// depend on its version (toolMount.env). npm's cafile replaces its
// default list, so the file must be a whole bundle.
func caEnv(path string) map[string]string {
	return map[string]string{
		"NODE_EXTRA_CA_CERTS": path,
		"SSL_CERT_FILE":       path,
		"npm_config_cafile":   path,
		"GIT_SSL_CAINFO":      path,
	}
}

// berryCAEnv is Yarn 2+'s own CA setting, whose name changed with Yarn 4
// (caFilePath became httpsCaFilePath); Yarn refuses to run with the other
// one set. Nil for an unknown version: NODE_EXTRA_CA_CERTS still reaches
// its requests.
func berryCAEnv(version, path string) map[string]string {
	major, _, _ := strings.Cut(version, ".")
	switch major {
	case "2", "3":
		return map[string]string{"YARN_CA_FILE_PATH": path}
	case "":
		return nil
	default:
		return map[string]string{"YARN_HTTPS_CA_FILE_PATH": path}
	}
}

// withDefaults returns o with every zero field set to its default. It
// never reads the environment.
func (o Options) withDefaults() Options {
	if o.Env == nil {
		o.Env = DefaultEnv()
	} else {
		o.Env = maps.Clone(o.Env)
	}
	if o.MaxOutputBytes == 0 {
		o.MaxOutputBytes = validation.DefaultMaxOutputBytes
	}
	if o.MaxStreamBytes == 0 {
		o.MaxStreamBytes = DefaultMaxStreamBytes
	}
	if o.MinTier == "" {
		o.MinTier = DefaultMinTier
	}
	if o.Limits.MemoryBytes == 0 {
		o.Limits.MemoryBytes = DefaultMemoryBytes
	}
	if o.Limits.Pids == 0 {
		o.Limits.Pids = DefaultPids
	}
	if o.Limits.CPUs == 0 {
		o.Limits.CPUs = DefaultCPUs
	}
	if o.SandboxUID == 0 {
		o.SandboxUID = DefaultSandboxUID
	}
	if o.SandboxGID == 0 {
		o.SandboxGID = DefaultSandboxGID
	}
	if o.UIDCount == 0 {
		o.UIDCount = DefaultUIDCount
	}
	if o.UIDLockDir == "" {
		o.UIDLockDir = DefaultUIDLockDir
	}
	if o.BwrapPath == "" {
		o.BwrapPath = DefaultBwrapPath
	}
	if o.WorkRoot == "" {
		o.WorkRoot = DefaultWorkRoot()
	}
	if o.CgroupRoot == "" {
		o.CgroupRoot = DefaultCgroupRoot
	}
	if o.KillGrace == 0 {
		o.KillGrace = DefaultKillGrace
	}
	if o.StepTimeout == 0 {
		o.StepTimeout = DefaultStepTimeout
	}
	if o.Disk.Bytes == 0 {
		o.Disk.Bytes = DefaultDiskBytes
	}
	if o.Disk.Inodes == 0 {
		o.Disk.Inodes = DerivedInodes(o.Disk.Bytes)
	}
	if o.MkfsPath == "" {
		o.MkfsPath = DefaultMkfsPath
	}
	if o.Egress.AllowHosts == nil {
		// DefaultRegistry is a constant URL: it always parses.
		if r, err := egress.RuleFromURL(DefaultRegistry); err == nil {
			o.Egress.AllowHosts = []egress.Rule{r}
		}
	} else {
		o.Egress.AllowHosts = slices.Clone(o.Egress.AllowHosts)
	}
	o.Egress.Registries = maps.Clone(o.Egress.Registries)
	o.Egress.Tunnels = slices.Clone(o.Egress.Tunnels)
	o.Egress.Credentials = maps.Clone(o.Egress.Credentials)
	o.AllowRead = slices.Clone(o.AllowRead)
	o.AllowWrite = slices.Clone(o.AllowWrite)
	o.DenyRead = slices.Clone(o.DenyRead)
	return o
}

// validate reports every problem of a defaulted Options at once.
func (o Options) validate() error {
	var errs []error
	check := func(field string, paths []string) {
		for _, p := range paths {
			if !filepath.IsAbs(p) || filepath.Clean(p) != p {
				errs = append(errs, fmt.Errorf("%s: %q is not a clean absolute path", field, p))
			}
			if p == "/" {
				errs = append(errs, fmt.Errorf("%s: the whole root cannot be listed", field))
			}
		}
	}
	check("AllowWrite", o.AllowWrite)
	check("AllowRead", o.AllowRead)
	check("DenyRead", o.DenyRead)
	check("BwrapPath", []string{o.BwrapPath})
	check("WorkRoot", []string{o.WorkRoot})
	check("CgroupRoot", []string{o.CgroupRoot})
	for _, p := range o.AllowWrite {
		for _, s := range systemRoots() {
			if within(p, s) || within(s, p) {
				errs = append(errs, fmt.Errorf("AllowWrite: %q overlaps the system path %s", p, s))
			}
		}
	}
	if _, err := tierRank(o.MinTier); err != nil {
		errs = append(errs, fmt.Errorf("MinTier: %w", err))
	}
	if o.MaxOutputBytes < 0 {
		errs = append(errs, errors.New("MaxOutputBytes must not be negative"))
	}
	if o.MaxStreamBytes < 0 {
		errs = append(errs, errors.New("MaxStreamBytes must not be negative"))
	}
	if o.Limits.MemoryBytes < 0 || o.Limits.Pids < 0 || o.Limits.CPUs < 0 {
		errs = append(errs, errors.New("Limits must not be negative"))
	}
	if o.Warm.MaxBytes < 0 || (o.Warm.Dir != "" && !filepath.IsAbs(o.Warm.Dir)) {
		errs = append(errs, fmt.Errorf("warm disks: Warm.Dir %q must be absolute and Warm.MaxBytes not negative", o.Warm.Dir))
	}
	if o.KillGrace < 0 || o.StepTimeout < 0 {
		errs = append(errs, errors.New("KillGrace and StepTimeout must not be negative"))
	}
	if o.UIDCount > MaxUIDCount || uint64(o.SandboxUID)+uint64(o.UIDCount) > 1<<32-1 || uint64(o.SandboxGID)+uint64(o.UIDCount) > 1<<32-1 {
		errs = append(errs, fmt.Errorf("UIDCount %d: the pool from uid %d/gid %d must hold at most %d ids below 2^32-1", o.UIDCount, o.SandboxUID, o.SandboxGID, MaxUIDCount))
	}
	if !o.Disk.off() && (o.Disk.Bytes < MinDiskBytes || o.Disk.Bytes > MaxDiskBytes) {
		errs = append(errs, fmt.Errorf("Disk.Bytes %d: want %d to %d (or negative for no ceiling)", o.Disk.Bytes, MinDiskBytes, MaxDiskBytes))
	}
	if !o.Disk.off() && (o.Disk.Inodes < MinDiskInodes || o.Disk.Inodes > MaxDiskInodes) {
		errs = append(errs, fmt.Errorf("Disk.Inodes %d: want %d to %d", o.Disk.Inodes, MinDiskInodes, MaxDiskInodes))
	}
	check("MkfsPath", []string{o.MkfsPath})
	if o.CAFile != "" {
		check("CAFile", []string{o.CAFile})
	}
	check("UIDLockDir", []string{o.UIDLockDir})
	if err := validRegistries(o.Egress.Registries); err != nil {
		errs = append(errs, err)
	}
	if o.Egress.BridgeBinary != "" {
		check("Egress.BridgeBinary", []string{o.Egress.BridgeBinary})
	}
	for k := range o.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			errs = append(errs, fmt.Errorf("env: invalid name %q", k))
		}
	}
	return errors.Join(errs...)
}

// stepEnv is the environment of a step: the repository's variables, the
// configured ones over them, and HOME, TMPDIR and CI forced.
func (o Options) stepEnv(repo map[string]string) map[string]string {
	env := make(map[string]string, len(repo)+len(o.Env)+4)
	for k, v := range repo {
		if validation.CheckStepEnv(k, v, 0) == "" {
			env[k] = v
		}
	}
	maps.Copy(env, o.Env)
	env["HOME"] = SandboxHome
	env["TMPDIR"] = SandboxTmp
	env["CI"] = "true"
	if o.CAFile != "" || o.Egress.CA != nil {
		maps.Copy(env, caEnv(SandboxCAFile))
	}
	return env
}

// ParseTier parses a tier name as GILF_LOCAL_MIN_TIER spells it. The empty
// string means DefaultMinTier.
func ParseTier(s string) (validation.Tier, error) {
	if s == "" {
		return DefaultMinTier, nil
	}
	t := validation.Tier(s)
	if _, err := tierRank(t); err != nil {
		return "", err
	}
	return t, nil
}

// tierRank orders the tiers the local executor can establish, strongest
// highest.
func tierRank(t validation.Tier) (int, error) {
	switch t {
	case validation.TierNone:
		return 0, nil
	case validation.TierNoNetwork:
		return 1, nil
	case validation.TierReadOnly:
		return 2, nil
	}
	return 0, fmt.Errorf("unknown isolation tier %q (want %s, %s or %s)", t,
		validation.TierReadOnly, validation.TierNoNetwork, validation.TierNone)
}

// meets reports whether tier got is at least tier want. Both are valid.
func meets(got, want validation.Tier) bool {
	g, err1 := tierRank(got)
	w, err2 := tierRank(want)
	return err1 == nil && err2 == nil && g >= w
}

// within reports whether path p is dir or below it. A path that only
// shares a prefix (/srv/repo-evil, /srv/repo) is not within.
func within(p, dir string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !filepath.IsAbs(rel) &&
		(rel == "." || len(rel) < 3 || rel[:3] != "../")
}

// discardLogger is used when New is given no logger.
func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// DefaultWorkRoot is a directory of gilf's own in the system's temporary
// directory: not the world-listable temporary directory itself.
func DefaultWorkRoot() string { return filepath.Join(os.TempDir(), "gilf-runs") }

// ReadCAFile reads a CA bundle for Options.CAFile: a regular file of at
// most MaxCAFileBytes holding at least one PEM certificate.
func ReadCAFile(path string) ([]byte, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("CA file: %w", err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("CA file %s is not a regular file", path)
	}
	if st.Size() > MaxCAFileBytes {
		return nil, fmt.Errorf("CA file %s is %d bytes, over the %d-byte limit", path, st.Size(), MaxCAFileBytes)
	}
	b, err := readCapped(path, MaxCAFileBytes)
	if err != nil {
		return nil, fmt.Errorf("CA file: %w", err)
	}
	for rest := b; ; {
		var blk *pem.Block
		blk, rest = pem.Decode(rest)
		if blk == nil {
			return nil, fmt.Errorf("CA file %s holds no PEM certificate", path)
		}
		if blk.Type == "CERTIFICATE" {
			if _, err := x509.ParseCertificate(blk.Bytes); err == nil {
				return b, nil
			}
		}
	}
}
