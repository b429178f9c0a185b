package store_test

import "testing"

// conformance are the tests of the store's contract: what every engine
// must do the same way (intake, jobs and their leases, re-runs, runs,
// operator actions, the dashboard's and the CLI's reads, retention). Each
// takes the engine it runs on as a parameter; TestConformance runs every
// one on every engine. Tests of one engine's machinery (SQLite's WAL,
// busy timeout, file backup; PostgreSQL's replicas) are not in the list.
var conformance = []struct {
	name string
	fn   func(*testing.T, engine)
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
}

// TestConformance runs the conformance suite on each engine.
func TestConformance(t *testing.T) {
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) {
			for _, c := range conformance {
				t.Run(c.name, func(t *testing.T) { c.fn(t, e) })
			}
		})
	}
}
