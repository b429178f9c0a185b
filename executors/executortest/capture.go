package executortest

import (
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"strings"
	"sync"

	"github.com/gilf-review/gilf/validation"
)

// DefaultMaxOutputBytes is what Fake keeps of one step's output when
// Fake.MaxOutputBytes is zero: half at the head, half at the tail.
const DefaultMaxOutputBytes = 64 << 10

// MinSecretLen is the shortest secret value Fake redacts; shorter values
// would redact ordinary words.
const MinSecretLen = 8

// capture keeps the head and the tail of a stream with bounded memory and
// counts and hashes all of it. Safe for the concurrent writes of a
// child's stdout and stderr.
type capture struct {
	mu      sync.Mutex
	headMax int
	tailMax int
	head    []byte
	tail    []byte // ring of at most tailMax bytes, oldest first after compaction
	total   int64
	sum     hash.Hash
}

func newCapture(limit int) *capture {
	if limit <= 0 {
		limit = DefaultMaxOutputBytes
	}
	h := limit / 2
	return &capture{headMax: h, tailMax: limit - h, sum: sha256.New()}
}

func (c *capture) Write(p []byte) (int, error) {
	c.add(p)
	return len(p), nil
}

func (c *capture) add(p []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.total += int64(len(p))
	c.sum.Write(p)
	rest := p
	if n := c.headMax - len(c.head); n > 0 {
		n = min(n, len(rest))
		c.head = append(c.head, rest[:n]...)
		rest = rest[n:]
	}
	if len(rest) == 0 {
		return
	}
	c.tail = append(c.tail, rest...)
	if over := len(c.tail) - c.tailMax; over > 0 {
		c.tail = append(c.tail[:0], c.tail[over:]...)
	}
}

// output returns what was kept, redacted of secrets.
func (c *capture) output(secrets []validation.Secret) validation.Output {
	c.mu.Lock()
	defer c.mu.Unlock()
	kept := int64(len(c.head) + len(c.tail))
	head, n1 := redact(string(c.head), secrets)
	tail, n2 := redact(string(c.tail), secrets)
	return validation.Output{
		Head:       head,
		Tail:       tail,
		Bytes:      c.total,
		SHA256:     hex.EncodeToString(c.sum.Sum(nil)),
		Truncated:  kept < c.total,
		Redactions: n1 + n2,
	}
}

// redact replaces every occurrence of a secret value of at least
// MinSecretLen bytes with [redacted:NAME] and counts the replacements.
// It works on the kept text only: a value cut by the head/tail split is
// not found, which is one more reason secrets never enter a sandbox.
func redact(s string, secrets []validation.Secret) (string, int) {
	n := 0
	for _, sec := range secrets {
		if len(sec.Value) < MinSecretLen {
			continue
		}
		if c := strings.Count(s, sec.Value); c > 0 {
			n += c
			s = strings.ReplaceAll(s, sec.Value, "[redacted:"+sec.Name+"]")
		}
	}
	return s, n
}
