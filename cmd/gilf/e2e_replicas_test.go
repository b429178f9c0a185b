package main

import (
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gilf-review/gilf/internal/pgtest"
	"github.com/gilf-review/gilf/review/github/githubtest"
	"github.com/gilf-review/gilf/store"
	"github.com/gilf-review/gilf/store/postgres"
)

// pg is the package's PostgreSQL server (TestMain).
var pg *pgtest.Server

// replicaMarker makes the replica test's sleeping step findable in /proc.
const replicaMarker = "7.4243"

// TestServeReplicasOnPostgres runs three `gilf serve` replicas on one
// PostgreSQL database, each with its own (disposable) data directory. The
// same delivery sent to all three at once is recorded once and answered
// 2xx by each; a second delivery for the same head attaches to the same
// job; the replica that runs the job is SIGKILLed mid-validation, another
// rescues the job when its lease expires, and the pull request gets
// exactly one review and one completed check run.
func TestServeReplicasOnPostgres(t *testing.T) {
	payload := openedPayload(t)
	slow := slowTarball(t, payload, "slow", "#!/bin/sh\necho slow test started\nsleep "+replicaMarker+"\necho slow test finished\n")
	key := newAppKey(t)
	srv := fakeGitHub(t, key, payload, slow)
	dsn := pg.NewDatabase(t)
	replicas := make([]*serveProc, 3)
	for i := range replicas {
		replicas[i] = startServe(t, serveEnv(t, srv, key, t.TempDir(), "GILF_JOB_LEASE_MS=3000",
			"GILF_DATABASE_URL="+dsn, "GILF_DATABASE_MAX_CONNS=4"))
	}
	db, err := postgres.Open(t.Context(), dsn, slog.New(slog.DiscardHandler), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Error(err)
		}
	})

	// The same delivery to every replica at once.
	guid := newGUID(t)
	sig := signature(serveSecret, payload.body)
	codes := make([]int, len(replicas))
	replies := make([]deliveryReply, len(replicas))
	var wg sync.WaitGroup
	for i, r := range replicas {
		wg.Go(func() { codes[i], replies[i] = deliver(t, r.url, guid, "pull_request", payload.body, sig) })
	}
	wg.Wait()
	var job int64
	for i := range replicas {
		if codes[i] < 200 || codes[i] > 299 {
			t.Fatalf("replica %d answered %d %+v", i, codes[i], replies[i])
		}
		job = max(job, replies[i].Job)
	}
	if n, err := db.CountDeliveries(t.Context()); err != nil || n != 1 || job == 0 {
		t.Fatalf("%d deliveries recorded (%v), job %d; want 1 and a job: %+v", n, err, job, replies)
	}
	// Another delivery for the same head, to another replica: one job.
	if code, rep := deliver(t, replicas[2].url, newGUID(t), "pull_request", payload.body, sig); code != 202 || rep.Job != job {
		t.Fatalf("second delivery answered %d %+v, want 202 for job %d", code, rep, job)
	}

	// Find the replica running the step and kill it.
	running := waitJob(t, db, replicas[0], job, "running", func(s store.JobStatus) bool {
		return s.State == store.StateRunning
	})
	var victim *serveProc
	for deadline := time.Now().Add(serveJobBound); victim == nil; {
		for _, r := range replicas {
			if hasCmdline(descendants(r.cmd.Process.Pid), "sleep "+replicaMarker) {
				victim = r
			}
		}
		if victim == nil && time.Now().After(deadline) {
			t.Fatalf("no replica started the sleeping step (job %+v)", running)
		}
		time.Sleep(servePoll)
	}
	if owner := ownerPid(running.LeaseOwner); owner != victim.cmd.Process.Pid {
		t.Fatalf("lease owner %q is not the replica (pid %d) running the step", running.LeaseOwner, victim.cmd.Process.Pid)
	}
	if err := victim.stop(t, syscall.SIGKILL); err == nil {
		t.Fatal("gilf serve exited 0 after SIGKILL")
	}
	var survivor *serveProc
	for _, r := range replicas {
		if r != victim {
			survivor = r
			break
		}
	}
	st := waitJob(t, db, survivor, job, "finished", func(s store.JobStatus) bool {
		return s.State != store.StateQueued && s.State != store.StateRunning
	})
	if st.State != store.StateDone || st.Attempts != 2 || st.LeaseGen != running.LeaseGen+1 || st.Triggers != 2 {
		t.Errorf("job ended %s after %d attempts at gen %d with %d triggers (last error %q); want done after 2 at gen %d with 2",
			st.State, st.Attempts, st.LeaseGen, st.Triggers, st.LastError, running.LeaseGen+1)
	}
	if ownerPid(st.LeaseOwner) == victim.cmd.Process.Pid {
		t.Errorf("the killed replica still owns the job")
	}
	if n := srv.Count(githubtest.CreateReview); n != 1 || len(srv.Reviews()) != 1 {
		t.Errorf("%d review posts, %d reviews; want exactly 1", n, len(srv.Reviews()))
	}
	if checks := srv.CheckRuns(); len(checks) != 1 || checks[0]["conclusion"] != "success" {
		t.Errorf("check runs %v; want one, completed success", checks)
	}
	if body, _ := srv.Reviews()[0]["body"].(string); !strings.Contains(body, "passed") {
		t.Errorf("the review does not show a passing run:\n%s", body)
	}
	for _, r := range replicas {
		if r == victim {
			continue
		}
		if err := r.stop(t, syscall.SIGTERM); err != nil {
			t.Errorf("replica exited with %v after SIGTERM:\n%s", err, r.stderr.String())
		}
	}
}

// ownerPid is the pid in a lease owner (host/pid/random/worker: the
// process's workerOwner and the worker's index).
func ownerPid(owner string) int {
	parts := strings.Split(owner, "/")
	if len(parts) < 3 {
		return -1
	}
	pid, err := strconv.Atoi(parts[1])
	if err != nil {
		return -1
	}
	return pid
}

func TestOwnerPid(t *testing.T) {
	for owner, want := range map[string]int{"host/123/ab12/0": 123, "host/123/ab12": 123, "h/x/y": -1, "nohost": -1, fmt.Sprintf("a/%d/b", 7): 7} {
		if got := ownerPid(owner); got != want {
			t.Errorf("ownerPid(%q) = %d, want %d", owner, got, want)
		}
	}
}
