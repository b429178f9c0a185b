package validation

import "bytes"

// MaxMarkerLineBytes is the longest line (without its newline) that can be
// a marker. A longer line is plain output: it is streamed through without
// being held whole, so the parser's line buffer never exceeds this.
const MaxMarkerLineBytes = 4096

// markerSink receives a stream cut into plain output and candidate marker
// lines.
type markerSink interface {
	// text is plain output, in stream order, newlines included.
	text(b []byte)
	// line is a whole line that starts with markerCommon and is at most
	// MaxMarkerLineBytes long, without its newline. It reports whether the
	// line was taken as a marker; when not, the scanner passes it (and its
	// newline) on as text. terminated is false only for a last line that
	// the stream ended without a newline.
	line(b []byte, terminated bool) bool
}

// markerScanner segments a byte stream for the marker parser. It looks for
// markerCommon with bytes.Index and inspects only the hits that start a
// line; everything else is handed on in bulk, one call per write. Lines are
// reassembled across writes only while they can still be a marker.
type markerScanner struct {
	sink      markerSink
	lineStart bool   // the next byte starts a line
	inCand    bool   // cand holds the start of a line that may be a marker
	cand      []byte // at most MaxMarkerLineBytes, never a newline
	prefix    []byte // markerCommon
}

func newMarkerScanner(sink markerSink) markerScanner {
	return markerScanner{sink: sink, lineStart: true, cand: make([]byte, 0, MaxMarkerLineBytes), prefix: []byte(markerCommon)}
}

func (s *markerScanner) write(p []byte) {
	for len(p) > 0 {
		if s.inCand {
			p = s.feedCandidate(p)
			continue
		}
		if s.lineStart && p[0] == markerCommon[0] {
			s.startCandidate()
			continue
		}
		s.lineStart = false
		if j := indexAtLineStart(p, s.prefix); j >= 0 {
			s.sink.text(p[:j])
			p = p[j:]
			s.startCandidate()
			continue
		}
		// No candidate starts inside p, but its end may begin one: keep
		// the bytes after a newline in the last len(markerCommon) bytes.
		win := max(0, len(p)-len(markerCommon))
		k := bytes.LastIndexByte(p[win:], '\n')
		if k < 0 {
			s.sink.text(p)
			return
		}
		cut := win + k + 1
		s.sink.text(p[:cut])
		s.lineStart = true
		p = p[cut:]
	}
}

// indexAtLineStart returns the index of the first prefix in p that follows
// a newline inside p, or -1.
func indexAtLineStart(p, prefix []byte) int {
	for from := 0; ; {
		j := bytes.Index(p[from:], prefix)
		if j < 0 {
			return -1
		}
		j += from
		if j > 0 && p[j-1] == '\n' {
			return j
		}
		from = j + 1
	}
}

func (s *markerScanner) startCandidate() {
	s.inCand, s.lineStart = true, false
	s.cand = s.cand[:0]
}

// dropCandidate hands the held line start on as text.
func (s *markerScanner) dropCandidate() {
	s.sink.text(s.cand)
	s.cand = s.cand[:0]
	s.inCand = false
}

// feedCandidate extends the held line with p and returns what is left of p.
func (s *markerScanner) feedCandidate(p []byte) []byte {
	if n := len(s.cand); n < len(markerCommon) {
		k := min(len(markerCommon)-n, len(p))
		if !bytes.Equal(p[:k], s.prefix[n:n+k]) {
			s.dropCandidate()
			return p // scanned again as the middle of a line
		}
		s.cand = append(s.cand, p[:k]...)
		return p[k:]
	}
	i := bytes.IndexByte(p, '\n')
	if i < 0 {
		if len(s.cand)+len(p) > MaxMarkerLineBytes {
			s.dropCandidate()
			s.sink.text(p)
			return nil
		}
		s.cand = append(s.cand, p...)
		return nil
	}
	if len(s.cand)+i > MaxMarkerLineBytes {
		s.dropCandidate()
		s.sink.text(p[:i+1])
		s.lineStart = true
		return p[i+1:]
	}
	s.cand = append(s.cand, p[:i]...)
	if !s.sink.line(s.cand, true) {
		s.sink.text(s.cand)
		s.sink.text(p[i : i+1])
	}
	s.cand = s.cand[:0]
	s.inCand, s.lineStart = false, true
	return p[i+1:]
}

// finish ends the stream: a held line without a newline is a whole line
// now (an executor may have trimmed the last newline).
func (s *markerScanner) finish() {
	if !s.inCand {
		return
	}
	if len(s.cand) < len(markerCommon) || !s.sink.line(s.cand, false) {
		s.sink.text(s.cand)
	}
	s.cand = s.cand[:0]
	s.inCand = false
}
