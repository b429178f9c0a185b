package store_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gilf-review/gilf/store"
)

// bodyFor is the body of delivery id: distinct per id, about size bytes.
func bodyFor(id string, size int) []byte {
	return []byte(fmt.Sprintf(`{"id":%q,"pad":%q}`, id, strings.Repeat(id, size/len(id)+1)[:size]))
}

// TestBodyLogRoundTrip: bodies of concurrent deliveries (group-committed,
// so written to the body log) and of lone ones read back byte for byte,
// also after the store is closed and opened again.
func TestBodyLogRoundTrip(t *testing.T) {
	for _, tt := range []struct {
		name   string
		inline int64
		inRow  bool
	}{
		{"body log", -1, false},
		{"inline", 1 << 30, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "gilf.db")
			c := newClock()
			db, err := store.Open(context.Background(), path, testLogger(t), store.Options{Now: c.Now, InlineBodyBytes: tt.inline})
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
			var inRow int
			if err := rawDB(t, path).QueryRow(`SELECT COUNT(*) FROM deliveries WHERE body_segment IS NULL AND length(body) > 0`).Scan(&inRow); err != nil {
				t.Fatal(err)
			}
			if want := map[bool]int{true: n, false: 0}[tt.inRow]; inRow != want {
				t.Fatalf("%d bodies in their rows, want %d", inRow, want)
			}
			check(openAt(t, path, store.Options{Now: c.Now}))
		})
	}
}

// TestInlineBodyBytesBoundary: a lone delivery whose body is exactly
// InlineBodyBytes stays in its row; one byte more goes to the body log.
func TestInlineBodyBytesBoundary(t *testing.T) {
	const limit = 1000
	path := filepath.Join(t.TempDir(), "gilf.db")
	c := newClock()
	db := openAt(t, path, store.Options{Now: c.Now, InlineBodyBytes: limit})
	for _, tt := range []struct {
		id    string
		size  int
		inRow bool
	}{
		{"at-limit", limit, true},
		{"over-limit", limit + 1, false},
	} {
		t.Run(tt.id, func(t *testing.T) {
			body := bytes.Repeat([]byte("x"), tt.size)
			record(t, db, delivery(tt.id, body, c.Now()), nil)
			var seg *string
			var n int
			if err := rawDB(t, path).QueryRow(`SELECT body_segment, length(body) FROM deliveries WHERE id = ?`, tt.id).Scan(&seg, &n); err != nil {
				t.Fatal(err)
			}
			if (seg == nil) != tt.inRow || (n == tt.size) != tt.inRow {
				t.Fatalf("segment %v, %d bytes in the row; want in row: %v", seg, n, tt.inRow)
			}
			got, err := db.Delivery(context.Background(), tt.id)
			if err != nil || !bytes.Equal(got.Body, body) {
				t.Fatalf("read back: %d bytes, %v", len(got.Body), err)
			}
		})
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
			db := openAt(t, path, store.Options{Now: c.Now, InlineBodyBytes: -1})
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
// cap and refuses the first that would pass it, storing no row for it;
// a store opened again counts the bytes already in the directory.
func TestBodyLogCap(t *testing.T) {
	const limit = 1 << 20 // also the database's cap, far from reached here
	const size = 100 << 10
	path := filepath.Join(t.TempDir(), "gilf.db")
	c := newClock()
	opts := store.Options{Now: c.Now, InlineBodyBytes: -1, MaxBytes: limit}
	db, err := store.Open(context.Background(), path, testLogger(t), opts)
	if err != nil {
		t.Fatal(err)
	}
	full := limit / size // deliveries that fit
	for i := range full {
		record(t, db, delivery(fmt.Sprintf("d%d", i), bytes.Repeat([]byte("b"), size), c.Now()), nil)
	}
	left := limit - full*size
	// Exactly what is left fits; after it, one byte does not.
	record(t, db, delivery("exact", bytes.Repeat([]byte("e"), left), c.Now()), nil)
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
	if got, err := db.Delivery(context.Background(), "exact"); err != nil || len(got.Body) != left {
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
	db, err := store.Open(ctx, path, slog.New(slog.NewTextHandler(os.Stderr, nil)), store.Options{InlineBodyBytes: -1})
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
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), intakeChildEnv+"="+path)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
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
