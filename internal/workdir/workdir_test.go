package workdir

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"
)

func TestCreateMarksThisProcess(t *testing.T) {
	parent := t.TempDir()
	dir, err := Create(parent, "run-")
	if err != nil {
		t.Fatal(err)
	}
	if !Alive(dir, DefaultGrace, time.Now()) {
		t.Fatal("a directory of this live process is taken for dead")
	}
	removed, err := Sweep(parent, "run-", DefaultGrace, nil)
	if err != nil || len(removed) != 0 {
		t.Fatalf("sweep removed %v (%v) of a live owner", removed, err)
	}
	if _, err := os.Stat(dir); err != nil {
		t.Fatal(err)
	}
}

// A real process that owned a directory and was SIGKILLed: its directory
// goes, and only with the right prefix; a live one stays.
func TestSweepDeadOwner(t *testing.T) {
	parent := t.TempDir()
	live, err := Create(parent, "run-")
	if err != nil {
		t.Fatal(err)
	}
	dead := filepath.Join(parent, "run-dead")
	if err := os.Mkdir(dead, 0o700); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	start, err := startTime(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dead, OwnerFile), []byte(itoa(cmd.Process.Pid)+" "+utoa(start)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if !Alive(dead, DefaultGrace, time.Now()) {
		t.Fatal("the sleeping owner is taken for dead")
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait() // killed: the error is expected
	other := filepath.Join(parent, "other-dead")
	if err := os.Mkdir(other, 0o700); err != nil {
		t.Fatal(err)
	}
	var released []string
	removed, err := Sweep(parent, "run-", DefaultGrace, func(d string) error { released = append(released, filepath.Base(d)); return nil })
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(removed, []string{"run-dead"}) || !slices.Equal(released, []string{"run-dead"}) {
		t.Errorf("removed %v released %v, want only run-dead", removed, released)
	}
	for _, keep := range []string{live, other} {
		if _, err := os.Stat(keep); err != nil {
			t.Errorf("%s: %v", keep, err)
		}
	}
}

// A pid that now names another process (its start time differs) is a
// dead owner; so is garbage. Without a marker, the grace decides.
func TestAliveEdges(t *testing.T) {
	dir := t.TempDir()
	write := func(s string) {
		if err := os.WriteFile(filepath.Join(dir, OwnerFile), []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	start, err := startTime(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	write(itoa(os.Getpid()) + " " + utoa(start+1))
	if Alive(dir, DefaultGrace, now) {
		t.Error("a reused pid is alive")
	}
	write("not a marker")
	if Alive(dir, DefaultGrace, now) {
		t.Error("garbage is alive")
	}
	if err := os.Remove(filepath.Join(dir, OwnerFile)); err != nil {
		t.Fatal(err)
	}
	if !Alive(dir, time.Hour, now) {
		t.Error("a fresh directory without a marker is dead within the grace")
	}
	if Alive(dir, time.Minute, now.Add(2*time.Minute)) {
		t.Error("an old directory without a marker is alive")
	}
}

func itoa(n int) string    { return strconv.Itoa(n) }
func utoa(n uint64) string { return strconv.FormatUint(n, 10) }
