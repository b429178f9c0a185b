package pgtest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// The package's shared server, started by TestMain.
var shared *Server

func TestMain(m *testing.M) { os.Exit(Main(m, &shared)) }

func connect(t testing.TB, dsn string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatalf("connect %s: %v", dsn, err)
	}
	t.Cleanup(func() {
		if err := conn.Close(context.Background()); err != nil {
			t.Error(err)
		}
	})
	return conn
}

func queryString(t testing.TB, conn *pgx.Conn, sql string) string {
	t.Helper()
	var s string
	if err := conn.QueryRow(t.Context(), sql).Scan(&s); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return s
}

func TestNewDatabaseIsolatesTests(t *testing.T) {
	t.Parallel()
	dsnA, dsnB := shared.NewDatabase(t), shared.NewDatabase(t)
	if dsnA == dsnB {
		t.Fatalf("NewDatabase returned %s twice", dsnA)
	}
	a, b := connect(t, dsnA), connect(t, dsnB)
	if nameA, nameB := queryString(t, a, "SELECT current_database()"), queryString(t, b, "SELECT current_database()"); nameA == nameB {
		t.Fatalf("both DSNs reach database %s", nameA)
	}
	if _, err := a.Exec(t.Context(), "CREATE TABLE jobs (id bigint PRIMARY KEY); INSERT INTO jobs VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := a.QueryRow(t.Context(), "SELECT count(*) FROM jobs").Scan(&n); err != nil || n != 1 {
		t.Fatalf("count in the first database = %d, %v; want 1", n, err)
	}
	var inB bool
	if err := b.QueryRow(t.Context(), "SELECT to_regclass('jobs') IS NOT NULL").Scan(&inB); err != nil {
		t.Fatal(err)
	}
	if inB {
		t.Error("the table made in the first database is in the second")
	}
}

func TestNewDatabaseIsDroppedAtCleanup(t *testing.T) {
	t.Parallel()
	var name string
	t.Run("user", func(t *testing.T) {
		name = queryString(t, connect(t, shared.NewDatabase(t)), "SELECT current_database()")
	})
	// The subtest's cleanups, its connection and its database, have run.
	var exists bool
	err := connect(t, shared.DSN("postgres")).QueryRow(t.Context(),
		"SELECT EXISTS (SELECT FROM pg_database WHERE datname = $1)", name).Scan(&exists)
	if err != nil {
		t.Fatal(err)
	}
	if exists {
		t.Errorf("database %s still exists after its test ended", name)
	}
}

func TestDropForcesOpenConnections(t *testing.T) {
	t.Parallel()
	var open *pgx.Conn
	t.Run("user", func(t *testing.T) {
		var err error
		// Not closed by the test: the drop must not wait for it.
		if open, err = pgx.Connect(t.Context(), shared.NewDatabase(t)); err != nil {
			t.Fatal(err)
		}
	})
	if err := open.Ping(t.Context()); err == nil {
		t.Error("a connection to the dropped database still works")
	}
	if err := open.Close(t.Context()); err != nil {
		t.Log(err) // the server ended it; closing may report that
	}
}

func TestSettings(t *testing.T) {
	t.Parallel()
	conn := connect(t, shared.DSN("postgres"))
	for _, tc := range []struct{ setting, want string }{
		{"listen_addresses", ""},
		{"unix_socket_directories", shared.dir},
		{"port", strconv.Itoa(Port)},
		{"fsync", "on"},
		{"max_connections", "200"},
		{"shared_buffers", "128MB"},
		{"server_encoding", "UTF8"},
	} {
		if got := queryString(t, conn, "SHOW "+tc.setting); got != tc.want {
			t.Errorf("SHOW %s = %q, want %q", tc.setting, got, tc.want)
		}
	}
	if got := queryString(t, conn, "SELECT current_user"); got != User {
		t.Errorf("current_user = %q, want %q", got, User)
	}
}

// TestListensOnNoTCPPort checks that no listening TCP socket of this
// network namespace belongs to the postmaster: its open sockets are the
// unix one only.
func TestListensOnNoTCPPort(t *testing.T) {
	t.Parallel()
	listening := map[string]bool{}
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		sc.Scan() // the header
		for sc.Scan() {
			// sl local rem st tx:rx tr:when retrnsmt uid timeout inode
			fields := strings.Fields(sc.Text())
			if len(fields) > 9 && fields[3] == "0A" { // TCP_LISTEN
				listening["socket:["+fields[9]+"]"] = true
			}
		}
	}
	fds, err := os.ReadDir(filepath.Join("/proc", strconv.Itoa(shared.pid), "fd"))
	if err != nil {
		t.Fatal(err)
	}
	sockets := 0
	for _, fd := range fds {
		target, err := os.Readlink(filepath.Join("/proc", strconv.Itoa(shared.pid), "fd", fd.Name()))
		if err != nil {
			continue // closed since ReadDir
		}
		if strings.HasPrefix(target, "socket:") {
			sockets++
		}
		if listening[target] {
			t.Errorf("the postmaster's fd %s is a listening TCP socket (%s)", fd.Name(), target)
		}
	}
	if sockets == 0 {
		t.Error("the postmaster has no socket open at all; the check looked at the wrong process")
	}
	fi, err := os.Stat(filepath.Join(shared.dir, ".s.PGSQL."+strconv.Itoa(Port)))
	if err != nil || fi.Mode().Type() != fs.ModeSocket {
		t.Errorf("no unix socket in %s: %v", shared.dir, err)
	}
}

func TestRunsUnprivileged(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(shared.pid), "status"))
	if err != nil {
		t.Fatal(err)
	}
	var uid string
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, "Uid:"); ok {
			uid = strings.Fields(rest)[0] // real uid
		}
	}
	want := strconv.Itoa(os.Geteuid())
	if os.Geteuid() == 0 {
		cred, err := unprivileged()
		if err != nil {
			t.Fatal(err)
		}
		want = strconv.Itoa(int(cred.Uid))
	}
	if uid != want {
		t.Errorf("postmaster runs as uid %s, want %s", uid, want)
	}
}

// TestCloseStopsTheServer starts a second server beside the shared one,
// then closes it.
func TestCloseStopsTheServer(t *testing.T) {
	t.Parallel()
	begin := time.Now()
	srv, err := Start(t.Context(), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("Start took %s", time.Since(begin))
	if srv.dir == shared.dir {
		t.Fatalf("two servers share %s", srv.dir)
	}
	conn, err := pgx.Connect(t.Context(), srv.DSN("postgres"))
	if err != nil {
		t.Fatal(errors.Join(err, srv.Close()))
	}
	if err := conn.Close(t.Context()); err != nil {
		t.Fatal(err)
	}

	begin = time.Now()
	if err := srv.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	t.Logf("Close took %s", time.Since(begin))
	if err := syscall.Kill(srv.pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("signal 0 to the postmaster %d after Close: %v, want ESRCH", srv.pid, err)
	}
	if _, err := os.Stat(srv.dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("stat %s after Close: %v, want not exist", srv.dir, err)
	}
	if conn, err := pgx.Connect(t.Context(), srv.DSN("postgres")); err == nil {
		t.Errorf("connected after Close")
		if err := conn.Close(t.Context()); err != nil {
			t.Error(err)
		}
	}
	if err := srv.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	// The shared server is untouched.
	if got := queryString(t, connect(t, shared.DSN("postgres")), "SELECT 'up'"); got != "up" {
		t.Errorf("shared server answered %q", got)
	}
}

func TestStartWithoutPostgreSQL(t *testing.T) {
	t.Parallel()
	empty := t.TempDir()
	_, err := start(t.Context(), io.Discard, where{libDir: filepath.Join(empty, "lib"), path: empty})
	if err == nil || !strings.Contains(err.Error(), Install) {
		t.Fatalf("start without PostgreSQL: %v; want an error naming %q", err, Install)
	}
}

// TestStartReportsFailures runs fake programs failing the way a broken
// install would, and expects their output in Start's error, at once.
func TestStartReportsFailures(t *testing.T) {
	t.Parallel()
	const fails = "#!/bin/sh\necho \"$(basename \"$0\"): broken install\" >&2\nexit 1\n"
	for _, tc := range []struct {
		name, initdb, postgres, want string
	}{
		{"initdb fails", fails, fails, "initdb: broken install"},
		{"postgres exits", "#!/bin/sh\nexit 0\n", fails, "postgres exited before accepting connections (exit status 1):\npostgres: broken install"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// Readable by the unprivileged user they run as under root,
			// unlike t.TempDir.
			bin, err := os.MkdirTemp("", "pgbin")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				if err := os.RemoveAll(bin); err != nil {
					t.Error(err)
				}
			})
			if err := os.Chmod(bin, 0o755); err != nil {
				t.Fatal(err)
			}
			for name, script := range map[string]string{"initdb": tc.initdb, "postgres": tc.postgres} {
				if err := os.WriteFile(filepath.Join(bin, name), []byte(script), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			begin := time.Now()
			_, err = start(t.Context(), io.Discard, where{libDir: filepath.Join(bin, "none"), path: bin})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("start: %v; want an error containing %q", err, tc.want)
			}
			if took := time.Since(begin); took > ReadyTimeout/2 {
				t.Errorf("start took %s to fail", took)
			}
		})
	}
}

func TestBinDir(t *testing.T) {
	root := t.TempDir()
	mk := func(dir string, names ...string) string {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, n := range names {
			if err := os.WriteFile(filepath.Join(dir, n), []byte("#!/bin/sh\n"), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	lib := filepath.Join(root, "lib")
	mk(filepath.Join(lib, "9", "bin"), "initdb", "postgres")
	v15 := mk(filepath.Join(lib, "15", "bin"), "initdb", "postgres")
	mk(filepath.Join(lib, "16", "bin"), "initdb") // no postgres: incomplete
	mk(filepath.Join(lib, "17"))                  // no bin
	mk(filepath.Join(lib, "notaversion", "bin"), "initdb", "postgres")
	onlyOld := filepath.Join(root, "old")
	mk(filepath.Join(onlyOld, "9", "bin"), "initdb", "postgres")
	onPath := mk(filepath.Join(root, "usr", "bin"), "initdb", "postgres")
	noExec := filepath.Join(root, "noexec")
	mk(noExec)
	for _, n := range []string{"initdb", "postgres"} {
		if err := os.WriteFile(filepath.Join(noExec, n), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name string
		w    where
		want string // "" means an error naming Install
	}{
		{"highest complete major, numerically", where{libDir: lib, path: onPath}, v15},
		{"a single major", where{libDir: onlyOld}, filepath.Join(onlyOld, "9", "bin")},
		{"PATH when the lib dir is missing", where{libDir: filepath.Join(root, "none"), path: noExec + ":" + onPath}, onPath},
		{"nothing anywhere", where{libDir: filepath.Join(root, "none"), path: noExec}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := binDir(tc.w)
			if tc.want == "" {
				if err == nil || !strings.Contains(err.Error(), Install) {
					t.Fatalf("binDir = %q, %v; want an error naming %q", got, err, Install)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("binDir = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestArgs(t *testing.T) {
	got := strings.Join(postgresArgs("/tmp/pg1/data", "/tmp/pg1"), " ")
	want := "-D /tmp/pg1/data -k /tmp/pg1 -p 5432 -c listen_addresses= -c max_connections=200 -c shared_buffers=128MB"
	if got != want {
		t.Errorf("postgresArgs = %q, want %q", got, want)
	}
	got = strings.Join(initdbArgs("/tmp/pg1/data"), " ")
	want = "-D /tmp/pg1/data -U gilf --auth=trust -E UTF8 --locale=C --no-sync"
	if got != want {
		t.Errorf("initdbArgs = %q, want %q", got, want)
	}
}

func BenchmarkStart(b *testing.B) {
	for b.Loop() {
		srv, err := Start(b.Context(), io.Discard)
		if err != nil {
			b.Fatal(err)
		}
		if err := srv.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkNewDatabase(b *testing.B) {
	for b.Loop() {
		shared.NewDatabase(b) // dropped when the benchmark ends
	}
}
