package validation

// ToolRequest is the package manager a plan needs, at the version the
// checkout pins (SPEC §3.2): the packageManager field first, then the
// lockfile kind (pnpm-lock.yaml's lockfileVersion, yarn.lock's format and
// __metadata version, bun's lockfiles), then a Yarn release committed in
// the checkout; see detect for Yarn's precedence. Every plan carries one,
// a gap plan too. gilf provides it; one it cannot provide is a refusal
// (CodePackageManagerUnavailable), never the pull request's failure.
type ToolRequest struct {
	// Manager is always the plan's PackageManager.
	Manager PackageManager `json:"manager"`
	// Version is an exact version ("10.14.0"), a major ("9": the newest
	// stable 9.x), or empty (the newest stable release; for npm, the
	// worker's own npm).
	Version string `json:"version,omitempty"`
	// Hash is the corepack hash of the packageManager field,
	// "<algorithm>.<hex>" (sha1, sha224, sha256, sha512); empty when the
	// field carries none.
	Hash string `json:"hash,omitempty"`
	// Release is a Yarn release committed in the checkout (yarnPath in
	// .yarnrc.yml): a clean path relative to the checkout root that stays
	// inside it. Empty when there is none.
	Release string `json:"release,omitempty"`
	// Source says in plain words where Version came from:
	// "packageManager field", "pnpm-lock.yaml lockfileVersion 9.0",
	// "yarn.lock v1", "yarn.lock __metadata version 8", "yarnPath in
	// .yarnrc.yml", a lockfile's name ("bun.lock", "yarn.lock"), or
	// "default" when nothing pins it.
	Source string `json:"source"`
}

// Tool is a package manager prepared on the worker, ready to be bound
// into a sandbox.
type Tool struct {
	Manager PackageManager `json:"manager"`
	// Version is the exact version prepared.
	Version string `json:"version"`
	// Dir is the host directory holding it, read-only for the sandbox.
	// Dir/bin holds its commands (pnpm, yarn, bun, …) as relative
	// symlinks or scripts that work wherever Dir is mounted.
	Dir string `json:"-"`
	// Integrity says in plain words how its bytes were checked, for the
	// record ("sha512 integrity from the registry; the registry serves
	// no signatures", …).
	Integrity string `json:"integrity"`
}

// ToolBinary is the command of a package manager, as steps call it.
func ToolBinary(pm PackageManager) string { return pmBinary(pm) }

// NodeRequirement is the node version a checkout asks for (.nvmrc,
// .node-version or engines.node). It is recorded, never enforced: a
// worker whose node does not satisfy it adds a note (NodeNote).
type NodeRequirement struct {
	// Range is the requirement as written (a version, "lts/*", a semver
	// range such as ">=18 <21"), trimmed; one over MaxNodeRangeBytes is
	// cut and ends in "…".
	Range string `json:"range"`
	// Source is the file or field it came from: ".nvmrc", else
	// ".node-version" (their first line that is not a comment), else
	// "engines.node" of package.json.
	Source string `json:"source"`
}
