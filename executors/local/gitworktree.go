package local

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"time"

	"github.com/gilf-review/gilf/validation"
)

// GitSetupTimeout bounds making the checkout a git work tree.
const GitSetupTimeout = 2 * time.Minute

// gitScript makes the workspace a git work tree holding one commit of its
// whole content, as the sandbox uid inside the sandbox: the checkout is
// untrusted, so git reads it only where the pull request's own code
// runs. No config of the host's or the user's is read, no hook runs, no
// credential is set. Files a .gitignore names are added too: a tarball
// holds what was committed, force-added files included. A failure leaves
// no half-made repository. $1 is the commit message. With $2, the
// repository's public clone URL, the work tree gets it as its origin
// remote (`git remote -v` works; nothing is fetched: there is no
// network). It has no origin/<base ref>: the checkout is one commit of
// the head's content, without the base commit, and a base branch made at
// the head's commit would be a lie (`git diff origin/main` empty, `git
// merge-base` the head). A step that needs the base branch fails the
// same way on the head and on the base's run, so its failure is found
// preexisting, not the pull request's (docs/failure-origin.md).
const gitScript = `export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null GIT_TERMINAL_PROMPT=0
export GIT_AUTHOR_NAME=gilf GIT_AUTHOR_EMAIL=gilf@invalid GIT_COMMITTER_NAME=gilf GIT_COMMITTER_EMAIL=gilf@invalid
export GIT_AUTHOR_DATE=1970-01-01T00:00:00Z GIT_COMMITTER_DATE=1970-01-01T00:00:00Z
git init -q -b main . && git add -A -f . && git commit -q --no-verify --no-gpg-sign --allow-empty -m "$1" || { rm -rf .git; exit 1; }
if [ -n "$2" ]; then
  git remote add origin "$2" || { rm -rf .git; exit 1; }
fi`

// cloneURL is a public clone URL gilf names as the origin remote: https,
// no user or password, no query.
var cloneURL = regexp.MustCompile(`^https://[A-Za-z0-9.-]+(:[0-9]{1,5})?(/[A-Za-z0-9._~-]+)+$`)

// GitRemote returns the origin remote the work tree gets from a run's
// labels (clone_url), "" when it is missing or not a plain public URL.
func GitRemote(labels map[string]string) string {
	if u := labels["clone_url"]; cloneURL.MatchString(u) {
		return u
	}
	return ""
}

var headSHA = regexp.MustCompile(`^[0-9a-f]{40}([0-9a-f]{24})?$`)

// gitWorkTree makes the run's workspace a git work tree when it is not one
// and git is installed, and says in a note what it did; the run goes on
// either way. An error is an infrastructure failure of the sandbox.
func (s *sandbox) gitWorkTree(ctx context.Context, revision string, labels map[string]string) (string, error) {
	if _, err := os.Lstat(filepath.Join(s.dirs.Workspace, ".git")); err == nil {
		return "", nil
	}
	if _, err := lookPath("git", s.opts.Env["PATH"]); err != nil {
		return "git is not installed on this worker: the checkout is not a git work tree", nil
	}
	remote := GitRemote(labels)
	msg := "gilf: the checkout"
	if headSHA.MatchString(revision) {
		msg = "gilf: the checkout of " + revision
	}
	r, err := s.runStep(ctx, stepRun{
		step:      validation.Step{Name: "git-work-tree", Argv: []string{"/bin/sh", "-c", gitScript, "gilf-git", msg, remote}},
		timeout:   GitSetupTimeout,
		maxOutput: ProbeMaxOutputBytes,
	})
	if err != nil {
		return "", fmt.Errorf("git work tree: %w", err)
	}
	if r.Status != validation.StatusPassed {
		return fmt.Sprintf("the checkout could not be made a git work tree (%s): %s", r.Status, firstLine(r.Output.Head+r.Output.Tail)), nil
	}
	if remote != "" {
		return "the checkout is a git work tree: one commit of its content, remote origin " + remote + " (nothing fetched, no base branch)", nil
	}
	return "the checkout is a git work tree: one commit of its content, no remote", nil
}
