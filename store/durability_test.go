package store_test

import (
	"github.com/gilf-review/gilf/internal/pgtest"

	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	msqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/gilf-review/gilf/store"
	"github.com/gilf-review/gilf/store/sqlite"
	"github.com/gilf-review/gilf/validation"
)

// childEnv makes the test binary act as a worker that claims a job and
// then hangs until it is killed (TestMain re-exec).
const childEnv = "GILF_STORE_TEST_CLAIM_CHILD"

func TestMain(m *testing.M) {
	if path := os.Getenv(childEnv); path != "" {
		os.Exit(claimChild(path))
	}
	if path := os.Getenv(intakeChildEnv); path != "" {
		os.Exit(intakeChild(path))
	}
	os.Exit(pgtest.Main(m, &pg))
}

func claimChild(path string) int {
	ctx := context.Background()
	db, err := sqlite.Open(ctx, path, slog.New(slog.NewTextHandler(os.Stderr, nil)), store.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child open:", err)
		return 2
	}
	j, ok, err := db.Claim(ctx, "child", 2*time.Second)
	if err != nil || !ok {
		fmt.Fprintln(os.Stderr, "child claim:", ok, err)
		return 3
	}
	fmt.Printf("claimed %d %d\n", j.ID, j.Lease.Gen)
	time.Sleep(time.Hour) // killed long before
	return 4
}

// TestKilledWorkerLosesLease: a worker process SIGKILLed mid-job loses its
// lease by expiry; the job runs again, once, under a higher fencing token,
// and the dead worker's token can no longer finish it.
func TestKilledWorkerLosesLease(t *testing.T) {
	var offset atomic.Int64 // the parent's clock runs ahead on demand
	now := func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
	path := filepath.Join(t.TempDir(), "gilf.db")
	db := openAt(t, path, store.Options{Now: now})
	r := record(t, db, delivery("d1", []byte(`{}`), now()), spec(sha(1), now()))

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd, out := startChild(t, ctx, childEnv, path)
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("child said nothing: %v", err)
	}
	var id, gen int64
	if _, err := fmt.Sscanf(line, "claimed %d %d", &id, &gen); err != nil || id != r.JobID {
		t.Fatalf("child: %q (%v), want a claim of job %d", line, err, r.JobID)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Fatalf("child wait: %v, want killed", err)
	}
	if st := state(t, db, id); st.State != store.StateRunning || st.LeaseOwner != "child" {
		t.Fatalf("after the kill: %+v, want still leased by the dead child", st)
	}
	// Not before the lease expires.
	if _, ok := claim(t, db, "parent", time.Minute); ok {
		t.Fatal("claimed a live lease")
	}
	offset.Store(int64(3 * time.Second))
	j, ok := claim(t, db, "parent", time.Minute)
	if !ok || j.ID != id || j.Lease.Gen != gen+1 || j.Attempts != 2 {
		t.Fatalf("rescue: %+v %v; want job %d gen %d", j, ok, id, gen+1)
	}
	// Once: nobody else gets it.
	if _, ok := claim(t, db, "other", time.Minute); ok {
		t.Fatal("the rescued job was claimed twice")
	}
	dead := store.Lease{JobID: id, Owner: "child", Gen: gen, TTL: 2 * time.Second}
	if _, err := db.Finish(context.Background(), dead, store.RunRecord{}); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("finish with the dead worker's token: %v, want ErrLeaseLost", err)
	}
	if _, err := db.Finish(context.Background(), j.Lease, store.RunRecord{Record: validation.Record{Outcome: validation.OutcomePassed}}); err != nil {
		t.Fatalf("finish with the new token: %v", err)
	}
	var runs int
	if err := rawDB(t, path).QueryRow(`SELECT COUNT(*) FROM runs WHERE job_id = ?`, id).Scan(&runs); err != nil || runs != 1 {
		t.Fatalf("runs = %d, %v; want exactly 1", runs, err)
	}
}

// holdExclusive takes an EXCLUSIVE lock on path from another connection
// until the returned func is called (F11).
func holdExclusive(t *testing.T, path string) (release func()) {
	t.Helper()
	raw := rawDB(t, path)
	conn, err := raw.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(context.Background(), `BEGIN EXCLUSIVE`); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	release = func() {
		once.Do(func() {
			if _, err := conn.ExecContext(context.Background(), `ROLLBACK`); err != nil {
				t.Errorf("release lock: %v", err)
			}
			if err := conn.Close(); err != nil {
				t.Errorf("close lock conn: %v", err)
			}
		})
	}
	t.Cleanup(release)
	return release
}

// TestLockedDatabaseFailsWithinBusyTimeout (F11): with another connection
// holding BEGIN EXCLUSIVE, RecordDelivery fails once the default
// busy_timeout (5 s) runs out — not before, and well inside GitHub's 10 s —
// and nothing is stored; after the lock goes, the same delivery records.
func TestLockedDatabaseFailsWithinBusyTimeout(t *testing.T) {
	c := newClock()
	db, path := openTest(t, c)
	release := holdExclusive(t, path)
	d := delivery("locked", []byte(`{}`), c.Now())
	start := time.Now()
	_, err := db.RecordDelivery(context.Background(), d, spec(sha(1), c.Now()))
	took := time.Since(start)
	if err == nil {
		t.Fatal("recorded a delivery while the database was locked")
	}
	if se, ok := errors.AsType[*msqlite.Error](err); !ok || se.Code()&0xff != sqlite3.SQLITE_BUSY {
		t.Fatalf("err = %v, want SQLITE_BUSY", err)
	}
	if took < store.DefaultBusyTimeout-100*time.Millisecond || took > store.DefaultBusyTimeout+3*time.Second {
		t.Fatalf("failed after %v, want about the busy timeout %v", took, store.DefaultBusyTimeout)
	}
	release()
	if _, err := db.Delivery(context.Background(), d.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a failed delivery left a row: %v", err)
	}
	if res := record(t, db, d, spec(sha(1), c.Now())); res.Duplicate || !res.JobCreated {
		t.Fatalf("after the lock: %+v", res)
	}
}

// TestBusyTimeoutBoundary: a lock released before the busy timeout is
// waited out; one held past it fails.
func TestBusyTimeoutBoundary(t *testing.T) {
	const timeout = 400 * time.Millisecond
	for _, tt := range []struct {
		name string
		hold time.Duration
		ok   bool
	}{
		{"released well inside the timeout", timeout / 4, true},
		{"held past the timeout", 3 * timeout, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := newClock()
			path := filepath.Join(t.TempDir(), "gilf.db")
			db := openAt(t, path, store.Options{Now: c.Now, BusyTimeout: timeout})
			release := holdExclusive(t, path)
			timer := time.AfterFunc(tt.hold, release)
			defer timer.Stop()
			_, err := db.RecordDelivery(context.Background(), delivery("b", []byte(`{}`), c.Now()), nil)
			if (err == nil) != tt.ok {
				t.Fatalf("err = %v, want ok=%v", err, tt.ok)
			}
		})
	}
}

// TestConcurrentWritersNeverBusy (F12): 50 goroutines over two store
// handles on one file (two replicas) record deliveries and claim jobs at
// once; with IMMEDIATE transactions none gets SQLITE_BUSY.
func TestConcurrentWritersNeverBusy(t *testing.T) {
	c := newClock()
	path := filepath.Join(t.TempDir(), "gilf.db")
	// A long busy timeout: this test is about the upgrade deadlock, which
	// fails at once whatever the timeout (see TestDeferredUpgradeIsBusy),
	// not about two replicas starving each other on a loaded CI machine.
	opts := store.Options{Now: c.Now, BusyTimeout: 60 * time.Second}
	dbs := []*store.DB{openAt(t, path, opts), openAt(t, path, opts)}
	const workers, each = 50, 6
	var wg sync.WaitGroup
	var claimed atomic.Int64
	errs := make(chan error, workers*each*2)
	for w := range workers {
		wg.Go(func() {
			db := dbs[w%2]
			for i := range each {
				n := w*each + i
				if _, err := db.RecordDelivery(context.Background(), delivery(fmt.Sprintf("g-%d", n), []byte(`{}`), c.Now()),
					&validation.JobSpec{Repo: "o/r", PR: n + 1, HeadSHA: sha(n), Trigger: "opened"}); err != nil {
					errs <- err
				}
				_, ok, err := db.Claim(context.Background(), fmt.Sprintf("w%d", w), time.Minute)
				if err != nil {
					errs <- err
				}
				if ok {
					claimed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("concurrent write failed: %v", err)
	}
	if n, err := dbs[0].CountDeliveries(context.Background()); err != nil || n != workers*each {
		t.Fatalf("deliveries = %d, %v; want %d", n, err, workers*each)
	}
	if claimed.Load() == 0 {
		t.Fatal("no claim succeeded")
	}
}

// TestDeferredUpgradeIsBusy is F12's control: the failure IMMEDIATE
// prevents is real. A deferred transaction that read, then tries to write
// after another connection committed, gets SQLITE_BUSY at once, whatever
// busy_timeout says; begun IMMEDIATE, the same sequence waits and succeeds.
func TestDeferredUpgradeIsBusy(t *testing.T) {
	for _, tt := range []struct {
		txlock string
		busy   bool
	}{
		{"deferred", true},
		{"immediate", false},
	} {
		t.Run(tt.txlock, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "gilf.db")
			openAt(t, path, store.Options{}) // schema
			open := func() *sql.DB {
				db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(2000)&_pragma=journal_mode(WAL)&_txlock="+tt.txlock)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { db.Close() })
				return db
			}
			a, b := open(), open()
			ctx := context.Background()
			txA, err := a.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer txA.Rollback()
			var n int
			if err := txA.QueryRow(`SELECT COUNT(*) FROM deliveries`).Scan(&n); err != nil {
				t.Fatal(err)
			}
			insert := `INSERT INTO deliveries (id, event, received_at, status, body) VALUES (?, 'ping', 1, 'recorded', x'')`
			bDone := make(chan error, 1)
			go func() {
				_, err := b.Exec(insert, "from-b") // commits unless A holds the write lock
				bDone <- err
			}()
			if tt.busy {
				if err := <-bDone; err != nil {
					t.Fatalf("b: %v", err)
				}
			}
			_, err = txA.Exec(insert, "from-a")
			if tt.busy {
				if se, ok := errors.AsType[*msqlite.Error](err); !ok || se.Code()&0xff != sqlite3.SQLITE_BUSY {
					t.Fatalf("deferred upgrade: err = %v, want SQLITE_BUSY", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("immediate: %v", err)
			}
			if err := txA.Commit(); err != nil {
				t.Fatal(err)
			}
			if err := <-bDone; err != nil {
				t.Fatalf("b after a: %v", err)
			}
		})
	}
}
