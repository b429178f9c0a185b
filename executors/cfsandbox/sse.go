package cfsandbox

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/gilf-review/gilf/executors/internal/remote"
)

// MaxSSELineBytes bounds one line of an exec stream: a base64 chunk of
// output. A longer line is a broken stream, refused before it is held.
const MaxSSELineBytes = 1 << 20

// MaxSSEEventBytes bounds one event's data (its data lines joined).
const MaxSSEEventBytes = 4 << 20

// sseEvent is one dispatched server-sent event.
type sseEvent struct {
	name string
	data []byte
}

// sseReader reads text/event-stream events (WHATWG HTML, "Server-sent
// events"): lines "field: value", a blank line dispatches; several data
// lines join with "\n"; comments (":") and id/retry are ignored.
type sseReader struct {
	r *bufio.Reader
}

func newSSEReader(r io.Reader) *sseReader {
	return &sseReader{r: bufio.NewReaderSize(r, 64<<10)}
}

// errNoEvent is returned at a clean end of the stream between events.
var errNoEvent = errors.New("no more events")

// next returns the next event. The stream ending mid-event is a broken
// stream.
func (s *sseReader) next() (sseEvent, error) {
	var ev sseEvent
	var data bytes.Buffer
	started, hasData := false, false
	for {
		line, err := s.line()
		if err == io.EOF {
			if started {
				return ev, streamBroken("the stream ended inside an event")
			}
			return ev, errNoEvent
		}
		if err != nil {
			return ev, err
		}
		if len(line) == 0 {
			if !started {
				continue
			}
			if ev.name == "" {
				ev.name = "message"
			}
			ev.data = data.Bytes()
			if !hasData {
				ev.data = nil
			}
			return ev, nil
		}
		started = true
		field, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(field) {
		case "event":
			ev.name = string(value)
		case "data":
			if hasData {
				data.WriteByte('\n')
			}
			hasData = true
			if data.Len()+len(value) > MaxSSEEventBytes {
				return ev, streamBroken(fmt.Sprintf("an event's data exceeds %d bytes", MaxSSEEventBytes))
			}
			data.Write(value)
		}
	}
}

// line reads one line without its end (LF, CRLF or CR-less LF), bounded.
func (s *sseReader) line() ([]byte, error) {
	var line []byte
	for {
		chunk, err := s.r.ReadSlice('\n')
		if len(line)+len(chunk) > MaxSSELineBytes+2 {
			return nil, streamBroken(fmt.Sprintf("a line exceeds %d bytes", MaxSSELineBytes))
		}
		line = append(line, chunk...)
		switch {
		case err == nil:
			line = bytes.TrimSuffix(line[:len(line)-1], []byte("\r"))
			return line, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case err == io.EOF && len(line) > 0:
			return nil, streamBroken("the stream ended inside a line")
		case err == io.EOF:
			return nil, io.EOF
		default:
			return nil, streamBroken(err.Error())
		}
	}
}

// execEnd is how an exec stream ended.
type execEnd struct {
	exitCode int
	errCode  string // set when it ended with an error event
	errMsg   string
}

// readExecStream reads the bridge's exec events: stdout and stderr with
// base64 data, then exit {"exit_code":N} or error {"error","code"}.
func readExecStream(r io.Reader, out io.Writer) (execEnd, error) {
	sr := newSSEReader(r)
	for {
		ev, err := sr.next()
		if errors.Is(err, errNoEvent) {
			return execEnd{}, streamBroken("the stream ended without an exit event")
		}
		if err != nil {
			return execEnd{}, err
		}
		switch ev.name {
		case "stdout", "stderr":
			b, err := base64.StdEncoding.DecodeString(string(ev.data))
			if err != nil {
				return execEnd{}, streamBroken("undecodable " + ev.name + " chunk: " + err.Error())
			}
			if _, err := out.Write(b); err != nil {
				return execEnd{}, fmt.Errorf("cf-sandbox: keep output: %w", err)
			}
		case "exit":
			var x struct {
				ExitCode *int `json:"exit_code"`
			}
			if err := json.Unmarshal(ev.data, &x); err != nil || x.ExitCode == nil {
				return execEnd{}, streamBroken(fmt.Sprintf("undecodable exit event %q", remote.CleanMessage(string(ev.data))))
			}
			return execEnd{exitCode: *x.ExitCode}, nil
		case "error":
			var x struct {
				Error string `json:"error"`
				Code  string `json:"code"`
			}
			if err := json.Unmarshal(ev.data, &x); err != nil {
				return execEnd{}, streamBroken(fmt.Sprintf("undecodable error event %q", remote.CleanMessage(string(ev.data))))
			}
			if x.Code == "" {
				x.Code = "exec_error"
			}
			return execEnd{exitCode: -1, errCode: remote.CleanMessage(x.Code), errMsg: remote.CleanMessage(x.Error)}, nil
		}
	}
}
