// Package s3test runs a real S3 server (versitygw, posix backend) on
// loopback for tests. The test script installs it:
//
//	go install github.com/versity/versitygw/cmd/versitygw@v1.8.0
package s3test

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	gobuild "go/build"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// Install is how CI gets the S3 server.
const Install = "go install github.com/versity/versitygw/cmd/versitygw@v1.8.0"

// Region is the region tests sign for.
const Region = "us-east-1"

// Server limits.
const (
	ReadyTimeout = 15 * time.Second
	StopTimeout  = 10 * time.Second
)

// Server is a running versitygw.
type Server struct {
	t              testing.TB
	bin, dir, addr string
	// Access and Secret are the root credentials, made fresh per server.
	Access, Secret string
	cmd            *exec.Cmd
	exited         chan struct{}
	logs           bytes.Buffer
}

// Binary finds versitygw in PATH or $GOPATH/bin, or fails the test with
// the install command: CI installs it, so a missing binary is a broken
// setup, not a reason to skip.
func Binary(t testing.TB) string {
	t.Helper()
	if p, err := exec.LookPath("versitygw"); err == nil {
		return p
	}
	p := filepath.Join(gobuild.Default.GOPATH, "bin", "versitygw")
	if _, err := os.Stat(p); err == nil {
		return p
	}
	t.Fatalf("versitygw not found in PATH or %s; install it with: %s", filepath.Dir(p), Install)
	return ""
}

func randHex(t testing.TB, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// FreeAddr returns a loopback address with a port that was free a moment ago.
func FreeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

// Start starts versitygw on a loopback port with fresh credentials and
// creates bucket. It is stopped when the test ends.
func Start(t testing.TB, bucket string) *Server {
	t.Helper()
	srv := &Server{
		t: t, bin: Binary(t), dir: t.TempDir(), addr: FreeAddr(t),
		Access: "AK" + randHex(t, 8), Secret: randHex(t, 20),
	}
	srv.Restart()
	if _, err := srv.Client().CreateBucket(t.Context(), &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatalf("create bucket: %v", err)
	}
	return srv
}

// Endpoint is the server's base URL.
func (s *Server) Endpoint() string { return "http://" + s.addr }

// Credentials are the server's root credentials.
func (s *Server) Credentials() aws.CredentialsProvider {
	return credentials.NewStaticCredentialsProvider(s.Access, s.Secret, "")
}

// Client reads what the server holds, independently of the code under test.
func (s *Server) Client() *s3.Client {
	return s3.New(s3.Options{
		BaseEndpoint: aws.String(s.Endpoint()), Region: Region, UsePathStyle: true, Credentials: s.Credentials(),
	})
}

// Restart starts the server (again) on the same address and directory.
func (s *Server) Restart() {
	t := s.t
	t.Helper()
	cmd := exec.Command(s.bin, "--port", s.addr, "--quiet", "posix", s.dir)
	cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY="+s.Access, "ROOT_SECRET_KEY="+s.Secret)
	s.logs.Reset()
	cmd.Stdout, cmd.Stderr = &s.logs, &s.logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start versitygw: %v", err)
	}
	s.cmd, s.exited = cmd, make(chan struct{})
	t.Cleanup(s.Stop)
	exited := s.exited
	go func() {
		if err := cmd.Wait(); err != nil {
			t.Logf("versitygw exited: %v", err)
		}
		close(exited)
	}()
	deadline := time.Now().Add(ReadyTimeout)
	for {
		resp, err := http.Get(s.Endpoint() + "/")
		if err == nil {
			if cerr := resp.Body.Close(); cerr != nil {
				t.Fatal(cerr)
			}
			return // any HTTP answer (403 without auth) means it is serving
		}
		select {
		case <-exited:
			t.Fatalf("versitygw exited before serving:\n%s", s.logs.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("versitygw not ready after %s:\n%s", ReadyTimeout, s.logs.String())
		}
	}
}

// Stop ends the server (SIGTERM, then SIGKILL) and waits for it.
func (s *Server) Stop() {
	if s.cmd == nil {
		return
	}
	select {
	case <-s.exited:
		s.cmd = nil
		return
	default:
	}
	if err := syscall.Kill(-s.cmd.Process.Pid, syscall.SIGTERM); err != nil {
		s.t.Logf("signal versitygw: %v", err)
	}
	select {
	case <-s.exited:
	case <-time.After(StopTimeout):
		if err := syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL); err != nil {
			s.t.Logf("kill versitygw: %v", err)
		}
		<-s.exited
	}
	s.cmd = nil
}
