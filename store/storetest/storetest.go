// Package storetest is the store's conformance suite: the behaviour every
// engine must show the same way (intake, jobs and their leases, re-runs,
// runs, operator actions, the dashboard's and the CLI's reads). Run takes
// the engine as a parameter, as litestream's RunWithReplicaClient does, so
// one suite tests every implementation; each engine's tests call it.
package storetest

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/gilf-review/gilf/internal/shared"
	"github.com/gilf-review/gilf/store"
	"github.com/gilf-review/gilf/validation"
)

// Engine is one implementation under the suite.
type Engine struct {
	Name string
	// NewLocation is where a fresh, empty store lives for one test (a
	// file path, a database URL).
	NewLocation func(t testing.TB) string
	// Open opens a handle on the store at loc; a test may open several
	// on one location, as replicas or an operator's CLI beside serve do.
	Open func(ctx context.Context, loc string, log *slog.Logger, opts store.Options) (*store.DB, error)
}

// tests are the suite, by name.
var tests = []struct {
	name string
	fn   func(*testing.T, Engine)
}{
	{"RecordDeliveryStoresRawBodyAndJob", testRecordDeliveryStoresRawBodyAndJob},
	{"RecordDeliveryRejectsIncompleteInput", testRecordDeliveryRejectsIncompleteInput},
	{"RecordDeliveryJobLifecycle", testRecordDeliveryJobLifecycle},
	{"RecordDeliveryCancelsInstallation", testRecordDeliveryCancelsInstallation},
	{"RecordDeliveryAfterCloseFails", testRecordDeliveryAfterCloseFails},
	{"SameDeliveryConcurrently", testSameDeliveryConcurrently},
	{"ClaimLeaseAndFencing", testClaimLeaseAndFencing},
	{"RetryBackoffDeadAndFailed", testRetryBackoffDeadAndFailed},
	{"ExpiredLastLeaseEndsDead", testExpiredLastLeaseEndsDead},
	{"SupersedeStandalone", testSupersedeStandalone},
	{"RerunDoneAndDeadJobs", testRerunDoneAndDeadJobs},
	{"RerunOfOlderHeadIsNotRevived", testRerunOfOlderHeadIsNotRevived},
	{"RerunByHeadOverTwoPullRequests", testRerunByHeadOverTwoPullRequests},
	{"LabelAfterSkippedRunRequeues", testLabelAfterSkippedRunRequeues},
	{"NewDeliveryRequeuesDeadAndFailedJobs", testNewDeliveryRequeuesDeadAndFailedJobs},
	{"StaleDeliveryLeavesDeadJobDead", testStaleDeliveryLeavesDeadJobDead},
	{"MarkPostedMerges", testMarkPostedMerges},
	{"ListJobs", testListJobs},
	{"RetryJob", testRetryJob},
	{"CancelJobFromAnotherHandle", testCancelJobFromAnotherHandle},
	{"DashboardViews", testDashboardViews},
	{"QueueStats", testQueueStats},
	{"CommandDeliveries", testCommandDeliveries},
	{"FinishShadow", testFinishShadow},
	{"JobAttempts", testJobAttempts},
	{"CostsByRepo", testCostsByRepo},
	{"BaseResults", testBaseResults},
	{"PruneBaseResults", testPruneBaseResults},
	{"BaseAndRetryLanes", testBaseAndRetryLanes},
}

// Run runs the whole suite on e, each test in a subtest of its name.
func Run(t *testing.T, e Engine) {
	for _, c := range tests {
		t.Run(c.name, func(t *testing.T) { c.fn(t, e) })
	}
}

// OpenAt opens a handle on the store at loc and closes it at the end of
// the test.
func (e Engine) OpenAt(t testing.TB, loc string, opts store.Options) *store.DB {
	t.Helper()
	db, err := e.Open(context.Background(), loc, Logger(t), opts)
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Errorf("close store: %v", err)
		}
	})
	return db
}

// openTest opens a fresh store of e and returns it with its location.
func (e Engine) openTest(t testing.TB, c *Clock) (*store.DB, string) {
	t.Helper()
	loc := e.NewLocation(t)
	return e.OpenAt(t, loc, store.Options{Now: c.Now, Jitter: func() float64 { return 0.5 }}), loc
}

// Clock is a settable test clock.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock is a clock at 2026-03-01 12:00 UTC.
func NewClock() *Clock { return &Clock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)} }

func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// Logger logs to stderr under -v, else nowhere.
func Logger(t testing.TB) *slog.Logger {
	t.Helper()
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// Payload is a real pull_request delivery body.
func Payload(t testing.TB) []byte {
	t.Helper()
	b, err := os.ReadFile(shared.Data(t, "webhooks", "pull_request", "opened.json"))
	if err != nil {
		t.Fatalf("read payload: %v", err)
	}
	return b
}

// Delivery is a queued pull_request delivery of Codertocat/Hello-World#2.
func Delivery(id string, body []byte, at time.Time) validation.Delivery {
	return validation.Delivery{
		ID: id, Event: "pull_request", Action: "opened", InstallationID: 1,
		Repo: "Codertocat/Hello-World", PR: 2, HeadSHA: "ec26c3e57ca3a959ca5aad62de7213c562f8c821",
		ReceivedAt: at, Status: validation.DeliveryQueued, Body: body,
	}
}

// Spec is the job of Codertocat/Hello-World#2 at head.
func Spec(head string, updated time.Time) *validation.JobSpec {
	return &validation.JobSpec{
		Repo: "Codertocat/Hello-World", PR: 2, HeadSHA: head, HeadRepo: "Codertocat/Hello-World",
		BaseRef: "master", InstallationID: 1, Trigger: "opened", PRUpdatedAt: updated,
	}
}

// SHA is the n-th head sha.
func SHA(n int) string { return fmt.Sprintf("%040x", n) }

// Record records a delivery, failing the test on an error.
func Record(t testing.TB, db *store.DB, d validation.Delivery, j *validation.JobSpec) validation.RecordResult {
	t.Helper()
	res, err := db.RecordDelivery(context.Background(), d, j)
	if err != nil {
		t.Fatalf("record delivery %s: %v", d.ID, err)
	}
	return res
}

// State reads a job's state, failing the test on an error.
func State(t testing.TB, db *store.DB, id int64) store.JobStatus {
	t.Helper()
	st, err := db.JobState(context.Background(), id)
	if err != nil {
		t.Fatalf("job state %d: %v", id, err)
	}
	return st
}

// Claim claims a job, failing the test on an error.
func Claim(t testing.TB, db *store.DB, owner string, ttl time.Duration) (store.Job, bool) {
	t.Helper()
	j, ok, err := db.Claim(context.Background(), owner, ttl)
	if err != nil {
		t.Fatalf("claim: %v", err)
	}
	return j, ok
}

// Ptr is a pointer to v.
func Ptr[T any](v T) *T { return &v }
