package evidence

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"strconv"
)

// Content types an artifact is stored with.
const (
	ContentTypeText   = "text/plain; charset=utf-8"
	ContentTypeBinary = "application/octet-stream"
)

// Artifact is one budgeted evidence body and what is known of the full
// output it was cut from.
type Artifact struct {
	Kind Kind
	// Step is the plan step the artifact belongs to; findings are matched
	// to artifacts by it. Empty for run-wide artifacts.
	Step string
	// Name is the artifact's file name. It is encoded into the key, so it
	// may hold anything.
	Name        string
	ContentType string
	Body        []byte
	Binary      bool
	// Truncated is true when Body is not the whole output; OmittedBytes
	// says how many bytes of it are not in Body.
	Truncated    bool
	OmittedBytes int64
	// FullBytes and FullSHA256 describe the whole output as it streamed.
	// FullSHA256 is empty when the source did not record it.
	FullBytes  int64
	FullSHA256 string
	BodySHA256 string
}

// omissionMarker is what stands between a text body's head and tail.
func omissionMarker(omitted int64) string {
	return "\n\n[gilf evidence: " + strconv.FormatInt(omitted, 10) + " bytes omitted]\n\n"
}

// Builder builds an artifact body while the output streams: it keeps the
// first budget bytes, a ring of the last budget bytes, the byte count and
// the SHA-256 of everything written. Memory is O(budget) whatever the
// output's size. A Builder is not safe for concurrent use.
type Builder struct {
	kind    Kind
	step    string
	name    string
	budget  int
	head    []byte
	ring    []byte // nil until the output outgrows the head
	ringPos int    // next write position; the oldest byte once full
	total   int64
	sum     hash.Hash
}

// NewBuilder starts an artifact of kind for step, named name, whose body
// keeps at most budget bytes (DefaultBodyBudget when budget <= 0; raised
// to MinBodyBudget when below it).
func NewBuilder(kind Kind, step, name string, budget int) *Builder {
	return &Builder{
		kind:   kind,
		step:   step,
		name:   name,
		budget: Options{BodyBudget: budget}.budget(),
		sum:    sha256.New(),
	}
}

// Write keeps what the body needs of p. It never fails.
func (b *Builder) Write(p []byte) (int, error) {
	b.add(p)
	return len(p), nil
}

func (b *Builder) add(p []byte) {
	b.sum.Write(p)
	b.total += int64(len(p))
	if b.ring == nil {
		if b.head == nil {
			b.head = make([]byte, 0, b.budget)
		}
		k := min(b.budget-len(b.head), len(p))
		b.head = append(b.head, p[:k]...)
		p = p[k:]
		if len(p) == 0 {
			return
		}
		// The head is full: the ring starts as a copy of it.
		b.ring = make([]byte, b.budget)
		copy(b.ring, b.head)
		b.ringPos = 0
	}
	if len(p) > b.budget {
		p = p[len(p)-b.budget:]
	}
	k := copy(b.ring[b.ringPos:], p)
	copy(b.ring, p[k:])
	b.ringPos = (b.ringPos + len(p)) % b.budget
}

// Artifact returns the artifact for everything written so far.
func (b *Builder) Artifact() Artifact {
	tail := b.head
	if b.ring != nil {
		tail = make([]byte, 0, b.budget)
		tail = append(tail, b.ring[b.ringPos:]...)
		tail = append(tail, b.ring[:b.ringPos]...)
	}
	a := assemble(b.head, tail, b.total, b.budget)
	a.Kind, a.Step, a.Name = b.kind, b.step, b.name
	a.FullSHA256 = hex.EncodeToString(b.sum.Sum(nil))
	return a
}

// assemble cuts a body of at most budget bytes from a stream of total
// bytes whose first bytes are head and whose last bytes are tail (the two
// may overlap when they cover the whole stream). The stream is classified
// from head.
func assemble(head, tail []byte, total int64, budget int) Artifact {
	a := Artifact{FullBytes: total, Binary: IsBinary(head)}
	a.ContentType = ContentTypeText
	if a.Binary {
		a.ContentType = ContentTypeBinary
	}
	switch {
	case total <= int64(budget) && int64(len(head)) >= total:
		a.Body = append([]byte(nil), head[:total]...)
	case a.Binary:
		a.Body = append([]byte(nil), head[:min(len(head), budget)]...)
		a.OmittedBytes = total - int64(len(a.Body))
	default:
		// The marker is sized for the largest count it could show, so the
		// real (smaller) count can only make the body shorter.
		avail := budget - len(omissionMarker(total))
		tailLen := min(avail/2, len(tail))
		headLen := min(avail-tailLen, len(head))
		h := cutHead(head, headLen)
		t := cutTail(tail, len(tail)-tailLen)
		a.OmittedBytes = total - int64(h+len(tail)-t)
		body := make([]byte, 0, budget)
		body = append(body, head[:h]...)
		body = append(body, omissionMarker(a.OmittedBytes)...)
		body = append(body, tail[t:]...)
		a.Body = body
	}
	a.Truncated = a.OmittedBytes > 0
	sum := sha256.Sum256(a.Body)
	a.BodySHA256 = hex.EncodeToString(sum[:])
	return a
}

func (a Artifact) String() string {
	return fmt.Sprintf("%s/%s (%d of %d bytes)", a.Kind, a.Name, len(a.Body), a.FullBytes)
}
