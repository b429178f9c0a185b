package crabbox

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// MaxTimingLineBytes bounds the timing JSON line read from the CLI's
// stderr; the CLI's own record is a few hundred bytes.
const MaxTimingLineBytes = 64 << 10

// Timing is the record `crabbox run --timing-json` prints as the last line
// of its stderr (crabbox internal/cli/timing.go, TimingReport). Fields gilf
// does not use are ignored; provider, exitCode, commandMs and totalMs are
// required.
type Timing struct {
	Provider      string `json:"provider"`
	LeaseID       string `json:"leaseId,omitempty"`
	Slug          string `json:"slug,omitempty"`
	LeaseMs       int64  `json:"leaseMs,omitempty"`
	BootstrapMs   int64  `json:"bootstrapMs,omitempty"`
	SyncMs        int64  `json:"syncMs"`
	SyncSkipped   bool   `json:"syncSkipped"`
	SyncDelegated bool   `json:"syncDelegated,omitempty"`
	CommandMs     int64  `json:"commandMs"`
	TotalMs       int64  `json:"totalMs"`
	EndToEndMs    int64  `json:"endToEndMs"`
	ExitCode      int    `json:"exitCode"`
	// RunStatus is succeeded, failed, timed-out or canceled.
	RunStatus string `json:"runStatus,omitempty"`
	// ErrorKind is command-exit, timeout, canceled or provider-error.
	ErrorKind    string `json:"errorKind,omitempty"`
	RunID        string `json:"runId,omitempty"`
	MachineType  string `json:"machineType,omitempty"`
	Workdir      string `json:"workdir,omitempty"`
	BlockedStage string `json:"blockedStage,omitempty"`
	RetryLikely  string `json:"retryLikely,omitempty"`
}

// ErrNoTiming is returned by ParseTiming when stderr holds no line at all.
var ErrNoTiming = errors.New("no timing JSON on stderr")

// ParseTiming reads the timing record from the end of the CLI's stderr:
// the last non-empty line must be one JSON object, with the required
// fields present and every known field of its documented type. Unknown
// fields are tolerated; trailing bytes after the object are not.
func ParseTiming(stderrTail []byte) (Timing, error) {
	var t Timing
	line := lastLine(stderrTail)
	if len(line) == 0 {
		return t, ErrNoTiming
	}
	if len(line) > MaxTimingLineBytes {
		return t, fmt.Errorf("timing JSON line is %d bytes, over %d", len(line), MaxTimingLineBytes)
	}
	if line[0] != '{' {
		return t, fmt.Errorf("%w: its last line is not a JSON object", ErrNoTiming)
	}
	var present map[string]json.RawMessage
	if err := strictUnmarshal(line, &present); err != nil {
		return t, fmt.Errorf("timing JSON: %w", err)
	}
	var missing []string
	for _, k := range []string{"provider", "exitCode", "commandMs", "totalMs"} {
		if v, ok := present[k]; !ok || string(v) == "null" {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		return t, fmt.Errorf("timing JSON lacks %s", strings.Join(missing, ", "))
	}
	if err := strictUnmarshal(line, &t); err != nil {
		return t, fmt.Errorf("timing JSON: %w", err)
	}
	return t, nil
}

func strictUnmarshal(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("trailing data after the object")
	}
	return nil
}

func lastLine(b []byte) []byte {
	b = bytes.TrimRight(b, " \t\r\n")
	if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
		b = b[i+1:]
	}
	return bytes.TrimSpace(b)
}

// note describes the timing for the record.
func (t Timing) note() string {
	var b strings.Builder
	fmt.Fprintf(&b, "crabbox provider %s", t.Provider)
	for _, kv := range [][2]string{{"lease", t.LeaseID}, {"slug", t.Slug}, {"run", t.RunID}, {"machine", t.MachineType}, {"runStatus", t.RunStatus}, {"errorKind", t.ErrorKind}} {
		if kv[1] != "" {
			fmt.Fprintf(&b, " %s %s", kv[0], kv[1])
		}
	}
	fmt.Fprintf(&b, "; lease %dms, bootstrap %dms, sync %dms", t.LeaseMs, t.BootstrapMs, t.SyncMs)
	if t.SyncSkipped {
		b.WriteString(" (skipped)")
	}
	fmt.Fprintf(&b, ", command %dms, total %dms, exit %d", t.CommandMs, t.TotalMs, t.ExitCode)
	return b.String()
}
