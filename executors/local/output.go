package local

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/gilf-review/gilf/validation"
)

// streamReadBytes is the read buffer of the output pipe: one full pipe.
const streamReadBytes = PipeBufferBytes

// defaultPipeBytes is the kernel's default pipe buffer; a read that large
// says the step prints fast enough for the larger buffer to matter.
const defaultPipeBytes = 64 << 10

// streamed is what was read of one step's output.
type streamed struct {
	validation.Output
	// over is set when the step printed more than the stream ceiling.
	over bool
	// drainCut is set when the pipe was still open OutputDrainTimeout
	// after the step was waited for and reading stopped.
	drainCut bool
	err      error
}

// readStream reads r to its end through a Redactor into a Capture keeping
// maxOutput bytes. Past maxStream bytes it stops keeping, calls onOver
// once (which stops the step) and only drains. Memory stays bounded
// whatever the step prints.
func readStream(r *os.File, maxOutput int, maxStream int64, secrets []validation.Secret, onOver func()) streamed {
	capt := validation.NewCapture(maxOutput)
	red := validation.NewRedactor(capt, secrets)
	var s streamed
	var n int64
	buf := make([]byte, streamReadBytes)
	grown := false
	for {
		k, rerr := r.Read(buf)
		if !grown && k >= defaultPipeBytes {
			growPipe(r)
			grown = true
		}
		if k > 0 && !s.over {
			keep := int64(k)
			if n+keep > maxStream {
				keep = maxStream - n
				s.over = true
				onOver()
			}
			n += keep
			if _, werr := red.Write(buf[:keep]); werr != nil && s.err == nil {
				s.err = werr
			}
		}
		if rerr != nil {
			switch {
			case errors.Is(rerr, io.EOF):
			case errors.Is(rerr, os.ErrDeadlineExceeded):
				s.drainCut = true
			default:
				s.err = errors.Join(s.err, fmt.Errorf("read output: %w", rerr))
			}
			break
		}
	}
	if ferr := red.Flush(); ferr != nil {
		s.err = errors.Join(s.err, ferr)
	}
	s.Output = capt.Output()
	s.Redactions = red.Redactions()
	return s
}

// collect waits for the reader of r, at most OutputDrainTimeout: a process
// that escaped every kill and still holds the pipe cannot hold the run.
func collect(r *os.File, stream <-chan streamed) streamed {
	select {
	case s := <-stream:
		return s
	case <-time.After(OutputDrainTimeout):
	}
	// A deadline in the past wakes the blocked Read with
	// ErrDeadlineExceeded; the reader then finishes.
	if err := r.SetReadDeadline(time.Now()); err != nil {
		s := <-stream
		s.err = errors.Join(s.err, fmt.Errorf("stop reading output: %w", err))
		return s
	}
	return <-stream
}
