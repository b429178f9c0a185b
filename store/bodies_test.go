package store_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/golang/snappy"

	"github.com/gilf-review/gilf/store"
)

// bodyFor is the body of delivery id: distinct per id, about size bytes.
func bodyFor(id string, size int) []byte {
	return []byte(fmt.Sprintf(`{"id":%q,"pad":%q}`, id, strings.Repeat(id, size/len(id)+1)[:size]))
}

// TestBodyLogRoundTrip: bodies of concurrent deliveries (group-committed
// through the body log) read back byte for byte, also after the store is
// closed and opened again; no row keeps its body in the column.
func TestBodyLogRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gilf.db")
	c := newClock()
	db, err := store.Open(context.Background(), path, testLogger(t), store.Options{Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	const n = 40
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			id := fmt.Sprintf("rt-%d", i)
			_, errs[i] = db.RecordDelivery(context.Background(), delivery(id, bodyFor(id, 25<<10), c.Now()), spec(sha(i+1), c.Now()))
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("delivery %d: %v", i, err)
		}
	}
	check := func(db *store.DB) {
		t.Helper()
		for i := range n {
			id := fmt.Sprintf("rt-%d", i)
			got, err := db.Delivery(context.Background(), id)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got.Body, bodyFor(id, 25<<10)) {
				t.Fatalf("%s: body differs (%d bytes)", id, len(got.Body))
			}
		}
	}
	check(db)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	var inRow, logged int
	if err := rawDB(t, path).QueryRow(`SELECT COUNT(*) FILTER (WHERE length(body) > 0), COUNT(body_segment) FROM deliveries`).Scan(&inRow, &logged); err != nil {
		t.Fatal(err)
	}
	if inRow != 0 || logged != n {
		t.Fatalf("%d bodies in their rows and %d in the body log, want 0 and %d", inRow, logged, n)
	}
	check(openAt(t, path, store.Options{Now: c.Now}))
}

// TestBodyLogEdges: an empty body and a body of GitHub's full 25 MiB both
// go through the body log and read back exactly; a row written before the
// body log (body in its column, no segment) still reads back.
func TestBodyLogEdges(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gilf.db")
	c := newClock()
	db := openAt(t, path, store.Options{Now: c.Now})
	big := bytes.Repeat([]byte("b"), 25<<20)
	for _, tt := range []struct {
		id   string
		body []byte
	}{
		{"empty", []byte{}},
		{"largest", big},
	} {
		record(t, db, delivery(tt.id, tt.body, c.Now()), nil)
		got, err := db.Delivery(context.Background(), tt.id)
		if err != nil || !bytes.Equal(got.Body, tt.body) {
			t.Fatalf("%s: read back %d bytes, %v; want %d", tt.id, len(got.Body), err, len(tt.body))
		}
	}
	old := []byte(`{"zen":"from before the body log"}`)
	if _, err := rawDB(t, path).Exec(`INSERT INTO deliveries (id, event, received_at, status, body)
		VALUES ('old', 'ping', 1, 'ignored', ?)`, old); err != nil {
		t.Fatal(err)
	}
	got, err := db.Delivery(context.Background(), "old")
	if err != nil || !bytes.Equal(got.Body, old) {
		t.Fatalf("row from before the body log: %q, %v", got.Body, err)
	}
}

// TestBodyLogCorruptionIsReported: a body whose bytes changed, whose
// segment was cut short, or whose reference points outside the body
// directory is an ErrBodyCorrupt, never wrong bytes.
func TestBodyLogCorruptionIsReported(t *testing.T) {
	for _, tt := range []struct {
		name  string
		spoil func(t *testing.T, path, seg string)
	}{
		{"flipped byte", func(t *testing.T, path, seg string) {
			f, err := os.OpenFile(filepath.Join(path+".bodies", seg), os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := f.WriteAt([]byte("#"), 10); err != nil {
				t.Fatal(err)
			}
		}},
		{"truncated segment", func(t *testing.T, path, seg string) {
			if err := os.Truncate(filepath.Join(path+".bodies", seg), 5); err != nil {
				t.Fatal(err)
			}
		}},
		{"segment outside the directory", func(t *testing.T, path, seg string) {
			if _, err := rawDB(t, path).Exec(`UPDATE deliveries SET body_segment = '../gilf.db'`); err != nil {
				t.Fatal(err)
			}
		}},
		{"incomplete reference", func(t *testing.T, path, seg string) {
			if _, err := rawDB(t, path).Exec(`UPDATE deliveries SET body_crc32c = NULL`); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "gilf.db")
			c := newClock()
			db := openAt(t, path, store.Options{Now: c.Now})
			record(t, db, delivery("d1", bodyFor("d1", 4096), c.Now()), nil)
			var seg string
			if err := rawDB(t, path).QueryRow(`SELECT body_segment FROM deliveries WHERE id = 'd1'`).Scan(&seg); err != nil {
				t.Fatal(err)
			}
			tt.spoil(t, path, seg)
			got, err := db.Delivery(context.Background(), "d1")
			if !errors.Is(err, store.ErrBodyCorrupt) {
				t.Fatalf("Delivery = %d bytes, %v; want ErrBodyCorrupt", len(got.Body), err)
			}
		})
	}
}

// TestBodyLogCap: with MaxBytes set, the body log takes bodies up to the
// cap (counted as stored, compressed) and refuses the first that would
// pass it, storing no row for it; a store opened again counts the bytes
// already in the directory.
func TestBodyLogCap(t *testing.T) {
	const limit = 1 << 20 // also the database's cap, far from reached here
	const size = 100 << 10
	path := filepath.Join(t.TempDir(), "gilf.db")
	c := newClock()
	opts := store.Options{Now: c.Now, MaxBytes: limit}
	db, err := store.Open(context.Background(), path, testLogger(t), opts)
	if err != nil {
		t.Fatal(err)
	}
	random := func(n int) []byte { // incompressible: stored about as large
		b := make([]byte, n)
		if _, err := rand.Read(b); err != nil {
			t.Fatal(err)
		}
		return b
	}
	stored := func(b []byte) int { return len(snappy.Encode(nil, b)) }
	used := 0
	for i := 0; ; i++ {
		b := random(size)
		if used+stored(b) > limit {
			break
		}
		record(t, db, delivery(fmt.Sprintf("d%d", i), b, c.Now()), nil)
		used += stored(b)
	}
	// Exactly what is left fits; after it, one byte does not.
	var exact []byte
	for n := limit - used; n > 0 && exact == nil; n-- {
		if b := random(n); stored(b) == limit-used {
			exact = b
		}
	}
	if exact == nil {
		t.Fatalf("no body is stored in exactly %d bytes", limit-used)
	}
	record(t, db, delivery("exact", exact, c.Now()), nil)
	_, err = db.RecordDelivery(context.Background(), delivery("over", []byte("o"), c.Now()), nil)
	if !errors.Is(err, store.ErrBodyLogFull) {
		t.Fatalf("one byte past the cap: %v, want ErrBodyLogFull", err)
	}
	if _, err := db.Delivery(context.Background(), "over"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("refused delivery left a row: %v", err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openAt(t, path, opts)
	if _, err := db.RecordDelivery(context.Background(), delivery("over-again", []byte("o"), c.Now()), nil); !errors.Is(err, store.ErrBodyLogFull) {
		t.Fatalf("after reopening: %v, want ErrBodyLogFull", err)
	}
	if got, err := db.Delivery(context.Background(), "exact"); err != nil || !bytes.Equal(got.Body, exact) {
		t.Fatalf("exact: %d bytes, %v", len(got.Body), err)
	}
}

// intakeChildEnv makes the test binary record deliveries from 16
// goroutines, printing "ok <id>" after each RecordDelivery returned nil,
// until it is killed (TestMain re-exec).
const intakeChildEnv = "GILF_STORE_TEST_INTAKE_CHILD"

// intakeChildMax bounds the child's deliveries if nobody kills it.
const intakeChildMax = 20000

func intakeChild(path string) int {
	ctx := context.Background()
	db, err := store.Open(ctx, path, slog.New(slog.NewTextHandler(os.Stderr, nil)), store.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child open:", err)
		return 2
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			for i := range intakeChildMax / 16 {
				id := fmt.Sprintf("crash-%d-%d", g, i)
				now := time.Now()
				if _, err := db.RecordDelivery(ctx, delivery(id, bodyFor(id, 25<<10), now), spec(sha(g*intakeChildMax+i+1), now)); err != nil {
					fmt.Fprintln(os.Stderr, "child record:", err)
					return
				}
				mu.Lock()
				fmt.Printf("ok %s\n", id)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return 4
}

// TestKilledIntakeLosesNoAcknowledgedBody: a process SIGKILLed while it
// group-commits deliveries through the body log loses none it had
// acknowledged: after the kill, every acknowledged id has its row and its
// exact body. Bytes the kill cut off before their rows committed are
// never referenced.
func TestKilledIntakeLosesNoAcknowledgedBody(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gilf.db")
	openAt(t, path, store.Options{}) // schema, then left open beside the child
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd, out := startChild(t, ctx, intakeChildEnv, path)
	sc := bufio.NewScanner(out)
	var acked []string
	for len(acked) < 300 && sc.Scan() {
		acked = append(acked, strings.TrimPrefix(sc.Text(), "ok "))
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for sc.Scan() { // acknowledged before the kill landed
		acked = append(acked, strings.TrimPrefix(sc.Text(), "ok "))
	}
	if err := cmd.Wait(); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Fatalf("child wait: %v, want killed", err)
	}
	if len(acked) < 300 {
		t.Fatalf("child acknowledged only %d deliveries", len(acked))
	}
	db := openAt(t, path, store.Options{})
	for _, id := range acked {
		got, err := db.Delivery(context.Background(), id)
		if err != nil {
			t.Fatalf("acknowledged %s: %v", id, err)
		}
		if !bytes.Equal(got.Body, bodyFor(id, 25<<10)) {
			t.Fatalf("acknowledged %s: body differs", id)
		}
	}
	var rows, logged int
	if err := rawDB(t, path).QueryRow(`SELECT COUNT(*), COUNT(body_segment) FROM deliveries`).Scan(&rows, &logged); err != nil {
		t.Fatal(err)
	}
	if rows < len(acked) || logged != rows {
		t.Fatalf("%d rows (%d in the body log) for %d acknowledged", rows, logged, len(acked))
	}
}

// TestLostBodyHealedByRedelivery: a recorded delivery whose body was lost
// (the row survived a power loss, the body log's bytes did not) gets the
// body of GitHub's redelivery, which is answered as a duplicate; a
// redelivery of an intact delivery leaves its body where it was.
func TestLostBodyHealedByRedelivery(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gilf.db")
	c := newClock()
	db := openAt(t, path, store.Options{Now: c.Now})
	body := bodyFor("lost", 4096)
	first := record(t, db, delivery("lost", body, c.Now()), spec(sha(1), c.Now()))
	record(t, db, delivery("kept", bodyFor("kept", 4096), c.Now()), nil)
	ref := func(id string) (seg string, off, n int64) {
		t.Helper()
		if err := rawDB(t, path).QueryRow(`SELECT body_segment, body_offset, body_length FROM deliveries WHERE id = ?`, id).Scan(&seg, &off, &n); err != nil {
			t.Fatal(err)
		}
		return seg, off, n
	}
	seg, off, n := ref("lost")
	f, err := os.OpenFile(filepath.Join(path+".bodies", seg), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(make([]byte, n), off); err != nil { // the bytes never reached the disk
		t.Fatal(err)
	}
	f.Close()
	if _, err := db.Delivery(context.Background(), "lost"); !errors.Is(err, store.ErrBodyCorrupt) {
		t.Fatalf("lost body read: %v, want ErrBodyCorrupt", err)
	}
	again := record(t, db, delivery("lost", body, c.Now()), spec(sha(1), c.Now()))
	if !again.Duplicate || again.JobID != first.JobID {
		t.Fatalf("redelivery = %+v, want a duplicate of job %d", again, first.JobID)
	}
	got, err := db.Delivery(context.Background(), "lost")
	if err != nil || !bytes.Equal(got.Body, body) {
		t.Fatalf("after the redelivery: %d bytes, %v", len(got.Body), err)
	}
	keptSeg, keptOff, _ := ref("kept")
	record(t, db, delivery("kept", bodyFor("kept", 4096), c.Now()), nil)
	if s2, o2, _ := ref("kept"); s2 != keptSeg || o2 != keptOff {
		t.Fatalf("intact body moved from %s@%d to %s@%d", keptSeg, keptOff, s2, o2)
	}
}
