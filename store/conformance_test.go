package store_test

import "testing"

// conformance are the tests of the store's contract: what every engine
// must do the same way (intake, jobs and their leases, re-runs, runs,
// operator actions, the dashboard's and the CLI's reads, retention).
// TestPostgres runs each again on PostgreSQL; run on their own, they test
// SQLite. Tests of one engine's machinery (SQLite's WAL, body log, busy
// timeout, file backup) are not in the list.
var conformance = []struct {
	name string
	fn   func(*testing.T)
}{
	{"RecordDeliveryStoresRawBodyAndJob", TestRecordDeliveryStoresRawBodyAndJob},
	{"RecordDeliveryRejectsIncompleteInput", TestRecordDeliveryRejectsIncompleteInput},
	{"RecordDeliveryJobLifecycle", TestRecordDeliveryJobLifecycle},
	{"RecordDeliveryCancelsInstallation", TestRecordDeliveryCancelsInstallation},
	{"RecordDeliveryAfterCloseFails", TestRecordDeliveryAfterCloseFails},
	{"SameDeliveryConcurrently", TestSameDeliveryConcurrently},
	{"ClaimLeaseAndFencing", TestClaimLeaseAndFencing},
	{"RetryBackoffDeadAndFailed", TestRetryBackoffDeadAndFailed},
	{"ExpiredLastLeaseEndsDead", TestExpiredLastLeaseEndsDead},
	{"SupersedeStandalone", TestSupersedeStandalone},
	{"RerunDoneAndDeadJobs", TestRerunDoneAndDeadJobs},
	{"RerunOfOlderHeadIsNotRevived", TestRerunOfOlderHeadIsNotRevived},
	{"RerunByHeadOverTwoPullRequests", TestRerunByHeadOverTwoPullRequests},
	{"LabelAfterSkippedRunRequeues", TestLabelAfterSkippedRunRequeues},
	{"NewDeliveryRequeuesDeadAndFailedJobs", TestNewDeliveryRequeuesDeadAndFailedJobs},
	{"StaleDeliveryLeavesDeadJobDead", TestStaleDeliveryLeavesDeadJobDead},
	{"MarkPostedMerges", TestMarkPostedMerges},
	{"ListJobs", TestListJobs},
	{"RetryJob", TestRetryJob},
	{"CancelJobFromAnotherHandle", TestCancelJobFromAnotherHandle},
	{"DashboardViews", TestDashboardViews},
	{"QueueStats", TestQueueStats},
	{"BaseResults", TestBaseResults},
	{"BaseAndRetryLanes", TestBaseAndRetryLanes},
}

// TestPostgres is the conformance suite on PostgreSQL: each test opens
// its stores in a database of its own on the package's server.
func TestPostgres(t *testing.T) {
	for _, c := range conformance {
		t.Run(c.name, c.fn)
	}
}
