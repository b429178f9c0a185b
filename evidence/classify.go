package evidence

import "unicode/utf8"

// ClassifySampleBytes is how much of the start of a stream the text/binary
// classifier reads.
const ClassifySampleBytes = 8 << 10

// BinaryPercent is the share of non-text bytes in the sample above which a
// stream is binary.
const BinaryPercent = 30

// IsBinary classifies a stream from its first bytes (only the first
// ClassifySampleBytes of sample are read). The rule is deterministic:
//
//   - an empty sample is text;
//   - a NUL byte in the sample makes it binary;
//   - otherwise it is binary when more than BinaryPercent % of the sample's
//     bytes are not text: C0 controls other than TAB, LF, VT, FF, CR, BS and
//     ESC; DEL; and bytes of invalid UTF-8. A multi-byte rune cut by the end
//     of the sample is not counted against it.
func IsBinary(sample []byte) bool {
	if len(sample) > ClassifySampleBytes {
		sample = sample[:ClassifySampleBytes]
	}
	if len(sample) == 0 {
		return false
	}
	nonText := 0
	for i := 0; i < len(sample); {
		b := sample[i]
		if b == 0 {
			return true
		}
		if b < utf8.RuneSelf {
			if !textByte(b) {
				nonText++
			}
			i++
			continue
		}
		r, size := utf8.DecodeRune(sample[i:])
		if r == utf8.RuneError && size == 1 {
			if !utf8.FullRune(sample[i:]) {
				break // a rune cut by the sample's end
			}
			nonText++
		}
		i += size
	}
	return nonText*100 > BinaryPercent*len(sample)
}

func textByte(b byte) bool {
	switch {
	case b >= 0x20 && b < 0x7f:
		return true
	case b == '\t', b == '\n', b == '\v', b == '\f', b == '\r', b == '\b', b == 0x1b:
		return true
	}
	return false
}
