package validation

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// ManifestName is the only manifest gilf reads, at the checkout root.
const ManifestName = "package.json"

// otherManifestNames are manifests pnpm also accepts and gilf does not read;
// they are named in the gap when package.json is missing.
func otherManifestNames() []string { return []string{"package.json5", "package.yaml"} }

// readManifest reads package.json through root without following a symlink
// and without opening anything but a regular file. It reads at most limit+1
// bytes, so a file that grew past the cap after Lstat is still refused.
func readManifest(root *os.Root, limit int64) ([]byte, *Gap) {
	info, err := root.Lstat(ManifestName)
	if errors.Is(err, fs.ErrNotExist) {
		msg := "no package.json at the repository root"
		for _, other := range otherManifestNames() {
			if _, err := root.Lstat(other); err == nil {
				msg += fmt.Sprintf(" (%s is there; gilf reads only package.json)", other)
				break
			}
		}
		return nil, &Gap{Reason: GapNoManifest, Msg: msg}
	}
	if err != nil {
		return nil, &Gap{Reason: GapManifestUnreadable, Msg: "package.json could not be examined: " + errnoText(err)}
	}
	if gap := manifestTypeGap(info.Mode()); gap != nil {
		return nil, gap
	}
	if info.Size() > limit {
		return nil, &Gap{Reason: GapManifestTooLarge,
			Msg: fmt.Sprintf("package.json is %d bytes, over the %d-byte limit", info.Size(), limit)}
	}

	f, err := root.OpenFile(ManifestName, os.O_RDONLY|manifestOpenFlags, 0)
	if err != nil {
		return nil, &Gap{Reason: GapManifestUnreadable, Msg: "package.json could not be opened: " + errnoText(err)}
	}
	defer f.Close() // read-only: a close error loses nothing

	// The name was a regular file at Lstat; make sure the open found that
	// same file (a swap to a symlink or FIFO in between is refused).
	opened, err := f.Stat()
	if err != nil {
		return nil, &Gap{Reason: GapManifestUnreadable, Msg: "package.json could not be examined: " + errnoText(err)}
	}
	if !os.SameFile(info, opened) {
		return nil, &Gap{Reason: GapManifestUnreadable, Msg: "package.json changed while it was being opened"}
	}

	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, &Gap{Reason: GapManifestUnreadable, Msg: "package.json could not be read: " + errnoText(err)}
	}
	if int64(len(data)) > limit {
		return nil, &Gap{Reason: GapManifestTooLarge,
			Msg: fmt.Sprintf("package.json is over the %d-byte limit", limit)}
	}
	return data, nil
}

// manifestTypeGap refuses anything but a regular file, by its Lstat mode.
func manifestTypeGap(mode fs.FileMode) *Gap {
	var what string
	switch {
	case mode.IsRegular():
		return nil
	case mode&fs.ModeSymlink != 0:
		return &Gap{Reason: GapManifestSymlink, Msg: "package.json is a symlink; gilf does not follow it"}
	case mode.IsDir():
		what = "a directory"
	case mode&fs.ModeNamedPipe != 0:
		what = "a named pipe (FIFO)"
	case mode&fs.ModeSocket != 0:
		what = "a socket"
	case mode&fs.ModeDevice != 0:
		what = "a device"
	default:
		what = "not a regular file"
	}
	return &Gap{Reason: GapManifestNotRegular, Msg: "package.json is " + what + "; gilf reads only a regular file"}
}

// presentFiles returns which lockfiles and .yarnrc.yml exist at the root
// (by Lstat: never opened, never followed), with notes on odd ones.
func presentFiles(root *os.Root) (names, notes []string) {
	for _, name := range append(LockfileNames(), YarnBerryConfigFile) {
		info, err := root.Lstat(name)
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			notes = append(notes, fmt.Sprintf("%s could not be examined (%s); it is not counted", name, errnoText(err)))
		case info.IsDir():
			notes = append(notes, fmt.Sprintf("%s is a directory; it is not counted", name))
		default:
			if info.Mode()&fs.ModeSymlink != 0 {
				notes = append(notes, fmt.Sprintf("%s is a symlink; it is counted as present but never read by gilf", name))
			}
			names = append(names, name)
		}
	}
	return names, notes
}

// errnoText is the system's words for err without the path, which may be
// the worker's.
func errnoText(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return publicMessage(pe.Err.Error())
	}
	return publicMessage(err.Error())
}
