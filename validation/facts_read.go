package validation

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
)

// readCheckoutFacts reads the facts of the checkout root through root.
// files are the names presentFiles found; a lockfile or .yarnrc.yml not
// among them is not opened. A missing, odd or unreadable file is never an
// error: its fact stays unknown, with a note when that is worth saying
// (presentFiles has already noted a symlinked lockfile or .yarnrc.yml).
func readCheckoutFacts(root *os.Root, files []string) (CheckoutFacts, []string) {
	var facts CheckoutFacts
	var notes []string
	note := func(n string) {
		if n != "" {
			notes = append(notes, n)
		}
	}
	present := func(name string) bool { return slices.Contains(files, name) }

	if present(LockfilePNPM) {
		head, truncated, n := readFactFile(root, LockfilePNPM, MaxLockfileHeadBytes, true)
		note(n)
		facts.PNPMLockfileVersion = parsePNPMLockfileVersion(head, truncated)
	}
	if present(LockfileYarn) {
		head, truncated, n := readFactFile(root, LockfileYarn, MaxLockfileHeadBytes, true)
		note(n)
		facts.YarnLock, facts.YarnLockMetadataVersion = parseYarnLockHead(head, truncated)
	}
	if present(YarnBerryConfigFile) {
		data, _, n := readFactFile(root, YarnBerryConfigFile, MaxYarnrcBytes, false)
		note(n)
		if p := parseYarnrcYarnPath(data); p != "" {
			if release, bad := cleanYarnPath(p); bad != "" {
				facts.YarnPath = p // PlanFromCheckout notes and ignores it
			} else if n := releaseFileNote(root, release); n != "" {
				note(n)
			} else {
				facts.YarnPath = p
			}
		}
	}
	for _, name := range [...]string{NodeVersionFileNVM, NodeVersionFileNode} {
		data, _, n := readFactFile(root, name, MaxNodeVersionFileBytes, false)
		note(n)
		if data == nil {
			continue
		}
		v, ok := parseNodeVersionFile(data)
		if !ok {
			if v != "" {
				note(fmt.Sprintf("%s has a control character or invalid UTF-8: it is ignored", name))
			}
			continue
		}
		facts.NodeVersionFile = newNodeRequirement(v, name)
		break
	}
	return facts, notes
}

// releaseFileNote checks that a committed Yarn release is a regular file
// (by Lstat, never followed); the note says why it is not used.
func releaseFileNote(root *os.Root, release string) string {
	info, err := root.Lstat(release)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Sprintf("%s yarnPath %s is not in the checkout: it is ignored", YarnBerryConfigFile, quoteKey(release))
	case err != nil:
		return fmt.Sprintf("%s yarnPath %s could not be examined (%s): it is ignored", YarnBerryConfigFile, quoteKey(release), errnoText(err))
	case !info.Mode().IsRegular():
		return fmt.Sprintf("%s yarnPath %s is not a regular file: it is ignored", YarnBerryConfigFile, quoteKey(release))
	}
	return ""
}

// readFactFile reads name at the root without following a symlink and
// without opening anything but a regular file. With head set it returns
// the first limit bytes and whether the file goes on; otherwise a file
// over limit is not returned at all. A missing file is nil with no note.
func readFactFile(root *os.Root, name string, limit int64, head bool) (data []byte, truncated bool, note string) {
	info, err := root.Lstat(name)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, false, ""
	case err != nil:
		return nil, false, fmt.Sprintf("%s could not be examined (%s); it is not read", name, errnoText(err))
	case info.Mode()&fs.ModeSymlink != 0:
		if isNodeVersionFile(name) {
			return nil, false, name + " is a symlink; gilf does not follow it"
		}
		return nil, false, "" // presentFiles has said so
	case !info.Mode().IsRegular():
		return nil, false, name + " is not a regular file; it is not read"
	case !head && info.Size() > limit:
		return nil, false, fmt.Sprintf("%s is %d bytes, over the %d-byte limit; it is not read", name, info.Size(), limit)
	}
	f, err := root.OpenFile(name, os.O_RDONLY|manifestOpenFlags, 0)
	if err != nil {
		return nil, false, fmt.Sprintf("%s could not be opened (%s); it is not read", name, errnoText(err))
	}
	defer f.Close() // read-only: a close error loses nothing
	opened, err := f.Stat()
	if err != nil || !os.SameFile(info, opened) {
		return nil, false, name + " changed while it was being opened; it is not read"
	}
	data, err = io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, false, fmt.Sprintf("%s could not be read (%s); it is not read", name, errnoText(err))
	}
	if int64(len(data)) > limit {
		if !head {
			return nil, false, fmt.Sprintf("%s is over the %d-byte limit; it is not read", name, limit)
		}
		return data[:limit], true, ""
	}
	return data, false, ""
}

func isNodeVersionFile(name string) bool {
	return name == NodeVersionFileNVM || name == NodeVersionFileNode
}
