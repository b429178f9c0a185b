// Package pgtest runs a real PostgreSQL server for tests: one per test
// package, private to that package's run, listening on nothing but a unix
// socket in its own temporary directory, so that the servers of packages
// tested in parallel run side by side. Each test takes a fresh database of
// its own from NewDatabase.
//
// The test script installs Debian's PostgreSQL:
//
//	apt-get install -y postgresql
//
// Start the server from TestMain:
//
//	var pg *pgtest.Server
//
//	func TestMain(m *testing.M) { os.Exit(pgtest.Main(m, &pg)) }
//
//	func TestSomething(t *testing.T) {
//		dsn := pg.NewDatabase(t)
//		...
//	}
//
// PostgreSQL refuses to run as root, and CI runs as root: then initdb and
// postgres run as the postgres user the Debian package creates, or nobody.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gilf-review/gilf/internal/logtail"
	"github.com/gilf-review/gilf/internal/ownthread"
)

// Install is how CI gets PostgreSQL.
const Install = "apt-get install -y postgresql"

// User is the superuser initdb makes; trust authentication lets anyone
// who can open the socket connect as it.
const User = "gilf"

// Port names the socket (.s.PGSQL.<Port>); nothing listens on TCP.
const Port = 5432

// Server limits.
const (
	// InitTimeout bounds initdb, unless ctx ends first.
	InitTimeout = time.Minute
	// ReadyTimeout bounds the wait for postgres to accept a connection,
	// unless ctx ends first.
	ReadyTimeout = 30 * time.Second
	// DatabaseTimeout bounds creating or dropping a test's database.
	DatabaseTimeout = 30 * time.Second
	// StopTimeout is how long Close waits after SIGINT (fast shutdown)
	// before SIGKILL.
	StopTimeout = 10 * time.Second
	// tailBytes is how much of the server's output errors show.
	tailBytes = 16 << 10
)

// maxSocketPath is the size of sockaddr_un's sun_path on Linux.
const maxSocketPath = 108

// Server is a running postgres.
type Server struct {
	dir     string // the temporary directory: data/ and the socket
	pid     int    // the postmaster's, and its process group's id
	exited  chan struct{}
	waitErr error // the postmaster's exit, once exited is closed
	tail    *logtail.Buffer

	closeOnce sync.Once
	closeErr  error
}

// Start makes a temporary directory, runs initdb in it and starts postgres
// on a unix socket there, then waits until it accepts a connection.
// initdb's and postgres's output go to log, postgres's for as long as it
// runs. ctx bounds the start, not the server's life: Close ends that.
//
// Missing PostgreSQL programs are an error naming Install: CI installs
// them, so their absence is a broken setup, never a reason to skip.
func Start(ctx context.Context, log io.Writer) (*Server, error) {
	return start(ctx, log, where{libDir: DebianLibDir, path: os.Getenv("PATH")})
}

func start(ctx context.Context, log io.Writer, w where) (*Server, error) {
	bin, err := binDir(w)
	if err != nil {
		return nil, err
	}
	var cred *syscall.Credential // nil: as this process's user
	if os.Geteuid() == 0 {
		if cred, err = unprivileged(); err != nil {
			return nil, err
		}
	}
	// Short, under /tmp: the socket's path must fit sun_path.
	dir, err := os.MkdirTemp("", "pg")
	if err != nil {
		return nil, fmt.Errorf("make postgres dir: %w", err)
	}
	s, err := startIn(ctx, log, bin, dir, cred)
	if err != nil {
		return nil, errors.Join(err, os.RemoveAll(dir))
	}
	return s, nil
}

func startIn(ctx context.Context, log io.Writer, bin, dir string, cred *syscall.Credential) (*Server, error) {
	if sock := filepath.Join(dir, ".s.PGSQL."+strconv.Itoa(Port)); len(sock) >= maxSocketPath {
		return nil, fmt.Errorf("socket path %s is longer than a unix socket allows (%d bytes): set a shorter TMPDIR", sock, maxSocketPath-1)
	}
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			return nil, fmt.Errorf("give %s to uid %d: %w", dir, cred.Uid, err)
		}
	}
	tail := logtail.New(tailBytes)
	out := io.MultiWriter(log, tail)
	data := filepath.Join(dir, "data")

	initCtx, cancel := context.WithTimeout(ctx, InitTimeout)
	defer cancel()
	initdb := command(initCtx, dir, cred, out, filepath.Join(bin, "initdb"), initdbArgs(data)...)
	if err := initdb.Run(); err != nil {
		return nil, fmt.Errorf("initdb: %w\n%s", err, tail.String())
	}

	postgres := command(context.Background(), dir, cred, out, filepath.Join(bin, "postgres"), postgresArgs(data, dir)...)
	// The postmaster stops its own backends; should this process die
	// first, it shuts down at once. It is started from a thread of its
	// own: Pdeathsig is that thread's end, and the caller's may end long
	// before this process does.
	postgres.SysProcAttr.Pdeathsig = syscall.SIGQUIT
	wait, err := ownthread.Start(postgres)
	if err != nil {
		return nil, fmt.Errorf("start postgres: %w", err)
	}
	s := &Server{dir: dir, pid: postgres.Process.Pid, exited: make(chan struct{}), tail: tail}
	go func() {
		s.waitErr = <-wait // read after exited closes
		close(s.exited)
	}()
	readyCtx, cancelReady := context.WithTimeout(ctx, ReadyTimeout)
	defer cancelReady()
	if err := s.waitReady(readyCtx); err != nil {
		select {
		case <-s.exited: // err says how
			return nil, err
		default:
			return nil, errors.Join(err, s.stop())
		}
	}
	return s, nil
}

// initdbArgs are initdb's arguments for a cluster in data. --no-sync only
// skips flushing the fresh cluster; the server itself runs with fsync on.
func initdbArgs(data string) []string {
	return []string{"-D", data, "-U", User, "--auth=trust", "-E", "UTF8", "--locale=C", "--no-sync"}
}

// postgresArgs are the server's arguments: the cluster in data, the
// socket in sockDir and no TCP. fsync stays on, so that benchmarks measure
// durable commits.
func postgresArgs(data, sockDir string) []string {
	return []string{
		"-D", data, "-k", sockDir, "-p", strconv.Itoa(Port),
		"-c", "listen_addresses=",
		"-c", "max_connections=200",
		"-c", "shared_buffers=128MB",
	}
}

// command runs name in dir as cred (nil: as this process), in its own
// process group, with its output to out.
func command(ctx context.Context, dir string, cred *syscall.Credential, out io.Writer, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: cred}
	cmd.WaitDelay = StopTimeout
	return cmd
}

// unprivileged is who initdb and postgres run as when this process is
// root, which PostgreSQL refuses: the postgres user the Debian package
// creates, else nobody.
func unprivileged() (*syscall.Credential, error) {
	u, err := user.Lookup("postgres")
	if err != nil {
		if u, err = user.Lookup("nobody"); err != nil {
			return nil, fmt.Errorf("postgres refuses to run as root, and there is no postgres or nobody user: %w", err)
		}
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("uid of %s: %w", u.Username, err)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("gid of %s: %w", u.Username, err)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// waitReady polls with a connection until postgres accepts one.
func (s *Server) waitReady(ctx context.Context) error {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		conn, err := pgx.Connect(ctx, s.DSN("postgres"))
		if err == nil {
			return conn.Close(ctx)
		}
		select {
		case <-s.exited:
			return fmt.Errorf("postgres exited before accepting connections (%v):\n%s", s.waitErr, s.tail.String())
		case <-ctx.Done():
			return fmt.Errorf("postgres not accepting connections: %w (last: %v)\n%s", ctx.Err(), err, s.tail.String())
		case <-tick.C:
		}
	}
}

// DSN is a connection URL for database db over the server's socket, for
// pgx or libpq.
func (s *Server) DSN(db string) string {
	return fmt.Sprintf("postgres://%s@/%s?host=%s&port=%d&sslmode=disable",
		User, url.PathEscape(db), url.QueryEscape(s.dir), Port)
}

// NewDatabase creates a database with a fresh random name and returns its
// DSN; the database is dropped, connections and all, when t ends. It
// fails t on error.
func (s *Server) NewDatabase(t testing.TB) string {
	t.Helper()
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	name := "test_" + hex.EncodeToString(b)
	ctx, cancel := context.WithTimeout(t.Context(), DatabaseTimeout)
	defer cancel()
	if err := s.admin(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("pgtest: create database: %v", err)
	}
	t.Cleanup(func() {
		// t.Context is done by now.
		ctx, cancel := context.WithTimeout(context.Background(), DatabaseTimeout)
		defer cancel()
		if err := s.admin(ctx, "DROP DATABASE "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("pgtest: drop database: %v", err)
		}
	})
	return s.DSN(name)
}

// admin runs one statement as User in the postgres database.
func (s *Server) admin(ctx context.Context, sql string) error {
	conn, err := pgx.Connect(ctx, s.DSN("postgres"))
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	_, err = conn.Exec(ctx, sql)
	return errors.Join(err, conn.Close(ctx))
}

// Log is the tail of the server's output.
func (s *Server) Log() string { return s.tail.String() }

// Close stops postgres — SIGINT (fast shutdown), SIGKILL after
// StopTimeout — waits for it and removes its directory. It is safe to
// call twice.
func (s *Server) Close() error {
	s.closeOnce.Do(func() { s.closeErr = errors.Join(s.stop(), os.RemoveAll(s.dir)) })
	return s.closeErr
}

// stop ends the postmaster and waits for it. An exit other than the one
// SIGINT asks for is an error.
func (s *Server) stop() error {
	select {
	case <-s.exited:
		return fmt.Errorf("postgres had exited: %v", s.waitErr)
	default:
	}
	var errs []error
	signal := func(pid int, sig syscall.Signal) {
		if err := syscall.Kill(pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
			errs = append(errs, fmt.Errorf("signal postgres %d: %w", pid, err))
		}
	}
	signal(s.pid, syscall.SIGINT)
	timer := time.NewTimer(StopTimeout)
	defer timer.Stop()
	select {
	case <-s.exited:
		if s.waitErr != nil {
			errs = append(errs, fmt.Errorf("postgres: %w\n%s", s.waitErr, s.tail.String()))
		}
	case <-timer.C:
		signal(s.pid, syscall.SIGKILL)
		<-s.exited
		// Backends left behind by a killed postmaster share its group.
		signal(-s.pid, syscall.SIGKILL)
		errs = append(errs, fmt.Errorf("postgres did not stop within %s of SIGINT; killed\n%s", StopTimeout, s.tail.String()))
	}
	return errors.Join(errs...)
}

// Main starts the package's server into *srv, runs the tests and closes
// the server, for TestMain: os.Exit(pgtest.Main(m, &srv)). The server's
// output is printed when something fails.
func Main(m *testing.M, srv **Server) int {
	s, err := Start(context.Background(), io.Discard)
	if err != nil {
		fmt.Fprintf(os.Stderr, "pgtest: start: %v\n", err)
		return 1
	}
	*srv = s
	code := m.Run()
	if err := s.Close(); err != nil {
		fmt.Fprintf(os.Stderr, "pgtest: close: %v\n", err)
		code = 1
	}
	if code != 0 {
		fmt.Fprintf(os.Stderr, "postgres output (tail):\n%s", s.Log())
	}
	return code
}
