// Package validation is gilf's domain: it turns a repository's package.json
// into a Plan, describes how each step ended, and derives the outcome,
// findings and the validation record from what the executor observed.
// It imports only the standard library; every other package points here.
package validation

import (
	"math"
	"strconv"
	"strings"
	"time"
)

// Step names, in the order a plan runs them. No other script is discovered.
const (
	StepInstall   = "install"
	StepTest      = "test"
	StepTypecheck = "typecheck"
	StepLint      = "lint"
	StepBuild     = "build"
)

// ScriptNames are the package.json scripts a plan selects, in order.
var ScriptNames = [...]string{StepTest, StepTypecheck, StepLint, StepBuild}

// PackageManager names the tool that installs and runs scripts.
type PackageManager string

const (
	NPM       PackageManager = "npm"
	Yarn      PackageManager = "yarn"       // classic, 1.x
	YarnBerry PackageManager = "yarn-berry" // 2.x and later
	PNPM      PackageManager = "pnpm"
	Bun       PackageManager = "bun"
)

// Network is the egress a step is given.
type Network string

const (
	// NetworkNone: the step's own network namespace, with nothing in it
	// but its loopback.
	NetworkNone Network = "none"
	// NetworkRegistry: the package registries of the allow-list and
	// nothing else (the install step). Locally that is gilf's forward
	// proxy; remote executors ask their provider for the same list.
	NetworkRegistry Network = "registry"
	// NetworkHost: the host's own network. gilf never gives it to a step
	// it sandboxes; only tier none (no namespaces at all) records it.
	NetworkHost Network = "host"
	// NetworkFull is the self-host command's "all network" intent
	// (GILF_SELF_HOST_NETWORK=full): the command decides what it means.
	NetworkFull Network = "full"
)

// Step is one command of a plan. Argv is never given to a shell by the host;
// executors that take one shell quote it themselves (see the marker shell).
type Step struct {
	Name    string        `json:"name"`
	Argv    []string      `json:"command"`
	Script  string        `json:"script,omitempty"` // the package.json script body; empty for install
	Network Network       `json:"network"`
	Timeout time.Duration `json:"-"`
	// Inconclusive, when set, says why this script can prove nothing
	// (npm's default test, `true`, `exit 0`, a bare echo). Such a step is
	// recorded with status inconclusive and is not run as proof.
	Inconclusive string `json:"inconclusive,omitempty"`
}

// GapReason names why a plan has nothing to run.
type GapReason string

const (
	GapNoManifest          GapReason = "no_manifest"
	GapManifestUnreadable  GapReason = "manifest_unreadable"
	GapManifestSymlink     GapReason = "manifest_symlink"
	GapManifestTooLarge    GapReason = "manifest_too_large"
	GapManifestUnparseable GapReason = "manifest_unparseable"
	GapScriptsInvalid      GapReason = "scripts_invalid"
	GapNoScripts           GapReason = "no_scripts"
	// GapManifestNotRegular: package.json is a directory, FIFO, socket or
	// device; it is never opened.
	GapManifestNotRegular GapReason = "manifest_not_regular"
)

// Gap is a plan with nothing to run: never a pass.
type Gap struct {
	Reason GapReason `json:"reason"`
	Msg    string    `json:"message"`
}

// Plan is what gilf will run for one checkout.
type Plan struct {
	PackageManager PackageManager `json:"packageManager"`
	// PackageManagerSource says how the manager was chosen:
	// "packageManager field", a lockfile name, or "default".
	PackageManagerSource string `json:"packageManagerSource"`
	Lockfile             string `json:"lockfile,omitempty"`
	// Tool is the package manager version the checkout pins, which the
	// executor provides.
	Tool ToolRequest `json:"tool"`
	// Node is the node version the checkout asks for, nil when it names
	// none.
	Node *NodeRequirement `json:"node,omitempty"`
	// Steps in run order: install first (when any script is runnable),
	// then the selected scripts. Inconclusive scripts stay in the list
	// with Inconclusive set so the record shows them in place.
	Steps []Step `json:"steps"`
	Gap   *Gap   `json:"gap,omitempty"`
	// Notes are plain-words observations for the record (for example,
	// lifecycle hooks npm will run around a script, or ignored
	// malformed script values).
	Notes []string `json:"notes,omitempty"`
	// Env are the non-secret variables the repository sets for its steps
	// (validation.env in its base-branch config), each admitted by
	// CheckStepEnv. Executors set them under their own: a variable the
	// executor sets (HOME, PATH, CI, the proxy) always wins.
	Env map[string]string `json:"env,omitempty"`
}

// Status is how one step ended. Exactly one per step.
type Status string

const (
	StatusPassed       Status = "passed"
	StatusFailed       Status = "failed"
	StatusTimedOut     Status = "timed_out"
	StatusKilled       Status = "killed"
	StatusNotRun       Status = "not_run"
	StatusInconclusive Status = "inconclusive"
)

// Outcome is how a whole run ended (DESIGN.md "Outcomes").
type Outcome string

const (
	OutcomePassed       Outcome = "passed"
	OutcomeFailed       Outcome = "failed"
	OutcomeGap          Outcome = "gap"
	OutcomeSkipped      Outcome = "skipped"
	OutcomeRefused      Outcome = "refused"
	OutcomeInconclusive Outcome = "inconclusive"
	OutcomeError        Outcome = "error"
)

// Tier is the isolation an executor actually established, strongest first.
type Tier string

const (
	TierReadOnly  Tier = "read-only"
	TierNoNetwork Tier = "no-network"
	TierNone      Tier = "none"
	// TierRemote is reported by executors whose isolation is a remote
	// machine gilf does not observe.
	TierRemote Tier = "remote"
)

// Output is what was kept of one step's combined stdout and stderr: the
// head and the tail around what was cut, already redacted. Bytes and
// SHA256 describe the whole stream as it was read.
type Output struct {
	Head       string `json:"head"`
	Tail       string `json:"tail,omitempty"`
	Bytes      int64  `json:"outputBytes"`
	SHA256     string `json:"outputSha256,omitempty"`
	Truncated  bool   `json:"truncated"`
	Redactions int    `json:"redactions"`
}

// StepResult is how one planned step ended.
type StepResult struct {
	Name       string        `json:"name"`
	Argv       []string      `json:"command"`
	Cwd        string        `json:"cwd"`
	TimeoutMs  int64         `json:"timeoutMs"`
	Network    Network       `json:"network"`
	Status     Status        `json:"status"`
	ExitCode   *int          `json:"exitCode"`
	Signal     string        `json:"signal,omitempty"`
	Duration   time.Duration `json:"-"`
	DurationMs int64         `json:"durationMs"`
	Output     Output        `json:"output"`
	// Reported is true when the status comes from markers the executor
	// printed rather than from a wait status the host observed.
	Reported bool `json:"reportedByExecutor"`
	// Reason says in plain words why the step ended as it did when the
	// status alone does not (memory limit, output limit, timeout, not run
	// because install failed, inconclusive script).
	Reason string `json:"reason,omitempty"`
	// Egress records what the step's network allowed and what it tried;
	// nil for a step that did not run.
	Egress *Egress `json:"egress,omitempty"`
	// Origin says whose a failed step's failure is (Attribute); "" for
	// a step that did not fail or was never compared.
	Origin Origin `json:"origin,omitempty"`
	// Failures are the failures parsed from a failed step's output,
	// each with its origin.
	Failures []StepFailure `json:"failures,omitempty"`
}

// Severity of a finding.
type Severity string

const (
	SeverityBlocker Severity = "blocker"
	SeverityHigh    Severity = "high"
	SeverityMedium  Severity = "medium"
	SeverityLow     Severity = "low"
)

// EvidenceRef points at a persisted artifact. It is attached only after the
// store accepted the upload.
type EvidenceRef struct {
	Kind string `json:"kind"`
	Key  string `json:"key,omitempty"`
	URL  string `json:"url,omitempty"`
	ID   string `json:"id,omitempty"`
	// URLExpiresAt, when set, is when a presigned URL stops working.
	// Zero for permanent (public base) URLs and for key-only references.
	URLExpiresAt time.Time `json:"urlExpiresAt,omitzero"`
}

// Finding is one problem the review reports.
type Finding struct {
	Severity Severity `json:"severity"`
	Step     string   `json:"step,omitempty"`
	Path     string   `json:"path"` // may be empty: validation failures have no line
	Title    string   `json:"title"`
	Body     string   `json:"body"`
	// ExecutionClaim marks a finding that claims something ran and failed;
	// the evidence require step applies to these.
	ExecutionClaim   bool          `json:"executionClaim"`
	Evidence         []EvidenceRef `json:"evidence,omitempty"`
	EvidenceStatus   string        `json:"evidenceStatus,omitempty"`
	DowngradedReason string        `json:"downgradedReason,omitempty"`
}

// Platform describes where the steps ran.
type Platform struct {
	OS                    string `json:"os"`
	Arch                  string `json:"arch"`
	Kernel                string `json:"kernel,omitempty"`
	Node                  string `json:"node,omitempty"`
	PackageManagerVersion string `json:"packageManagerVersion,omitempty"`
}

// Secret is a value that must never be stored or printed. Name is what the
// record shows; Value never leaves the process.
type Secret struct {
	Name  string
	Value string
}

// Record is the validation record of SPEC §3.5: everything a reviewer needs
// to judge what ran, where, and how it ended. Every run keeps one, whatever
// its outcome; the review shows it and the store keeps it whole.
type Record struct {
	Outcome        Outcome        `json:"outcome"`
	Reason         string         `json:"reason,omitempty"`
	Refusal        *Refusal       `json:"refusal"`
	Gap            *Gap           `json:"gap,omitempty"`
	Executor       string         `json:"executor"`
	IsolationTier  Tier           `json:"isolationTier"`
	PackageManager PackageManager `json:"packageManager"`
	Platform       Platform       `json:"platform"`
	Steps          []StepResult   `json:"steps"`
	Findings       []Finding      `json:"findings"`
	// ReportedByExecutor is true when step statuses come from the
	// executor's markers, not from wait statuses the host observed.
	ReportedByExecutor bool      `json:"reportedByExecutor"`
	Integrity          string    `json:"integrity,omitempty"`
	Redactions         int       `json:"redactions"`
	SecretsWithheld    []string  `json:"secretsWithheld,omitempty"`
	Notes              []string  `json:"notes,omitempty"`
	Started            time.Time `json:"started"`
	Finished           time.Time `json:"finished"`
	// Controls are the decisions of the controls that guard a run (SPEC
	// §7), recorded whether they passed or not.
	Controls []ControlDecision `json:"controls,omitempty"`
	// VCPU and MemoryGiB are what the executor gave the run, for cost
	// estimates; zero when unknown.
	VCPU      float64 `json:"vcpu,omitempty"`
	MemoryGiB float64 `json:"memoryGib,omitempty"`
	// Phases are where the run's time went, in order: the executor's
	// own phases (preparing the workspace, the package manager, the
	// probe, each step, cleaning up), so the fixed cost of a run can be
	// seen. Empty when the executor does not time them.
	Phases []Phase `json:"phases,omitempty"`
	// Base is the comparison with the pull request's base (SPEC
	// §3.4.1), nil when nothing failed or nothing was compared.
	Base *BaseRun `json:"base,omitempty"`
}

// Phase is one timed part of a run.
type Phase struct {
	Name string `json:"name"`
	Ms   int64  `json:"ms"`
}

// Intake (SPEC §1). The webhook hands these to the store in one call; they
// live here because both sides use them and neither imports the other.

// DeliveryStatus says what intake did with a delivery.
type DeliveryStatus string

const (
	DeliveryQueued   DeliveryStatus = "queued"   // a job was created or the delivery attached to one
	DeliveryIgnored  DeliveryStatus = "ignored"  // an event or action gilf does not act on
	DeliverySkipped  DeliveryStatus = "skipped"  // an actionable event skipped by policy (draft, no head repo)
	DeliveryRecorded DeliveryStatus = "recorded" // ping and App lifecycle events
	DeliveryInvalid  DeliveryStatus = "invalid"  // signed, but the payload could not be decoded
)

// Delivery is one webhook delivery as received. Body is the raw signed
// body, kept whole.
type Delivery struct {
	ID             string // X-GitHub-Delivery
	Event          string // X-GitHub-Event
	Action         string
	InstallationID int64 // 0: the payload carried no installation object
	Repo           string
	PR             int
	HeadSHA        string
	ReceivedAt     time.Time
	Status         DeliveryStatus
	Reason         string
	Body           []byte
	// Cancel, when set, cancels an installation's unfinished jobs in the
	// same transaction that records the delivery.
	Cancel *Cancellation
	// Rerun, when set, queues finished jobs again in the same transaction
	// that records the delivery (GitHub's Re-run button).
	Rerun *Rerun
}

// Cancellation cancels the queued and running jobs of an installation: of
// every repository when Repos is empty, else of those named.
type Cancellation struct {
	InstallationID int64
	Repos          []string
	// PR, when set, limits the cancellation to that pull request of Repos
	// (a closed pull request).
	PR     int
	Reason string
}

// JobSpec is the review job a delivery asks for. Jobs are unique by
// (Repo, PR, HeadSHA): a second trigger for the same head attaches to the
// existing job.
type JobSpec struct {
	Repo           string
	PR             int
	HeadSHA        string
	HeadRepo       string
	BaseRef        string
	InstallationID int64 // 0: none; the job ends with CodeInstallationMissing
	Trigger        string
	// PRUpdatedAt orders deliveries of one pull request: a job for an
	// older update never supersedes one for a newer update.
	PRUpdatedAt time.Time
}

// RecordResult is what recording a delivery did.
type RecordResult struct {
	Duplicate  bool   // the delivery id was already stored; nothing was done
	JobID      int64  // the job the delivery created or attached to; 0 when none
	JobCreated bool   // false when the delivery attached to an existing job
	JobState   string // the job's state after recording
	Superseded int    // jobs of older heads of the same PR that were superseded
	Cancelled  int    // jobs cancelled by Delivery.Cancel
	Rerun      int    // jobs queued again by Delivery.Rerun
}

// Rerun asks for finished jobs of a repository to run again: the job
// JobID, or when JobID is 0 the newest job of each pull request at
// HeadSHA. A queued or running job is left as it is, and a job whose head
// is no longer its pull request's newest is not revived.
type Rerun struct {
	Repo           string
	InstallationID int64
	JobID          int64 // 0: every pull request's job at HeadSHA
	// Store is the store the check run's external_id names (MarkerID), ""
	// when it names none: a job of another store is not this store's job
	// of the same number.
	Store   string
	HeadSHA string
	Reason  string
}

// maxPublicationIDLen bounds a publication id: an int64, a dot and an
// int32.
const maxPublicationIDLen = 19 + 1 + 10

// PublicationID is what identifies one run of a job on GitHub (the check
// run's external_id): the job id in decimal, and ".<rerun>" once the job
// was re-run.
func PublicationID(jobID int64, rerun int) string {
	id := strconv.FormatInt(jobID, 10)
	if rerun == 0 {
		return id
	}
	return id + "." + strconv.Itoa(rerun)
}

// storeIDLen is the length of a store's id (store.StoreID): 16
// lower-case hex digits.
const storeIDLen = 16

// MarkerID is what names one run of a job on GitHub when the store is
// known: "<store id>-<PublicationID>". It is the check run's external_id
// and the job marker of gilf's reviews, so a post of another store (a
// reset database counting from job 1 again, a move to another engine) is
// never taken for this store's. An empty store gives the bare
// PublicationID (what gilf wrote before stores were named).
func MarkerID(store string, jobID int64, rerun int) string {
	if store == "" {
		return PublicationID(jobID, rerun)
	}
	return store + "-" + PublicationID(jobID, rerun)
}

// ParseMarkerID reads a MarkerID back, or a bare PublicationID (store
// ""). It is as strict as ParsePublicationID; a store is exactly 16
// lower-case hex digits.
func ParseMarkerID(s string) (store string, jobID int64, rerun int, ok bool) {
	if st, rest, found := strings.Cut(s, "-"); found {
		if !isStoreID(st) {
			return "", 0, 0, false
		}
		jobID, rerun, ok = ParsePublicationID(rest)
		if !ok {
			return "", 0, 0, false
		}
		return st, jobID, rerun, true
	}
	jobID, rerun, ok = ParsePublicationID(s)
	return "", jobID, rerun, ok
}

func isStoreID(s string) bool {
	if len(s) != storeIDLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		if (s[i] < '0' || s[i] > '9') && (s[i] < 'a' || s[i] > 'f') {
			return false
		}
	}
	return true
}

// ParsePublicationID reads a PublicationID back. It is strict: decimal
// digits, optionally "." and more digits, no sign, no leading zeros, a
// positive job id, bounded length; anything else is not ok.
func ParsePublicationID(s string) (jobID int64, rerun int, ok bool) {
	if len(s) == 0 || len(s) > maxPublicationIDLen {
		return 0, 0, false
	}
	job, rest, dotted := strings.Cut(s, ".")
	jobID, ok = publicationNumber(job)
	if !ok || jobID == 0 {
		return 0, 0, false
	}
	if !dotted {
		return jobID, 0, true
	}
	r, ok := publicationNumber(rest)
	if !ok || r == 0 || r > math.MaxInt32 {
		return 0, 0, false
	}
	return jobID, int(r), true
}

// publicationNumber parses a canonical non-negative decimal: digits
// only, no leading zero (but "0" itself).
func publicationNumber(s string) (int64, bool) {
	if len(s) == 0 || len(s) > 1 && s[0] == '0' {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}
