package semantic

import (
	"fmt"
	"net/http"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestMain fails the package when goroutines outlive its tests: a
// Review that returned (on success, error, timeout or cancel) leaves
// nothing running once the stand-ins are closed.
func TestMain(m *testing.M) {
	before := runtime.NumGoroutine()
	code := m.Run()
	if code == 0 {
		http.DefaultTransport.(*http.Transport).CloseIdleConnections()
		deadline := time.Now().Add(5 * time.Second)
		for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond) // polling a condition with a deadline
		}
		if n := runtime.NumGoroutine(); n > before {
			buf := make([]byte, 1<<20)
			stacks := string(buf[:runtime.Stack(buf, true)])
			fmt.Fprintf(os.Stderr, "%d goroutines leaked:\n%s\n", n-before, strings.TrimSpace(stacks))
			code = 1
		}
	}
	os.Exit(code)
}
