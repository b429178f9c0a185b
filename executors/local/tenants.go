package local

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/gilf-review/gilf/validation"
)

// DefaultUIDCount is how many uids the local executor's pool holds, from
// Options.SandboxUID (and as many gids from SandboxGID): each concurrent
// run gets its own, so two runs cannot see, signal or write each other,
// even at tier none.
const DefaultUIDCount = 1000

// MaxUIDCount bounds the pool.
const MaxUIDCount = 1 << 20

// DefaultUIDLockDir holds one lock file per uid of the pool: a run of
// any gilf process on the machine holds its uid's lock (flock), so uids
// are apart across processes too (gilf serve and a gilf validate beside
// it). The kernel drops a dead process's locks.
const DefaultUIDLockDir = "/run/lock/gilf-uids"

// tenant is the uid and gid of one run.
type tenant struct {
	uid, gid uint32
	lock     *os.File
}

// uidPool hands out the uids of one Executor.
type uidPool struct {
	first, firstGID uint32
	count           uint32
	dir             string

	mu     sync.Mutex
	inUse  map[uint32]bool
	cursor uint32
}

func newUIDPool(o Options) *uidPool {
	return &uidPool{first: o.SandboxUID, firstGID: o.SandboxGID, count: o.UIDCount,
		dir: o.UIDLockDir, inUse: map[uint32]bool{}}
}

// errPoolExhausted: every uid of the pool is running a run.
var errPoolExhausted = errors.New("every sandbox uid of the pool is in use")

// take returns a uid no other run holds, in this process or any other
// sharing WorkRoot: prefer when it is the pool's and free (the owner of
// the run's warm store, warmPlan.owner; 0 for none), else the next free
// one. The caller releases it when the run's processes are gone.
func (p *uidPool) take(prefer uint32) (*tenant, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	// Without the locks no run can know which uids other runs hold: the
	// control cannot observe its subject.
	if err := os.MkdirAll(p.dir, 0o700); err != nil {
		return nil, unknownUIDs(err)
	}
	if prefer >= p.first && prefer-p.first < p.count {
		if tn, err := p.lock(prefer - p.first); tn != nil || err != nil {
			return tn, err
		}
	}
	for i := range p.count {
		off := (p.cursor + i) % p.count
		tn, err := p.lock(off)
		if tn != nil || err != nil {
			p.cursor = off + 1
			return tn, err
		}
	}
	return nil, errPoolExhausted
}

// lock takes the pool's uid at off when no run holds it: nil when one
// does.
func (p *uidPool) lock(off uint32) (*tenant, error) {
	uid := p.first + off
	if p.inUse[uid] {
		return nil, nil
	}
	f, err := os.OpenFile(filepath.Join(p.dir, strconv.FormatUint(uint64(uid), 10)), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, unknownUIDs(err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, nil // another process's run
		}
		return nil, unknownUIDs(err)
	}
	p.inUse[uid] = true
	return &tenant{uid: uid, gid: p.firstGID + off, lock: f}, nil
}

// unknownUIDs is the refusal of a pool that cannot tell which uids are
// free.
func unknownUIDs(err error) error {
	return validation.Refuse(validation.CodeSandboxUserUnknown,
		"which sandbox uids other runs hold cannot be told (%s)", errnoWords(err))
}

// release gives the uid back.
func (p *uidPool) release(t *tenant) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.inUse, t.uid)
	return t.lock.Close() // closing drops the flock
}

// errnoWords is an error's errno in words, without the worker's paths.
func errnoWords(err error) string {
	var errno unix.Errno
	if errors.As(err, &errno) {
		return errno.Error()
	}
	return "an unexpected error"
}
