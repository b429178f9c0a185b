package store

import (
	"errors"
	"fmt"
	"hash/crc32"
	"sync"

	"github.com/golang/snappy"
)

// A delivery's raw body is kept in its row as a snappy block. Webhook
// payloads are JSON full of repeated URLs: a real pull_request payload
// shrinks 6.5 times, at about 1.8 GB/s, so a 25 KB body is one overflow
// page on SQLite instead of seven. The row's body_crc32c is the block's
// CRC-32C (NULL on PostgreSQL rows from before migration 0012, whose
// blocks are checked by snappy alone).

// ErrBodyCorrupt means a stored body failed its CRC-32C or snappy check.
var ErrBodyCorrupt = errors.New("delivery body corrupt")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// encodedBody is a body as its row stores it: a snappy block, and the
// CRC-32C of those bytes.
type encodedBody struct {
	b      []byte
	crc    uint32
	pooled *[]byte // b's buffer, when it came from encodePool
}

// encodePool recycles encoding buffers of ordinary payloads: a fresh
// buffer per delivery is zeroed and collected, which costs more than the
// encoding itself. What it buys, measured with bench/intake.sh -c 64 (1 /
// 500 pull requests): without it SQLite made 0.07× / 0.08× a bare
// net/http handler against 0.10× / 0.10× with it, in one series at load
// average 14 (docs/store.md).
var encodePool sync.Pool

// maxPooledEncode bounds the buffers encodePool keeps.
const maxPooledEncode = 256 << 10

// EncodeBody is body as a row stores it: a snappy block, and its CRC-32C
// (for an engine that imports bodies kept elsewhere).
func EncodeBody(body []byte) ([]byte, uint32) {
	b := snappy.Encode(nil, body)
	return b, crc32.Checksum(b, castagnoli)
}

func encodeBody(body []byte) encodedBody {
	need := snappy.MaxEncodedLen(len(body))
	if need < 0 || need > maxPooledEncode {
		b, crc := EncodeBody(body)
		return encodedBody{b: b, crc: crc}
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

// MaxBodyLen bounds a body read back, stored or decoded: far above
// GitHub's 25 MB payloads, so a corrupt length cannot ask for an absurd
// allocation.
const MaxBodyLen = 64 << 20

// decodeBody decodes a stored body, checking its CRC-32C when the row
// has one, and refusing one that claims more than MaxBodyLen.
func decodeBody(b []byte, crc *uint32) ([]byte, error) {
	if crc != nil && crc32.Checksum(b, castagnoli) != *crc {
		return nil, fmt.Errorf("%w: CRC-32C mismatch", ErrBodyCorrupt)
	}
	if n, err := snappy.DecodedLen(b); err != nil || n > MaxBodyLen {
		return nil, fmt.Errorf("%w: not a snappy block of at most %d bytes (%d, %v)", ErrBodyCorrupt, MaxBodyLen, n, err)
	}
	body, err := snappy.Decode(nil, b)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBodyCorrupt, err)
	}
	return body, nil
}
