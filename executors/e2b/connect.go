package e2b

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
)

// Connect protocol framing (connectrpc.com protocol, "Streaming-Request"
// and "Streaming-Response"): every message of a streaming call is an
// envelope of one flag byte, a 4-byte big-endian length and the message.
const (
	// flagCompressed marks a compressed message; gilf never negotiates
	// compression, so such a frame is a broken stream.
	flagCompressed byte = 0x01
	// flagEndStream marks the last frame of a response: the
	// EndStreamResponse, a JSON object with an optional error.
	flagEndStream byte = 0x02
	// envelopeHeaderBytes is the flag byte plus the length.
	envelopeHeaderBytes = 5
)

// MaxFrameBytes bounds one Connect frame read from envd. envd sends output
// in chunks of at most 32 KiB, base64-encoded inside JSON; a frame larger
// than this is a broken stream, refused before anything is allocated.
const MaxFrameBytes = 4 << 20

// encodeEnvelope frames msg as one uncompressed Connect message.
func encodeEnvelope(flags byte, msg []byte) []byte {
	out := make([]byte, envelopeHeaderBytes+len(msg))
	out[0] = flags
	binary.BigEndian.PutUint32(out[1:envelopeHeaderBytes], uint32(len(msg)))
	copy(out[envelopeHeaderBytes:], msg)
	return out
}

// frame is one envelope as read.
type frame struct {
	flags byte
	msg   []byte
}

func (f frame) endStream() bool { return f.flags&flagEndStream != 0 }

// frameReader reads envelopes from a response body.
type frameReader struct {
	r   io.Reader
	hdr [envelopeHeaderBytes]byte
	max int
}

// errNoFrame is returned by next at a clean end of the body, between frames.
var errNoFrame = errors.New("no more frames")

// next reads one frame. A body that ends between frames returns
// errNoFrame; one that ends inside a frame, a compressed frame and a frame
// over the size bound are broken streams.
func (fr *frameReader) next() (frame, error) {
	n, err := io.ReadFull(fr.r, fr.hdr[:])
	switch {
	case err == io.EOF && n == 0:
		return frame{}, errNoFrame
	case err != nil:
		return frame{}, streamBroken("truncated envelope header (%d of %d bytes): %v", n, envelopeHeaderBytes, err)
	}
	flags := fr.hdr[0]
	size := binary.BigEndian.Uint32(fr.hdr[1:])
	if flags&flagCompressed != 0 {
		return frame{}, streamBroken("compressed frame without negotiated compression")
	}
	if uint64(size) > uint64(fr.max) {
		return frame{}, streamBroken("frame of %d bytes exceeds the %d-byte limit", size, fr.max)
	}
	msg := make([]byte, size)
	if m, err := io.ReadFull(fr.r, msg); err != nil {
		return frame{}, streamBroken("truncated envelope (%d of %d bytes): %v", m, size, err)
	}
	return frame{flags: flags, msg: msg}, nil
}

// startRequest is process.StartRequest in proto3 JSON.
type startRequest struct {
	Process processConfig `json:"process"`
	Stdin   bool          `json:"stdin"`
}

type processConfig struct {
	Cmd  string            `json:"cmd"`
	Args []string          `json:"args"`
	Envs map[string]string `json:"envs,omitempty"`
	Cwd  string            `json:"cwd,omitempty"`
}

// startResponse is process.StartResponse in proto3 JSON: zero values are
// omitted, so a clean exit has no exitCode. bytes fields are base64, which
// encoding/json decodes into []byte.
type startResponse struct {
	Event struct {
		Start *struct {
			Pid uint32 `json:"pid"`
		} `json:"start"`
		Data *struct {
			Stdout []byte `json:"stdout"`
			Stderr []byte `json:"stderr"`
			Pty    []byte `json:"pty"`
		} `json:"data"`
		End *struct {
			ExitCode int32   `json:"exitCode"`
			Exited   bool    `json:"exited"`
			Status   string  `json:"status"`
			Error    *string `json:"error"`
		} `json:"end"`
		Keepalive *struct{} `json:"keepalive"`
	} `json:"event"`
}

// endStreamResponse is the body of the last frame.
type endStreamResponse struct {
	Error *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func decodeEvent(msg []byte) (startResponse, error) {
	var ev startResponse
	if err := json.Unmarshal(msg, &ev); err != nil {
		return ev, streamBroken("undecodable event: %v", err)
	}
	return ev, nil
}

func decodeEndStream(msg []byte) (endStreamResponse, error) {
	var es endStreamResponse
	if len(msg) == 0 {
		return es, nil
	}
	if err := json.Unmarshal(msg, &es); err != nil {
		return es, streamBroken("undecodable end-of-stream frame: %v", err)
	}
	return es, nil
}
