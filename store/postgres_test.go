package store_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gilf-review/gilf/migrations"
	"github.com/gilf-review/gilf/store"
	"github.com/gilf-review/gilf/store/postgres"
	"github.com/gilf-review/gilf/validation"
)

// The tests here are about what only a shared server database has:
// several replicas (store handles) on one database at once. The contract
// both engines share is conformance_test.go's.

// replicas opens n handles on one fresh PostgreSQL database.
func replicas(t *testing.T, n int, c *clock) []*store.DB {
	t.Helper()
	dsn := pg.NewDatabase(t)
	dbs := make([]*store.DB, n)
	for i := range dbs {
		dbs[i] = openAt(t, dsn, store.Options{Now: c.Now, Jitter: func() float64 { return 0.5 }})
	}
	return dbs
}

// TestPostgresReplicasClaimEachJobOnce: replicas claiming at the same
// time never get the same job, and together they get every job.
func TestPostgresReplicasClaimEachJobOnce(t *testing.T) {
	c := newClock()
	dbs := replicas(t, 3, c)
	const jobs = 60
	for i := range jobs {
		d := delivery(fmt.Sprintf("d%d", i), []byte(`{}`), c.Now())
		j := spec(sha(i), c.Now())
		j.PR = 100 + i // one head per pull request: nothing supersedes
		record(t, dbs[i%3], d, j)
	}
	var mu sync.Mutex
	claimed := map[int64]string{}
	var wg sync.WaitGroup
	errs := make(chan error, 12)
	for r, db := range dbs {
		for g := range 4 {
			owner := fmt.Sprintf("replica%d-%d", r, g)
			wg.Go(func() {
				for range jobs { // bounded: at most every job
					j, ok, err := db.Claim(context.Background(), owner, time.Minute)
					if err != nil {
						errs <- err
						return
					}
					if !ok {
						return
					}
					mu.Lock()
					if prev, dup := claimed[j.ID]; dup {
						errs <- fmt.Errorf("job %d claimed by %s and %s", j.ID, prev, owner)
					}
					claimed[j.ID] = owner
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if len(claimed) != jobs {
		t.Fatalf("claimed %d jobs, want %d", len(claimed), jobs)
	}
}

// TestPostgresSupersedeAcrossReplicas: two heads of one pull request
// received by two replicas at the same moment leave exactly one job to
// run — the newer head's — whichever commits first.
func TestPostgresSupersedeAcrossReplicas(t *testing.T) {
	c := newClock()
	dbs := replicas(t, 2, c)
	ctx := context.Background()
	for round := range 15 {
		older, newer := spec(sha(2*round), c.Now()), spec(sha(2*round+1), c.Now().Add(time.Second))
		older.PR, newer.PR = 500+round, 500+round
		var wg sync.WaitGroup
		var resOld, resNew validation.RecordResult
		var errOld, errNew error
		wg.Go(func() {
			resOld, errOld = dbs[0].RecordDelivery(ctx, delivery(fmt.Sprintf("old-%d", round), []byte(`{}`), c.Now()), older)
		})
		wg.Go(func() {
			resNew, errNew = dbs[1].RecordDelivery(ctx, delivery(fmt.Sprintf("new-%d", round), []byte(`{}`), c.Now()), newer)
		})
		wg.Wait()
		if err := errors.Join(errOld, errNew); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if st := state(t, dbs[0], resNew.JobID); st.State != store.StateQueued {
			t.Fatalf("round %d: newer head's job is %s (%s), want queued", round, st.State, st.Reason)
		}
		if st := state(t, dbs[1], resOld.JobID); st.State != store.StateSuperseded {
			t.Fatalf("round %d: older head's job is %s, want superseded", round, st.State)
		}
	}
}

// TestPostgresListenWakesOtherReplicas: a job queued through one replica
// wakes an idle replica listening on another handle; a duplicate
// delivery, which queues nothing, does not.
func TestPostgresListenWakesOtherReplicas(t *testing.T) {
	c := newClock()
	dbs := replicas(t, 2, c)
	ctx, cancel := context.WithCancel(context.Background())
	wake := make(chan struct{}, 1)
	done := make(chan error, 1)
	go func() { done <- dbs[1].Listen(ctx, wake) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("listen: %v", err)
		}
	})
	// The listener may not be subscribed yet: deliver until it hears one
	// (bounded), then check that each new job is heard.
	heard := false
	for i := 0; i < 100 && !heard; i++ {
		record(t, dbs[0], delivery(fmt.Sprintf("warm-%d", i), []byte(`{}`), c.Now()), spec(sha(1000+i), c.Now()))
		select {
		case <-wake:
			heard = true
		case <-time.After(200 * time.Millisecond):
		}
	}
	if !heard {
		t.Fatal("the listening replica never woke")
	}
	drain := func() {
		for {
			select {
			case <-wake:
			case <-time.After(500 * time.Millisecond):
				return
			}
		}
	}
	drain()
	d := delivery("new-job", []byte(`{}`), c.Now())
	record(t, dbs[0], d, spec(sha(1), c.Now().Add(time.Hour)))
	select {
	case <-wake:
	case <-time.After(30 * time.Second):
		t.Fatal("a queued job did not wake the other replica")
	}
	drain()
	if res := record(t, dbs[0], d, spec(sha(1), c.Now().Add(time.Hour))); !res.Duplicate {
		t.Fatalf("redelivery not a duplicate: %+v", res)
	}
	select {
	case <-wake:
		t.Fatal("a duplicate delivery woke the other replica")
	case <-time.After(time.Second):
	}
}

// TestPostgresReplicasMigrateTogether: replicas starting at once on an
// empty database apply the migrations once, under the advisory lock.
func TestPostgresReplicasMigrateTogether(t *testing.T) {
	dsn := pg.NewDatabase(t)
	const n = 4
	dbs := make([]*store.DB, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			dbs[i], errs[i] = postgres.Open(context.Background(), dsn, testLogger(t), store.Options{})
		})
	}
	wg.Wait()
	files, err := fs.Glob(migrations.Postgres, "*.sql")
	if err != nil || len(files) == 0 {
		t.Fatalf("embedded PostgreSQL migrations: %v, %v", files, err)
	}
	// The newest file's number: PostgreSQL's migrations are numbered as
	// SQLite's that they match, so the numbers may skip.
	newest, err := strconv.Atoi(files[len(files)-1][:4])
	if err != nil {
		t.Fatal(err)
	}
	for i, db := range dbs {
		if errs[i] != nil {
			t.Fatalf("replica %d: %v", i, errs[i])
		}
		t.Cleanup(func() {
			if err := db.Close(); err != nil {
				t.Error(err)
			}
		})
		v, err := db.SchemaVersion(context.Background())
		if err != nil || v != newest {
			t.Fatalf("replica %d: schema version %d, %v; want %d", i, v, err, newest)
		}
	}
}

func TestOpenPostgresRefusals(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct{ name, url, want string }{
		{"not postgres", "mysql://u@h/db", "not a postgres:// URL"},
		{"bad port, password kept out", "postgres://gilf:hunter2secret@localhost:notaport/db", "invalid PostgreSQL URL"},
		{"no server", "postgres://gilf@/db?host=/nonexistent-gilf-socket-dir&sslmode=disable&connect_timeout=5", "open store"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db, err := postgres.Open(ctx, tc.url, testLogger(t), store.Options{})
			if err == nil {
				db.Close()
				t.Fatal("opened")
			}
			if !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "hunter2secret") {
				t.Fatalf("err = %v, want it to say %q and hold no password", err, tc.want)
			}
		})
	}
}

// TestPostgresOperations: readiness, the write probe, retention of
// in-row bodies and the refusal of gilf backup, on PostgreSQL.
func TestPostgresOperations(t *testing.T) {
	c := newClock()
	db := replicas(t, 1, c)[0]
	ctx := context.Background()
	if db.Engine() != store.EnginePostgres {
		t.Fatalf("engine = %s", db.Engine())
	}
	if err := db.Ready(ctx); err != nil {
		t.Fatalf("ready: %v", err)
	}
	if err := db.ProbeWrite(ctx); err != nil {
		t.Fatalf("probe write: %v", err)
	}
	if _, err := db.Backup(ctx, t.TempDir()+"/copy.db"); !errors.Is(err, store.ErrBackupPostgres) {
		t.Fatalf("backup: %v, want ErrBackupPostgres", err)
	}
	body := payload(t)
	old := delivery("old", body, c.Now())
	record(t, db, old, spec(sha(1), c.Now()))
	c.Advance(48 * time.Hour)
	kept := delivery("kept", body, c.Now())
	record(t, db, kept, spec(sha(2), c.Now()))
	res, err := db.Prune(ctx, c.Now().Add(-24*time.Hour))
	if err != nil {
		t.Fatalf("prune: %v", err)
	}
	if res.Bodies != 1 || res.Runs != 0 {
		t.Fatalf("prune = %+v, want one body, no runs", res)
	}
	got, err := db.Delivery(ctx, "old")
	if err != nil || got.Body != nil || got.BodyPrunedAt.IsZero() {
		t.Fatalf("pruned delivery = %d bytes, pruned at %v, %v", len(got.Body), got.BodyPrunedAt, err)
	}
	got, err = db.Delivery(ctx, "kept")
	if err != nil || !bytes.Equal(got.Body, body) {
		t.Fatalf("kept delivery = %d bytes, %v", len(got.Body), err)
	}
}

// TestPostgresReadOnlyRefusesIntake: a database that takes no writes (a
// failover onto a read-only server) fails intake with an error — the
// webhook's 503 — and readiness, and loses nothing recorded before.
func TestPostgresReadOnlyRefusesIntake(t *testing.T) {
	c := newClock()
	dsn := pg.NewDatabase(t)
	db := openAt(t, dsn, store.Options{Now: c.Now})
	ctx := context.Background()
	record(t, db, delivery("before", []byte(`{}`), c.Now()), spec(sha(1), c.Now()))
	setReadOnly(t, dsn)
	_, err := db.RecordDelivery(ctx, delivery("after", []byte(`{}`), c.Now()), spec(sha(2), c.Now()))
	if err == nil || !strings.Contains(err.Error(), "read-only") {
		t.Fatalf("record on a read-only database: %v, want a read-only error", err)
	}
	c.Advance(2 * store.ReadyInterval) // past the cached answer
	if err := db.Ready(ctx); err == nil || !strings.Contains(err.Error(), "takes no writes") {
		t.Fatalf("ready on a read-only database: %v", err)
	}
	if got, err := db.Delivery(ctx, "before"); err != nil || got.ID != "before" {
		t.Fatalf("the delivery recorded before: %+v, %v", got, err)
	}
}

// setReadOnly makes the database at dsn refuse writes from every new
// connection and ends its other sessions, so each reconnects read-only: a
// failover onto a read-only server.
func setReadOnly(t *testing.T, dsn string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, q := range []string{
		`DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET default_transaction_read_only = on', current_database()); END $$`,
		`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`,
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// TestPostgresExclusive: a task runs on one replica at a time; the others
// skip it meanwhile, and run it once it is free.
func TestPostgresExclusive(t *testing.T) {
	c := newClock()
	dbs := replicas(t, 2, c)
	ctx := context.Background()
	started, release := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		ran, err := dbs[0].Exclusive(ctx, "sweep", func(context.Context) error {
			close(started)
			<-release
			return nil
		})
		if err == nil && !ran {
			err = errors.New("the first replica did not run the task")
		}
		done <- err
	}()
	<-started
	ran, err := dbs[1].Exclusive(ctx, "sweep", func(context.Context) error {
		t.Error("ran while another replica runs it")
		return nil
	})
	if err != nil || ran {
		t.Fatalf("second replica: ran %v, %v; want skipped", ran, err)
	}
	other := false
	if ran, err := dbs[1].Exclusive(ctx, "prune", func(context.Context) error { other = true; return nil }); err != nil || !ran || !other {
		t.Fatalf("another task: ran %v %v, %v", ran, other, err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	wantErr := errors.New("task failed")
	ran, err = dbs[1].Exclusive(ctx, "sweep", func(context.Context) error { return wantErr })
	if !ran || !errors.Is(err, wantErr) {
		t.Fatalf("after release: ran %v, %v; want it run with its error", ran, err)
	}
	// SQLite: one process, the task runs.
	sqlite := openAt(t, filepath.Join(t.TempDir(), "gilf.db"), store.Options{})
	if ran, err := sqlite.Exclusive(ctx, "sweep", func(context.Context) error { return nil }); !ran || err != nil {
		t.Fatalf("sqlite: ran %v, %v", ran, err)
	}
}

// TestPostgresListenReconnects: when the server ends the listening
// session (a restart, a failover), the listener wakes once — a
// notification may have been missed — listens again, and hears the next
// job.
func TestPostgresListenReconnects(t *testing.T) {
	c := newClock()
	dsn := pg.NewDatabase(t)
	intake := openAt(t, dsn, store.Options{Now: c.Now})
	idle := openAt(t, dsn, store.Options{Now: c.Now})
	ctx, cancel := context.WithCancel(context.Background())
	wake := make(chan struct{}, 1)
	done := make(chan error, 1)
	go func() { done <- idle.Listen(ctx, wake) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("listen: %v", err)
		}
	})
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	listening := func() int {
		var n int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND query LIKE 'LISTEN %'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	waitListening := func() {
		for deadline := time.Now().Add(30 * time.Second); listening() == 0; {
			if time.Now().After(deadline) {
				t.Fatal("no session listens")
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitListening()
	if _, err := conn.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE datname = current_database() AND query LIKE 'LISTEN %'`); err != nil {
		t.Fatal(err)
	}
	select {
	case <-wake:
	case <-time.After(30 * time.Second):
		t.Fatal("no wake-up after the listening session ended")
	}
	waitListening()
	record(t, intake, delivery("after-reconnect", []byte(`{}`), c.Now()), spec(sha(7), c.Now()))
	select {
	case <-wake:
	case <-time.After(30 * time.Second):
		t.Fatal("the job after the reconnect did not wake the listener")
	}
}

// TestPostgresOneConnection: a replica with a pool of one connection
// (GILF_DATABASE_MAX_CONNS=1) still records, claims, finishes and runs an
// exclusive task that writes: nothing holds the one connection while
// asking for another.
func TestPostgresOneConnection(t *testing.T) {
	c := newClock()
	db := openAt(t, pg.NewDatabase(t), store.Options{Now: c.Now, MaxConns: 1})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r := record(t, db, delivery("one", payload(t), c.Now()), spec(sha(1), c.Now()))
	j, ok := claim(t, db, "w", time.Minute)
	if !ok || j.ID != r.JobID {
		t.Fatalf("claim: %v %+v", ok, j)
	}
	if _, err := db.Finish(ctx, j.Lease, store.RunRecord{Record: validation.Record{Outcome: validation.OutcomePassed}}); err != nil {
		t.Fatal(err)
	}
	ran, err := db.Exclusive(ctx, "prune", func(ctx context.Context) error {
		_, err := db.Prune(ctx, c.Now().Add(time.Hour))
		return err
	})
	if err != nil || !ran {
		t.Fatalf("exclusive prune: %v %v", ran, err)
	}
	if got, err := db.Delivery(ctx, "one"); err != nil || got.BodyPrunedAt.IsZero() {
		t.Fatalf("delivery after prune: %+v %v", got.BodyPrunedAt, err)
	}
}
