// Package semantictest is a stand-in for an OpenAI-compatible chat
// completions endpoint, for tests: it speaks the wire format OpenAI
// documents (POST {base}/chat/completions with a Bearer key; a
// chat.completion object with choices[].message.content and usage; errors
// as {"error":{"message","type","param","code"}}), records every request
// it was sent, and answers from a script.
package semantictest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// ChatRequest is the request body of POST /chat/completions, as far as
// gilf sends it.
type ChatRequest struct {
	Model          string          `json:"model"`
	Messages       []Message       `json:"messages"`
	ResponseFormat *ResponseFormat `json:"response_format,omitempty"`
}

// Message is one chat message.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// ResponseFormat is {"type":"json_schema","json_schema":{...}}.
type ResponseFormat struct {
	Type       string      `json:"type"`
	JSONSchema *JSONSchema `json:"json_schema,omitempty"`
}

// JSONSchema is the structured-output definition.
type JSONSchema struct {
	Name   string          `json:"name"`
	Strict bool            `json:"strict"`
	Schema json.RawMessage `json:"schema"`
}

// Request is one request as received.
type Request struct {
	Method, Path  string
	Authorization string
	ContentType   string
	Raw           []byte
	Body          ChatRequest
}

// Usage is the usage object of a completion.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

// Answer is one scripted response.
type Answer struct {
	Status int // 0 means 200
	Header http.Header
	Body   string
	// Hang answers nothing until the client goes away (a slow model
	// past the client's timeout).
	Hang bool
	// Truncate sends the status, a Content-Length for the whole body and
	// only its first half, then closes the connection mid-JSON.
	Truncate bool
}

// WithHeader returns a with one more response header.
func (a Answer) WithHeader(key, value string) Answer {
	h := a.Header.Clone()
	if h == nil {
		h = http.Header{}
	}
	h.Set(key, value)
	a.Header = h
	return a
}

// Completion is a 200 chat.completion whose one choice's message content
// is content, as OpenAI returns it (structured output arrives the same
// way: the JSON as the content string).
func Completion(model, content string, usage Usage) Answer {
	body := map[string]any{
		"id":      "chatcmpl-gilftest",
		"object":  "chat.completion",
		"created": 1764590400,
		"model":   model,
		"choices": []any{map[string]any{
			"index":         0,
			"message":       map[string]any{"role": "assistant", "content": content, "refusal": nil, "annotations": []any{}},
			"logprobs":      nil,
			"finish_reason": "stop",
		}},
		"usage":              usage,
		"service_tier":       "default",
		"system_fingerprint": "fp_gilftest",
	}
	data, err := json.Marshal(body)
	if err != nil {
		panic(err) // a map of plain values always marshals
	}
	return Answer{Status: http.StatusOK, Header: http.Header{"Content-Type": {"application/json"}}, Body: string(data)}
}

// Error is an error response in OpenAI's shape.
func Error(status int, message, typ, code string) Answer {
	var c any
	if code != "" {
		c = code
	}
	data, err := json.Marshal(map[string]any{"error": map[string]any{"message": message, "type": typ, "param": nil, "code": c}})
	if err != nil {
		panic(err)
	}
	return Answer{Status: status, Header: http.Header{"Content-Type": {"application/json"}}, Body: string(data)}
}

// Server is the stand-in. URL is the base URL to give a client (it ends
// in /v1, as OpenAI's does).
type Server struct {
	URL string
	Key string // the API key it expects

	mu       sync.Mutex
	answers  []Answer
	requests []Request
}

// New starts a stand-in on loopback expecting key; it is closed when the
// test ends.
func New(t testing.TB, key string) *Server {
	s := &Server{Key: key}
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/chat/completions", s.serve)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeAnswer(w, Error(http.StatusNotFound, "Invalid URL ("+r.Method+" "+r.URL.Path+")", "invalid_request_error", ""))
	})
	hs := httptest.NewServer(mux)
	t.Cleanup(hs.Close)
	s.URL = hs.URL + "/v1"
	return s
}

// Push appends answers to the script; each request takes the next one.
// With the script empty a request gets a 500.
func (s *Server) Push(answers ...Answer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.answers = append(s.answers, answers...)
}

// Requests returns what the server was sent, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	raw := new(bytes.Buffer)
	_, readErr := raw.ReadFrom(r.Body)
	req := Request{Method: r.Method, Path: r.URL.Path, Authorization: r.Header.Get("Authorization"), ContentType: r.Header.Get("Content-Type"), Raw: raw.Bytes()}
	decodeErr := json.Unmarshal(req.Raw, &req.Body)
	s.mu.Lock()
	s.requests = append(s.requests, req)
	var a Answer
	switch {
	case r.Method != http.MethodPost:
		a = Error(http.StatusMethodNotAllowed, "Method not allowed", "invalid_request_error", "")
	case req.Authorization != "Bearer "+s.Key:
		a = Error(http.StatusUnauthorized, "Incorrect API key provided.", "invalid_request_error", "invalid_api_key")
	case readErr != nil || decodeErr != nil || !strings.HasPrefix(req.ContentType, "application/json"):
		a = Error(http.StatusBadRequest, "We could not parse the JSON body of your request.", "invalid_request_error", "")
	case req.Body.Model == "" || len(req.Body.Messages) == 0:
		a = Error(http.StatusBadRequest, "you must provide a model parameter and messages", "invalid_request_error", "")
	case len(s.answers) == 0:
		a = Error(http.StatusInternalServerError, "semantictest: no scripted answer", "server_error", "")
	default:
		a = s.answers[0]
		s.answers = s.answers[1:]
	}
	s.mu.Unlock()

	switch {
	case a.Hang:
		<-r.Context().Done()
	case a.Truncate:
		truncate(w, a)
	default:
		writeAnswer(w, a)
	}
}

func writeAnswer(w http.ResponseWriter, a Answer) {
	for k, vs := range a.Header {
		w.Header()[k] = vs
	}
	status := a.Status
	if status == 0 {
		status = http.StatusOK
	}
	w.WriteHeader(status)
	if _, err := w.Write([]byte(a.Body)); err != nil {
		return // the client went away; there is no one to tell
	}
}

// truncate writes half the body under a Content-Length for all of it and
// closes the connection.
func truncate(w http.ResponseWriter, a Answer) {
	conn, buf, err := http.NewResponseController(w).Hijack()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	defer conn.Close()
	fmt.Fprintf(buf, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %s\r\n\r\n%s", strconv.Itoa(len(a.Body)), a.Body[:len(a.Body)/2])
	if err := buf.Flush(); err != nil {
		return // the client went away first: it sees a closed connection all the same
	}
}
