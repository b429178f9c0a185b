package local

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gilf-review/gilf/validation"
)

// Without a count, the inode count is derived from the size.
func TestDerivedInodes(t *testing.T) {
	for _, tt := range []struct{ bytes, want int64 }{
		{MinDiskBytes, 2048},
		{256 << 20, 32768},
		{DefaultDiskBytes, 1 << 20},
		{MaxDiskBytes, 1 << 29},
		{1, MinDiskInodes},
	} {
		if got := DerivedInodes(tt.bytes); got != tt.want {
			t.Errorf("DerivedInodes(%d) = %d, want %d", tt.bytes, got, tt.want)
		}
		if got := (Options{Disk: DiskLimit{Bytes: tt.bytes}}).withDefaults().Disk.Inodes; got != tt.want {
			t.Errorf("withDefaults: %d inodes for %d bytes, want %d", got, tt.bytes, tt.want)
		}
	}
}

// Runs at 16 MiB, 256 MiB and the default size, each with its derived
// count: mkfs makes every one, and the step sees that many inodes.
func TestDiskCeilingSizes(t *testing.T) {
	for _, size := range []int64{MinDiskBytes, 256 << 20, DefaultDiskBytes} {
		t.Run(strconv.FormatInt(size>>20, 10)+"MiB", func(t *testing.T) {
			e := newExec(t, Options{Disk: DiskLimit{Bytes: size}})
			s := step0(t, runPlan(t, e, repo(t, nil), shStep(validation.StepTest, "df --output=itotal /workspace | tail -1", time.Minute)))
			wantStatus(t, s, validation.StatusPassed)
			got, err := strconv.ParseInt(strings.TrimSpace(s.Output.Head), 10, 64)
			if want := DerivedInodes(size); err != nil || got < want || got > want+want/8 {
				t.Errorf("the run's file system has %q inodes, want %d", s.Output.Head, want)
			}
		})
	}
}

// A size and a count that ext4 cannot make together are refused at New,
// with the largest count that fits; that count is exactly the boundary:
// it fits, one more does not.
func TestDiskInodesRefusedAtStart(t *testing.T) {
	root := workRoot(t)
	_, err := New(nil, Options{WorkRoot: root, SandboxUID: testUID(t), SandboxGID: testUID(t), Disk: DiskLimit{Bytes: 256 << 20, Inodes: 1_000_000}})
	if err == nil {
		t.Fatal("New took 1,000,000 inodes on 256 MiB")
	}
	m := regexp.MustCompile(`the largest count that fits is (\d+)`).FindStringSubmatch(err.Error())
	if m == nil {
		t.Fatalf("New: %v; want the largest count that fits", err)
	}
	largest, _ := strconv.ParseInt(m[1], 10, 64)
	img := filepath.Join(t.TempDir(), "fit.img")
	if err := os.WriteFile(img, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, 256<<20); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := runMkfs(ctx, DefaultMkfsPath, img, largest, true); err != nil {
		t.Errorf("the largest count %d does not fit: %v", largest, err)
	}
	if err := runMkfs(ctx, DefaultMkfsPath, img, largest+1, true); err == nil {
		t.Errorf("%d fits too: %d is not the largest", largest+1, largest)
	}
	// At the largest count, New takes it; the check leaves nothing.
	if _, err := New(nil, Options{WorkRoot: root, SandboxUID: testUID(t), SandboxGID: testUID(t), Disk: DiskLimit{Bytes: 256 << 20, Inodes: largest}}); err != nil {
		t.Errorf("New at the largest count: %v", err)
	}
	if entries, _ := os.ReadDir(root); len(entries) != 0 {
		t.Errorf("the check left %v", entries)
	}
}
