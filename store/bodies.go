package store

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// The body log keeps raw delivery bodies out of SQLite. Profiling intake
// showed a 25 KB body costing the single writer about 400 µs in pure-Go
// SQLite (seven overflow pages, each a WAL frame of two pwrite calls, the
// statement journal, checksums); appended to a plain file it costs one
// write and a share of one fsync per group commit.
//
// Each store handle (each process) appends to its own segment file,
// <database>.bodies/<start time>-<random>.seg, so handles sharing one
// database never interleave writes. A batch's bodies are written and
// fsynced before the transaction that inserts their rows begins, so a
// committed row only ever points at durable bytes. A crash between the two
// leaves unreferenced bytes at the end of a segment, never a row without
// its body.

// ErrBodyLogFull means appending the batch's bodies would pass the store's
// byte cap (Options.MaxBytes); intake answers 503, as for a full database.
var ErrBodyLogFull = errors.New("delivery body log full")

// ErrBodyCorrupt means a stored body failed its length or CRC-32C check.
var ErrBodyCorrupt = errors.New("delivery body corrupt")

// segmentSuffix names segment files.
const segmentSuffix = ".seg"

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// bodyRef locates one body in the log.
type bodyRef struct {
	segment string
	offset  int64
	length  int64
	crc     uint32
}

// bodyLog is one handle's segment file. Only the writer goroutine appends
// (place, then write, possibly on a goroutine it waits for).
type bodyLog struct {
	dir   string
	name  string
	f     *os.File
	end   int64 // end of the last durable append
	used  int64 // bytes of every segment in dir: at open plus appended since
	limit int64 // 0: none
}

// bodyDir is the directory of the database at dbPath's body log.
func bodyDir(dbPath string) string { return dbPath + ".bodies" }

// openBodyLog creates a new segment in the database's body directory (made
// when missing) and fsyncs the directory, so the segment's name is durable
// before any row names it. limit caps the bytes of all segments (0: none).
func openBodyLog(dbPath string, limit int64) (*bodyLog, error) {
	dir := bodyDir(dbPath)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("body log: %w", err)
	}
	used, err := segmentBytes(dir)
	if err != nil {
		return nil, err
	}
	var rnd [8]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return nil, fmt.Errorf("body log: segment name: %w", err)
	}
	name := fmt.Sprintf("%016x-%s%s", time.Now().UnixNano(), hex.EncodeToString(rnd[:]), segmentSuffix)
	f, err := os.OpenFile(filepath.Join(dir, name), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("body log: %w", err)
	}
	if err := syncDir(dir); err != nil {
		return nil, errors.Join(err, f.Close())
	}
	return &bodyLog{dir: dir, name: name, f: f, used: used, limit: limit}, nil
}

func segmentBytes(dir string) (int64, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0, fmt.Errorf("body log: %w", err)
	}
	var n int64
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), segmentSuffix) {
			continue
		}
		info, err := e.Info()
		if err != nil {
			return 0, fmt.Errorf("body log: %w", err)
		}
		n += info.Size()
	}
	return n, nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("body log: sync directory: %w", err)
	}
	if err := d.Sync(); err != nil {
		return errors.Join(fmt.Errorf("body log: sync directory: %w", err), d.Close())
	}
	if err := d.Close(); err != nil {
		return fmt.Errorf("body log: sync directory: %w", err)
	}
	return nil
}

// place checks the batch against the byte cap and fills refs (len(batch))
// with where write will put each body, and its CRC-32C. Nothing is written.
func (l *bodyLog) place(batch []*intakeReq, refs []bodyRef) error {
	var total int64
	for _, r := range batch {
		total += int64(len(r.d.Body))
	}
	if l.limit > 0 && l.used+total > l.limit {
		return fmt.Errorf("%w: %d bytes stored, %d more would pass the cap of %d", ErrBodyLogFull, l.used, total, l.limit)
	}
	off := l.end
	for i, r := range batch {
		b := r.d.Body
		refs[i] = bodyRef{segment: l.name, offset: off, length: int64(len(b)), crc: crc32.Checksum(b, castagnoli)}
		off += int64(len(b))
	}
	return nil
}

// write writes the bodies where place put them and fsyncs the segment
// once. On any failure the segment is cut back to its last durable end.
// It must follow place, with nothing appended in between.
func (l *bodyLog) write(batch []*intakeReq, refs []bodyRef) error {
	end := l.end
	for i, r := range batch {
		if refs[i].offset != end || refs[i].length != int64(len(r.d.Body)) {
			return fmt.Errorf("body log: batch placed at %d, log ends at %d", refs[i].offset, end)
		}
		if _, err := l.f.WriteAt(r.d.Body, end); err != nil {
			return l.undo(fmt.Errorf("body log: write: %w", err))
		}
		end += int64(len(r.d.Body))
	}
	if err := l.f.Sync(); err != nil {
		return l.undo(fmt.Errorf("body log: sync: %w", err))
	}
	l.used += end - l.end
	l.end = end
	return nil
}

// undo cuts the segment back to its durable end after a failed append.
func (l *bodyLog) undo(err error) error {
	if terr := l.f.Truncate(l.end); terr != nil {
		return errors.Join(err, fmt.Errorf("body log: truncate: %w", terr))
	}
	return err
}

func (l *bodyLog) close() error {
	if err := l.f.Close(); err != nil {
		return fmt.Errorf("body log: %w", err)
	}
	return nil
}

// readBody reads a body the log holds and checks its length and CRC-32C.
// The segment name comes from the database, so it is checked to name a
// segment file inside dir before it is opened.
func readBody(dir string, ref bodyRef) ([]byte, error) {
	if !validSegment(ref.segment) || ref.offset < 0 || ref.length < 0 || ref.length > maxBodyLen {
		return nil, fmt.Errorf("%w: bad reference (segment %q, offset %d, length %d)", ErrBodyCorrupt, ref.segment, ref.offset, ref.length)
	}
	f, err := os.Open(filepath.Join(dir, ref.segment))
	if err != nil {
		return nil, fmt.Errorf("body log: %w", err)
	}
	defer f.Close()
	b := make([]byte, ref.length)
	if _, err := f.ReadAt(b, ref.offset); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%w: segment %s ends before %d+%d", ErrBodyCorrupt, ref.segment, ref.offset, ref.length)
		}
		return nil, fmt.Errorf("body log: %w", err)
	}
	if got := crc32.Checksum(b, castagnoli); got != ref.crc {
		return nil, fmt.Errorf("%w: segment %s at %d: crc32c %08x, want %08x", ErrBodyCorrupt, ref.segment, ref.offset, got, ref.crc)
	}
	return b, nil
}

// maxBodyLen bounds a body read back: far above GitHub's 25 MB payloads,
// so a corrupt length cannot ask for an absurd allocation.
const maxBodyLen = 64 << 20

// validSegment accepts the names openBodyLog makes: hex, one dash, suffix.
func validSegment(name string) bool {
	stem, ok := strings.CutSuffix(name, segmentSuffix)
	if !ok || len(stem) == 0 || len(stem) > 64 {
		return false
	}
	for i := 0; i < len(stem); i++ {
		if c := stem[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || c == '-') {
			return false
		}
	}
	return true
}
