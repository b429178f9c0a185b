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
	"sync"
	"time"

	"github.com/golang/snappy"
)

// The body log keeps raw delivery bodies out of SQLite. Profiling intake
// showed a 25 KB body costing the single writer about 230 µs of CPU in
// pure-Go SQLite (seven overflow pages, each a WAL frame, checksums, and
// the same again at checkpoint); appended to a plain file it costs one
// write and a share of one fsync.
//
// Each store handle (each process) appends to its own segment file,
// <database>.bodies/<start time>-<random>.seg, so handles sharing one
// database never interleave writes; it starts a new one once a segment
// is full or a day old (Options.BodySegmentMaxBytes, BodySegmentMaxAge),
// so retention (prune.go) can delete old segments whole. A body is stored as a snappy block
// (encodeBody); its row names the block's segment, offset, length and
// CRC-32C. The writer reserves room for a batch's bodies; the appender
// writes and fsyncs them while the writer runs the batch's statements;
// the writer commits only once the bodies are durable, and answers only
// once the WAL is synced too, so an acknowledged delivery has its row and
// its body on disk.
//
// Because the commit waits for the bodies (usually synced by the time the
// statements are done: waiting cost nothing measurable), no row names a
// body that is not on disk — not in the WAL, not in the database after a
// checkpoint, which may therefore run at any time. A body that could not
// be written fails its delivery, without its row. A row whose body was
// damaged anyway — a segment edited or lost, a disk error — is caught, the
// CRC-32C or the length does not match (ErrBodyCorrupt), and healed when
// GitHub redelivers the delivery: the duplicate's body replaces the
// damaged one. A crash of the process alone loses nothing: the page cache
// keeps both files.

// ErrBodyLogFull means appending the batch's bodies would pass the store's
// byte cap (Options.MaxBytes); intake answers 503, as for a full database.
var ErrBodyLogFull = errors.New("delivery body log full")

// ErrBodyCorrupt means a stored body failed its length or CRC-32C check.
var ErrBodyCorrupt = errors.New("delivery body corrupt")

// segmentSuffix names segment files; newSegmentSuffix follows it on a
// segment's name until the segment is locked.
const (
	segmentSuffix    = ".seg"
	newSegmentSuffix = ".new"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// bodyRef locates one body in the log.
type bodyRef struct {
	segment string
	offset  int64
	length  int64
	crc     uint32
	seg     *segment // the open segment, on a reservation (nil when read from a row)
}

// segment is one open segment file. Its fields do not change once made.
type segment struct {
	name   string
	f      *os.File
	lock   *os.File // holds the segment's shared flock until closed
	opened time.Time
}

func (s *segment) close() error {
	if err := errors.Join(s.f.Close(), s.lock.Close()); err != nil {
		return fmt.Errorf("body log: %w", err)
	}
	return nil
}

// bodyLog is one handle's body log: the segment it appends to now, and
// those it rotated out of that the appender has yet to close. The writer
// goroutine reserves room and rotates; the appender goroutine writes and
// fsyncs the bodies and closes retired segments.
type bodyLog struct {
	dir      string
	cur      *segment   // writer goroutine only (and Close)
	retired  []*segment // rotated out, not yet handed to the appender (writer only)
	limit    int64      // 0: none
	end      int64      // end of the last reservation in cur (writer goroutine only)
	used     int64      // bytes of every segment in dir: at open plus reserved since (writer only)
	maxBytes int64      // a segment is rotated out before it passes this (0: never)
	maxAge   time.Duration
	poisoned // by a failed fsync
}

// bodyDir is the directory of the database at dbPath's body log.
func bodyDir(dbPath string) string { return dbPath + ".bodies" }

// openBodyLog creates a new segment in the database's body directory (made
// when missing) and fsyncs the directory, so the segment's name is durable
// before any row names it. limit caps the bytes of all segments (0: none);
// a segment is rotated out once it would pass maxBytes or is maxAge old,
// so retention can drop the old ones while the handle lives.
func openBodyLog(dbPath string, limit, maxBytes int64, maxAge time.Duration) (*bodyLog, error) {
	dir := bodyDir(dbPath)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("body log: %w", err)
	}
	used, err := segmentBytes(dir)
	if err != nil {
		return nil, err
	}
	seg, err := newSegment(dir)
	if err != nil {
		return nil, err
	}
	return &bodyLog{dir: dir, cur: seg, used: used, limit: limit, maxBytes: maxBytes, maxAge: maxAge}, nil
}

// newSegment creates, locks and names a new segment file.
func newSegment(dir string) (*segment, error) {
	var rnd [8]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return nil, fmt.Errorf("body log: segment name: %w", err)
	}
	now := time.Now()
	name := fmt.Sprintf("%016x-%s%s", now.UnixNano(), hex.EncodeToString(rnd[:]), segmentSuffix)
	// Created under a name pruning ignores, locked (segment_lock_unix.go),
	// then named: pruning never sees the segment unlocked.
	tmp := filepath.Join(dir, name+newSegmentSuffix)
	lock, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("body log: %w", err)
	}
	if err := lockShared(lock); err != nil {
		return nil, errors.Join(err, lock.Close(), os.Remove(tmp))
	}
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		return nil, errors.Join(fmt.Errorf("body log: %w", err), lock.Close(), os.Remove(tmp))
	}
	f, err := os.OpenFile(filepath.Join(dir, name), os.O_RDWR, 0)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("body log: %w", err), lock.Close())
	}
	if err := syncDir(dir); err != nil {
		return nil, errors.Join(err, f.Close(), lock.Close())
	}
	return &segment{name: name, f: f, lock: lock, opened: now}, nil
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

// reserve places a body of n bytes at the end of the segment and returns
// where it goes (crc is the body's CRC-32C); write puts it there later.
// Only the writer goroutine reserves, so it needs no lock. A segment that
// is full or old enough is rotated out first: the writer hands it to the
// appender (takeRetired) after the batch that still writes to it.
func (l *bodyLog) reserve(n int64, crc uint32) (bodyRef, error) {
	if err := l.failed(); err != nil {
		return bodyRef{}, err
	}
	if l.limit > 0 && l.used+n > l.limit {
		return bodyRef{}, fmt.Errorf("%w: %d bytes stored, %d more would pass the cap of %d", ErrBodyLogFull, l.used, n, l.limit)
	}
	if l.end > 0 && (l.maxBytes > 0 && l.end+n > l.maxBytes || l.maxAge > 0 && time.Since(l.cur.opened) >= l.maxAge) {
		seg, err := newSegment(l.dir)
		if err != nil {
			return bodyRef{}, err
		}
		l.retired = append(l.retired, l.cur)
		l.cur, l.end = seg, 0
	}
	ref := bodyRef{segment: l.cur.name, offset: l.end, length: n, crc: crc, seg: l.cur}
	l.end += n
	l.used += n
	return ref, nil
}

// takeRetired returns the segments rotated out since the last call
// (writer goroutine only).
func (l *bodyLog) takeRetired() []*segment {
	r := l.retired
	l.retired = nil
	return r
}

// write writes a reserved (encoded) body. Only the appender goroutine writes, one
// body after the other, so writes never contend for the file in the
// kernel. The bytes are not durable until a later sync.
func (l *bodyLog) write(body []byte, ref bodyRef) error {
	if int64(len(body)) != ref.length || ref.seg == nil || ref.segment != ref.seg.name {
		return fmt.Errorf("body log: %d bytes for a reservation of %d in %s", len(body), ref.length, ref.segment)
	}
	if _, err := ref.seg.f.WriteAt(body, ref.offset); err != nil {
		return fmt.Errorf("body log: write: %w", err)
	}
	return nil
}

// sync makes every append to the given segments that returned before it
// was called durable. A failed fsync poisons the log (the kernel may have
// dropped the pages it could not write): later appends and syncs fail
// with ErrNotDurable.
func (l *bodyLog) sync(segs ...*segment) error {
	if err := l.failed(); err != nil {
		return err
	}
	for _, s := range segs {
		if err := datasync(s.f); err != nil {
			return l.fail(fmt.Errorf("body log: %w", err))
		}
	}
	return nil
}

// close closes the current segment, and deletes it when it never got a
// body (a store opened to read, as by `gilf jobs`): no row can name it.
func (l *bodyLog) close() error {
	if l.end == 0 {
		if err := os.Remove(filepath.Join(l.dir, l.cur.name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return errors.Join(fmt.Errorf("body log: %w", err), l.cur.close())
		}
	}
	return l.cur.close()
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
	body, err := decodeBody(b)
	if err != nil {
		return nil, fmt.Errorf("segment %s at %d: %w", ref.segment, ref.offset, err)
	}
	return body, nil
}

// encodedBody is a body as the body log stores it: a snappy block, and
// the CRC-32C of those bytes. Webhook payloads are JSON full of repeated
// URLs: a real pull_request payload shrinks 6.5 times, at about 1.8 GB/s,
// so the log writes and fsyncs a sixth of the bytes.
type encodedBody struct {
	b      []byte
	crc    uint32
	pooled *[]byte // b's buffer, when it came from encodePool
}

// encodePool recycles encoding buffers of ordinary payloads: a fresh
// buffer per delivery is zeroed and collected, which costs more than the
// encoding itself.
var encodePool sync.Pool

// maxPooledEncode bounds the buffers encodePool keeps.
const maxPooledEncode = 256 << 10

func encodeBody(body []byte) encodedBody {
	need := snappy.MaxEncodedLen(len(body))
	if need < 0 || need > maxPooledEncode {
		b := snappy.Encode(nil, body)
		return encodedBody{b: b, crc: crc32.Checksum(b, castagnoli)}
	}
	p, _ := encodePool.Get().(*[]byte)
	if p == nil || cap(*p) < need {
		buf := make([]byte, maxPooledEncode/4)
		if len(buf) < need {
			buf = make([]byte, need)
		}
		p = &buf
	}
	b := snappy.Encode((*p)[:cap(*p)], body)
	return encodedBody{b: b, crc: crc32.Checksum(b, castagnoli), pooled: p}
}

// release returns the buffer to encodePool; e must not be used after.
func (e *encodedBody) release() {
	if e.pooled != nil {
		encodePool.Put(e.pooled)
		e.pooled, e.b = nil, nil
	}
}

// maxBodyLen bounds a body read back, stored or decoded: far above
// GitHub's 25 MB payloads, so a corrupt length cannot ask for an absurd
// allocation.
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

// decodeBody decodes a stored body (a snappy block, as encodeBody made
// it), refusing one that claims more than maxBodyLen.
func decodeBody(b []byte) ([]byte, error) {
	if n, err := snappy.DecodedLen(b); err != nil || n > maxBodyLen {
		return nil, fmt.Errorf("%w: not a snappy block of at most %d bytes (%d, %v)", ErrBodyCorrupt, maxBodyLen, n, err)
	}
	body, err := snappy.Decode(nil, b)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBodyCorrupt, err)
	}
	return body, nil
}
