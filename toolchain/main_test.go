package toolchain

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gilf-review/gilf/internal/registrytest"
)

// testRegistry is the package's one Verdaccio, publishing the package
// managers of internal/registrytest/tools.txt; TestMain starts and stops it.
var testRegistry *registrytest.Registry

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	// A short path: the registry's unix socket lives in it.
	dir, err := os.MkdirTemp("", "gilf-tc-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	testRegistry, err = registrytest.StartWithTools(ctx, dir, io.Discard)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "start the registry:", err)
		return 1
	}
	code := m.Run()
	if err := testRegistry.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "stop the registry:", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// countingTransport counts the requests a Cache makes.
type countingTransport struct {
	n  atomic.Int64
	rt http.RoundTripper
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.rt.RoundTrip(r)
}

// countingClient is a client whose requests are counted; its idle
// connections close with the test.
func countingClient(t testing.TB) (*http.Client, *countingTransport) {
	t.Helper()
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	ct := &countingTransport{rt: tr}
	return &http.Client{Transport: ct, Timeout: time.Minute}, ct
}

// tarballPath is a tarball scripts/test put in the cache dir.
func tarballPath(t testing.TB, file string) string {
	t.Helper()
	dir, err := registrytest.CacheDir()
	if err != nil {
		t.Fatal(err)
	}
	return dir + "/tarballs/" + file
}

func readTarball(t testing.TB, file string) []byte {
	t.Helper()
	b, err := os.ReadFile(tarballPath(t, file))
	if err != nil {
		t.Fatalf("read the cached tarball (scripts/test --install-only puts it there): %v", err)
	}
	return b
}
