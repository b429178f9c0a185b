package main

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gilf-review/gilf/store"
)

// jobsMarker is the slow step's sleep, to find its process.
const jobsMarker = "7.4243"

// TestServeJobsCancelRetryBackup runs gilf serve and, beside it, the
// operator's commands on its data dir: a backup while it works, a cancel
// that stops the running step at the worker's next heartbeat, and a retry
// that runs the job again as a re-run.
func TestServeJobsCancelRetryBackup(t *testing.T) {
	s := startSlowJob(t, "slow", "#!/bin/sh\necho slow test started\nsleep "+jobsMarker+"\necho slow test finished\n", "GILF_JOB_LEASE_MS=3000")
	payload, dataDir, p, db, guid, job := s.payload, s.dataDir, s.p, s.db, s.guid, s.job
	waitJob(t, db, p, job, "running", func(s store.JobStatus) bool { return s.State == store.StateRunning })
	waitStepStarted(t, p, "sleep "+jobsMarker)
	gilf := func(args ...string) (int, string) {
		t.Helper()
		var out bytes.Buffer
		code := run(t.Context(), dataDirEnv(&out, dataDir, nil), args)
		return code, out.String()
	}
	id := strconv.FormatInt(job, 10)

	dest := filepath.Join(t.TempDir(), "backup")
	if code, out := gilf("backup", dest); code != exitOK {
		t.Fatalf("gilf backup beside serve exited %d: %s", code, out)
	}
	cp := openTestStore(t, dest)
	if d, err := cp.Delivery(t.Context(), guid); err != nil || !bytes.Equal(d.Body, payload.body) {
		t.Errorf("the backup's delivery %s: %v (body %d bytes of %d)", guid, err, len(d.Body), len(payload.body))
	}

	code, out := gilf("jobs", "--json")
	var rows []jobRow
	if err := json.Unmarshal([]byte(out), &rows); code != exitOK || err != nil || len(rows) != 1 || rows[0].State != "running" {
		t.Fatalf("gilf jobs --json exited %d (%v): %s", code, err, out)
	}
	if code, out := gilf("jobs", "cancel", id); code != exitOK {
		t.Fatalf("gilf jobs cancel exited %d: %s", code, out)
	}
	cancelled := time.Now()
	// The worker heartbeats every third of the 3 s lease.
	for deadline := cancelled.Add(sandboxGoneBound); len(pidsWithCmdline("sleep "+jobsMarker)) > 0; {
		if time.Now().After(deadline) {
			t.Fatalf("the cancelled job's step still runs after %v:\n%s", sandboxGoneBound, p.stderr.String())
		}
		time.Sleep(servePoll)
	}
	t.Logf("the cancelled job's step was gone %v after the cancel", time.Since(cancelled).Round(time.Millisecond))
	if st := waitJob(t, db, p, job, "cancelled", func(s store.JobStatus) bool { return true }); st.State != store.StateCancelled {
		t.Errorf("after the cancel the job is %+v; want cancelled", st)
	}

	if code, out := gilf("jobs", "retry", id); code != exitOK || !strings.Contains(out, "re-run 1") {
		t.Fatalf("gilf jobs retry exited %d: %s", code, out)
	}
	st := waitJob(t, db, p, job, "finished", func(s store.JobStatus) bool {
		return s.State != store.StateQueued && s.State != store.StateRunning
	})
	if st.State != store.StateDone || st.Reruns != 1 || st.Attempts != 1 {
		t.Errorf("the retried job ended %+v; want done, re-run 1, attempt 1", st)
	}
	if err := p.stop(t, syscall.SIGTERM); err != nil {
		t.Errorf("gilf serve exited with %v after SIGTERM:\n%s", err, p.stderr.String())
	}
}
