package webhook

import (
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/gilf-review/gilf/internal/failguard"
	"github.com/gilf-review/gilf/validation"
)

// Limits of the bad-signature guard (reliability W4): a client that keeps
// sending deliveries that fail the signature check — a timing probe, a
// scanner — has its further failures answered 429 for the rest of the
// window. Every delivery is verified first, and one that verifies is never
// limited: behind a reverse proxy or a tunnel every client shares one peer
// address, and a forger must not be able to lock GitHub's deliveries out.
const (
	DefaultBadSignatureLimit  = 30
	DefaultBadSignatureWindow = time.Minute
	// MaxTrackedClients bounds the guard's memory (failguard's).
	MaxTrackedClients = failguard.MaxTrackedClients
)

// newBadSignatures is the guard of signature failures: limit 0 is
// DefaultBadSignatureLimit, a window of 0 DefaultBadSignatureWindow.
func newBadSignatures(limit int, window time.Duration, now func() time.Time) *failguard.Guard {
	if limit == 0 {
		limit = DefaultBadSignatureLimit
	}
	if window <= 0 {
		window = DefaultBadSignatureWindow
	}
	return failguard.New(limit, window, now)
}

// Allowlist limits which GitHub accounts and installations gilf reviews
// (reliability W14: anyone can install a public App, and every install
// costs sandbox time). Empty lists allow everyone. A delivery outside it is
// recorded and answered 202 ignored, so GitHub shows no failure.
type Allowlist struct {
	// Accounts are owner logins (case-insensitive): the part of the
	// repository's full name before the slash.
	Accounts []string
	// Installations are installation ids.
	Installations []int64
}

func (a Allowlist) empty() bool { return len(a.Accounts) == 0 && len(a.Installations) == 0 }

// allows reports whether a delivery from installation for repo (owner/name)
// may make a job. With both lists set, either may allow it.
func (a Allowlist) allows(installation int64, repo string) bool {
	if a.empty() {
		return true
	}
	if installation != 0 && slices.Contains(a.Installations, installation) {
		return true
	}
	owner, _, _ := strings.Cut(repo, "/")
	return owner != "" && slices.ContainsFunc(a.Accounts, func(s string) bool { return strings.EqualFold(s, owner) })
}

// notAllowed is the decision for a delivery outside the allowlist.
func notAllowed() decision {
	return decision{status: validation.DeliveryIgnored, reason: "installation or account not in the allowlist", code: http.StatusAccepted}
}
