package store_test

import (
	"bufio"
	"bytes"
	"context"
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

	"github.com/gilf-review/gilf/store"
	"github.com/gilf-review/gilf/store/sqlite"
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
	db, err := sqlite.Open(context.Background(), path, testLogger(t), store.Options{Now: c.Now})
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
	var inRow, stored int
	if err := rawDB(t, path).QueryRow(`SELECT COUNT(*) FILTER (WHERE body_crc32c IS NOT NULL), COALESCE(SUM(length(body)), 0) FROM deliveries`).Scan(&inRow, &stored); err != nil {
		t.Fatal(err)
	}
	if inRow != n || stored >= n*(25<<10)/2 {
		t.Fatalf("%d bodies in their rows with a CRC (want %d), %d bytes stored: want them compressed", inRow, n, stored)
	}
	check(openAt(t, path, store.Options{Now: c.Now}))
}

// TestBodyEdges: an empty body and a body of GitHub's full 25 MiB both
// read back exactly.
func TestBodyEdges(t *testing.T) {
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
}

// TestBodyCorruptionIsReported: a body whose bytes changed, or that is not
// a snappy block, is an ErrBodyCorrupt, never wrong bytes.
func TestBodyCorruptionIsReported(t *testing.T) {
	for name, spoil := range map[string]string{
		"flipped byte":   `UPDATE deliveries SET body = CAST(replace(CAST(body AS TEXT), 'd1', 'd2') AS BLOB)`,
		"not snappy":     `UPDATE deliveries SET body = x'ffffffffffff', body_crc32c = NULL`,
		"truncated body": `UPDATE deliveries SET body = substr(body, 1, 5)`,
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "gilf.db")
			c := newClock()
			db := openAt(t, path, store.Options{Now: c.Now})
			record(t, db, delivery("d1", bodyFor("d1", 4096), c.Now()), nil)
			if r, err := rawDB(t, path).Exec(spoil); err != nil {
				t.Fatal(err)
			} else if n, _ := r.RowsAffected(); n != 1 {
				t.Fatalf("spoiled %d rows", n)
			}
			got, err := db.Delivery(context.Background(), "d1")
			if !errors.Is(err, store.ErrBodyCorrupt) {
				t.Fatalf("Delivery = %d bytes, %v; want ErrBodyCorrupt", len(got.Body), err)
			}
		})
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
	db, err := sqlite.Open(ctx, path, slog.New(slog.NewTextHandler(os.Stderr, nil)), store.Options{})
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
// group-commits deliveries loses none it had acknowledged: after the
// kill, every acknowledged id has its row and its exact body.
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
	var rows int
	if err := rawDB(t, path).QueryRow(`SELECT COUNT(*) FROM deliveries`).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows < len(acked) {
		t.Fatalf("%d rows for %d acknowledged", rows, len(acked))
	}
}

// TestLostBodyHealedByRedelivery: a recorded delivery whose body was
// damaged (a disk error) gets the body of GitHub's redelivery, which is
// answered as a duplicate; a redelivery of an intact delivery leaves its
// body as it was.
func TestLostBodyHealedByRedelivery(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gilf.db")
	c := newClock()
	db := openAt(t, path, store.Options{Now: c.Now})
	body := bodyFor("lost", 4096)
	first := record(t, db, delivery("lost", body, c.Now()), spec(sha(1), c.Now()))
	record(t, db, delivery("kept", bodyFor("kept", 4096), c.Now()), nil)
	if _, err := rawDB(t, path).Exec(`UPDATE deliveries SET body = zeroblob(length(body)) WHERE id = 'lost'`); err != nil {
		t.Fatal(err)
	}
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
	// An intact body is not rewritten: a redelivery with other bytes
	// leaves it.
	record(t, db, delivery("kept", []byte(`{"other":1}`), c.Now()), nil)
	if got, err := db.Delivery(context.Background(), "kept"); err != nil || !bytes.Equal(got.Body, bodyFor("kept", 4096)) {
		t.Fatalf("intact body after a redelivery: %q, %v", got.Body, err)
	}
}
