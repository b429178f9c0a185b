package main

import (
	"testing"
	"time"

	"github.com/gilf-review/gilf/review/github/githubtest"
	"github.com/gilf-review/gilf/store"
)

// slowJob is gilf serve with one opened pull request delivered, whose test
// step is a shell script that sleeps: a test acts while the step runs and
// finds its processes by the sleep's argument.
type slowJob struct {
	payload prPayload
	srv     *githubtest.Server
	dataDir string
	p       *serveProc
	db      *store.DB // the server's store, read only
	guid    string    // the delivery's
	job     int64
}

// startSlowJob starts gilf serve (env added to serveEnv's) over a GitHub
// stand-in whose head tarball, named name, tests with script, and
// delivers the pull request's opening.
func startSlowJob(t *testing.T, name, script string, env ...string) slowJob {
	t.Helper()
	s := slowJob{payload: openedPayload(t), dataDir: t.TempDir(), guid: newGUID(t)}
	key := newAppKey(t)
	s.srv = fakeGitHub(t, key, s.payload, slowTarball(t, s.payload, name, script))
	s.p = startServe(t, serveEnv(t, s.srv, key, s.dataDir, env...))
	s.db = openTestStore(t, s.dataDir)
	code, rep := deliver(t, s.p.url, s.guid, "pull_request", s.payload.body, signature(serveSecret, s.payload.body))
	if code != 202 || rep.Job == 0 {
		t.Fatalf("delivery answered %d %+v, want 202 with a job", code, rep)
	}
	s.job = rep.Job
	return s
}

// waitStepStarted waits, at most serveJobBound, for a process of gilf
// serve's tree whose command line holds cmdline.
func waitStepStarted(t *testing.T, p *serveProc, cmdline string) {
	t.Helper()
	for deadline := time.Now().Add(serveJobBound); !hasCmdline(descendants(p.cmd.Process.Pid), cmdline); {
		if time.Now().After(deadline) {
			t.Fatalf("the slow step never started:\n%s", p.stderr.String())
		}
		time.Sleep(servePoll)
	}
}
