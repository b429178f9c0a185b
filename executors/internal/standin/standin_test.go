package standin

import (
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestWatch(t *testing.T) {
	tests := []struct {
		name         string
		script       string
		deadline     time.Duration
		wantOut      string
		wantErr      string
		wantTimedOut bool
		within       time.Duration
	}{
		{name: "output in order per stream", script: "echo one; echo two; echo err >&2", wantOut: "one\ntwo\n", within: 10 * time.Second},
		{name: "killed at the deadline", script: "echo start; sleep 30", deadline: 200 * time.Millisecond,
			wantOut: "start\n", wantErr: "signal: killed", wantTimedOut: true, within: 10 * time.Second},
		{name: "background child holding the pipes", script: "echo bye; sleep 30 &", wantOut: "bye\n", within: ReaderGrace + 5*time.Second},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command("sh", "-c", tc.script)
			outR, errR, err := Start(cmd, nil)
			if err != nil {
				t.Fatalf("Start: %v", err)
			}
			var mu sync.Mutex
			got := map[string]string{}
			var timedOut atomic.Bool
			began := time.Now()
			werr := Watch{
				Cmd: cmd, PGID: cmd.Process.Pid, Stdout: outR, Stderr: errR, ChunkBytes: 3,
				Deadline: tc.deadline, TimedOut: func() { timedOut.Store(true) },
				Send: func(stream string, data []byte) {
					if len(data) > 3 {
						t.Errorf("chunk of %d bytes, over 3", len(data))
					}
					mu.Lock()
					got[stream] += string(data)
					mu.Unlock()
				},
			}.Wait()
			if took := time.Since(began); took > tc.within {
				t.Errorf("Wait took %v, want under %v", took, tc.within)
			}
			if (werr == nil) != (tc.wantErr == "") || (werr != nil && werr.Error() != tc.wantErr) {
				t.Errorf("Wait: %v, want %q", werr, tc.wantErr)
			}
			if got["stdout"] != tc.wantOut {
				t.Errorf("stdout %q, want %q", got["stdout"], tc.wantOut)
			}
			if timedOut.Load() != tc.wantTimedOut {
				t.Errorf("timed out %v, want %v", timedOut.Load(), tc.wantTimedOut)
			}
			// A killed member stays a zombie until whatever reaps orphans
			// here does: count the live ones, bounded.
			live := liveInGroup(t, cmd.Process.Pid)
			for i := 0; i < 50 && live > 0; i++ {
				time.Sleep(20 * time.Millisecond)
				live = liveInGroup(t, cmd.Process.Pid)
			}
			if live > 0 {
				t.Errorf("%d processes of the group still live after Wait", live)
			}
		})
	}
}

func TestStartGone(t *testing.T) {
	gone := errors.New("the sandbox is gone")
	cmd := exec.Command("sh", "-c", "exit 0")
	if _, _, err := Start(cmd, gone); !errors.Is(err, gone) {
		t.Fatalf("Start: %v, want the gone error", err)
	}
	if cmd.Process != nil {
		t.Errorf("a process was started for a gone sandbox")
	}
}

// liveInGroup counts the processes of group pgid that are not zombies.
func liveInGroup(t *testing.T, pgid int) int {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	live := 0
	for _, e := range ents {
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // not a process, or gone
		}
		// pid (comm) state ppid pgrp ...: comm may hold spaces, so read
		// after its closing parenthesis.
		i := strings.LastIndexByte(string(b), ')')
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 3 {
			continue
		}
		if f[2] == strconv.Itoa(pgid) && f[0] != "Z" {
			live++
		}
	}
	return live
}
