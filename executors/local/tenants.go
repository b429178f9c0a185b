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
// sharing WorkRoot. The caller releases it when the run's processes are
// gone.
func (p *uidPool) take() (*tenant, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	// Without the locks no run can know which uids other runs hold: the
	// control cannot observe its subject.
	unknown := func(err error) (*tenant, error) {
		return nil, validation.Refuse(validation.CodeSandboxUserUnknown,
			"which sandbox uids other runs hold cannot be told (%s)", errnoWords(err))
	}
	if err := os.MkdirAll(p.dir, 0o700); err != nil {
		return unknown(err)
	}
	for i := range p.count {
		off := (p.cursor + i) % p.count
		uid := p.first + off
		if p.inUse[uid] {
			continue
		}
		f, err := os.OpenFile(filepath.Join(p.dir, strconv.FormatUint(uint64(uid), 10)), os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			return unknown(err)
		}
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
			f.Close()
			if errors.Is(err, unix.EWOULDBLOCK) {
				continue // another process's run
			}
			return unknown(err)
		}
		p.inUse[uid] = true
		p.cursor = off + 1
		return &tenant{uid: uid, gid: p.firstGID + off, lock: f}, nil
	}
	return nil, errPoolExhausted
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
