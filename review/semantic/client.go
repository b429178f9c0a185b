// Package semantic is gilf's one real semantic reviewer: a client of any
// OpenAI-compatible chat completions endpoint (SPEC §3.4, issue 15). It asks
// for structured output (response_format json_schema), also reads plain or
// fenced JSON content, retries 429 and 5xx honouring Retry-After within
// bounds, and returns token usage for a cost span. What it returns is the
// model's words: the caller renders them with review.SanitizeModelFinding.
package semantic

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/gilf-review/gilf/review"
)

// Defaults and caps. A zero Option means its default.
const (
	DefaultTimeout       = 120 * time.Second // GILF_SEMANTIC_REVIEW_TIMEOUT_MS=120000
	DefaultMaxInputBytes = 200_000           // the user message, diff included
	DefaultMaxRetries    = 2
	// MinInputBytes is the smallest input budget New accepts: below it
	// not even the pull request's title and findings fit.
	MinInputBytes = 4096
	// MaxResponseBytes caps the response body read; a longer one is an
	// error, not a partial parse.
	MaxResponseBytes = 1 << 20
	// MaxFindings caps the findings kept from one answer; the rest are
	// dropped, with a note.
	MaxFindings = 50
	// MaxFindingBodyBytes caps one finding's body as returned; a longer
	// one is cut, saying so.
	MaxFindingBodyBytes = review.MaxModelFindingBytes
	// MaxRetryWait is the longest Retry-After gilf waits; a longer one
	// ends the retries.
	MaxRetryWait = 60 * time.Second
	// retryBase is the first backoff when a 429 or 5xx has no Retry-After;
	// it doubles per attempt.
	retryBase = 500 * time.Millisecond
	// maxErrorMessageBytes clips the message of an error body.
	maxErrorMessageBytes = 300
	maxTitleOutBytes     = 200
)

// Options configure a Client.
type Options struct {
	// BaseURL is the API's base, e.g. https://api.openai.com/v1; the
	// client POSTs to BaseURL + "/chat/completions".
	BaseURL string
	Model   string
	// APIKey is sent as a Bearer token. It is a secret: never logged,
	// never in an error (a server that echoes it gets it redacted).
	APIKey string
	// Timeout bounds one Review, retries and waits included.
	Timeout time.Duration
	// MaxInputBytes bounds the user message; the diff is cut to fit,
	// saying so.
	MaxInputBytes int
	// MaxRetries is how many times a 429 or 5xx is retried; negative
	// means never.
	MaxRetries int
	HTTPClient *http.Client
}

// String shows the options with the API key withheld, so a %v or %+v of
// them (or of a struct holding them) never prints it.
func (o Options) String() string {
	key := "none"
	if o.APIKey != "" {
		key = "[redacted]"
	}
	return fmt.Sprintf("{BaseURL:%s Model:%s APIKey:%s Timeout:%v MaxInputBytes:%d MaxRetries:%d}", o.BaseURL, o.Model, key, o.Timeout, o.MaxInputBytes, o.MaxRetries)
}

// GoString is String for %#v.
func (o Options) GoString() string { return "semantic.Options" + o.String() }

// LogValue keeps the key out of slog.
func (o Options) LogValue() slog.Value { return slog.StringValue(o.String()) }

// Client is a review.Reviewer over a chat completions endpoint.
type Client struct {
	endpoint string
	o        Options
}

// String names the client without its key (fmt does not call methods of
// unexported fields, so without it %v would print the key).
func (c Client) String() string { return "semantic.Client" + c.o.String() }

// GoString is String for %#v.
func (c Client) GoString() string { return c.String() }

var _ review.Reviewer = (*Client)(nil)

// New checks o and returns a ready client.
func New(o Options) (*Client, error) {
	u, err := url.Parse(o.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("semantic review: base URL %q is not an http(s) URL", o.BaseURL)
	}
	if o.Model == "" {
		return nil, errors.New("semantic review: no model")
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Timeout < 0 {
		return nil, fmt.Errorf("semantic review: negative timeout %v", o.Timeout)
	}
	if o.MaxInputBytes == 0 {
		o.MaxInputBytes = DefaultMaxInputBytes
	}
	if o.MaxInputBytes < MinInputBytes {
		return nil, fmt.Errorf("semantic review: max input bytes %d is under the minimum %d", o.MaxInputBytes, MinInputBytes)
	}
	if o.MaxRetries == 0 {
		o.MaxRetries = DefaultMaxRetries
	}
	o.MaxRetries = max(0, o.MaxRetries)
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{}
	}
	return &Client{endpoint: strings.TrimSuffix(o.BaseURL, "/") + "/chat/completions", o: o}, nil
}

// ErrAnswer is wrapped by the error of an answer that is not the findings
// JSON (garbage, a refusal, no choices): the call worked, the model's
// answer cannot be used.
var ErrAnswer = errors.New("the model's answer is not the findings JSON")

// APIError is a non-2xx response. Message is the error body's message,
// clipped, with the API key redacted; Type and Code are OpenAI's.
type APIError struct {
	StatusCode int
	Type, Code string
	Message    string
}

func (e *APIError) Error() string {
	if e.Message == "" {
		return fmt.Sprintf("chat completions: status %d", e.StatusCode)
	}
	return fmt.Sprintf("chat completions: status %d: %s", e.StatusCode, e.Message)
}

// Temporary reports whether the status is one gilf retries.
func (e *APIError) Temporary() bool {
	return e.StatusCode == http.StatusTooManyRequests || e.StatusCode >= 500
}

type chatRequest struct {
	Model          string         `json:"model"`
	Messages       []chatMessage  `json:"messages"`
	ResponseFormat responseFormat `json:"response_format"`
}

type chatMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

type responseFormat struct {
	Type       string     `json:"type"`
	JSONSchema jsonSchema `json:"json_schema"`
}

type jsonSchema struct {
	Name   string          `json:"name"`
	Strict bool            `json:"strict"`
	Schema json.RawMessage `json:"schema"`
}

type chatResponse struct {
	Model   string `json:"model"`
	Choices []struct {
		Message struct {
			Content *string `json:"content"`
			Refusal *string `json:"refusal"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
		TotalTokens      int `json:"total_tokens"`
	} `json:"usage"`
}

type errorBody struct {
	Error struct {
		Message string `json:"message"`
		Type    string `json:"type"`
		Code    any    `json:"code"` // a string, a number or null
	} `json:"error"`
}

// Review asks the model for findings on in. On ErrAnswer the output still
// carries the usage (the tokens were spent) and no findings.
func (c *Client) Review(ctx context.Context, in review.SemanticInput) (review.SemanticOutput, error) {
	ctx, cancel := context.WithTimeout(ctx, c.o.Timeout)
	defer cancel()
	user, notes := userMessage(in, c.o.MaxInputBytes)
	body, err := json.Marshal(chatRequest{
		Model: c.o.Model,
		Messages: []chatMessage{
			{Role: "system", Content: systemPrompt},
			{Role: "user", Content: user},
		},
		ResponseFormat: responseFormat{Type: "json_schema", JSONSchema: jsonSchema{Name: schemaName, Strict: true, Schema: json.RawMessage(findingsSchema)}},
	})
	if err != nil {
		return review.SemanticOutput{}, fmt.Errorf("encode chat request: %w", err)
	}
	for attempt := 0; ; attempt++ {
		data, retryAfter, err := c.post(ctx, body)
		var apiErr *APIError
		if err == nil {
			out, err := c.parse(data)
			out.Notes = append(notes, out.Notes...)
			return out, err
		}
		if !errors.As(err, &apiErr) || !apiErr.Temporary() || attempt >= c.o.MaxRetries {
			return review.SemanticOutput{Notes: notes}, err
		}
		wait := retryAfter
		if wait < 0 {
			wait = retryBase << attempt
		}
		if wait > MaxRetryWait {
			return review.SemanticOutput{Notes: notes}, fmt.Errorf("%w (Retry-After %v is over %v)", err, wait, MaxRetryWait)
		}
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
			return review.SemanticOutput{Notes: notes}, fmt.Errorf("%w (Retry-After %v is past the timeout)", err, wait)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return review.SemanticOutput{Notes: notes}, fmt.Errorf("%w (gave up waiting to retry: %w)", err, ctx.Err())
		case <-t.C:
		}
	}
}

// post sends one request. retryAfter is -1 when the response named none.
func (c *Client) post(ctx context.Context, body []byte) (data []byte, retryAfter time.Duration, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.endpoint, bytes.NewReader(body))
	if err != nil {
		return nil, -1, fmt.Errorf("chat completions request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	if c.o.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.o.APIKey)
	}
	resp, err := c.o.HTTPClient.Do(req)
	if err != nil {
		return nil, -1, fmt.Errorf("chat completions: %w", c.redactErr(err))
	}
	defer resp.Body.Close()
	data, err = io.ReadAll(io.LimitReader(resp.Body, MaxResponseBytes+1))
	if err != nil {
		return nil, -1, fmt.Errorf("read chat completions response: %w", c.redactErr(err))
	}
	if resp.StatusCode/100 != 2 {
		return nil, RetryAfter(resp.Header.Get("Retry-After"), time.Now()), c.apiError(resp.StatusCode, data)
	}
	if len(data) > MaxResponseBytes {
		return nil, -1, fmt.Errorf("chat completions: response over %d bytes", MaxResponseBytes)
	}
	return data, -1, nil
}

// RetryAfter reads a Retry-After header: delay seconds or an HTTP date;
// -1 when absent or unreadable, 0 for a date already past.
func RetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return -1
	}
	if n, err := strconv.Atoi(v); err == nil {
		if n < 0 {
			return -1
		}
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(0, t.Sub(now))
	}
	return -1
}

func (c *Client) apiError(status int, data []byte) *APIError {
	e := &APIError{StatusCode: status}
	var eb errorBody
	if json.Unmarshal(data, &eb) == nil {
		e.Type = eb.Error.Type
		if eb.Error.Code != nil {
			e.Code = fmt.Sprint(eb.Error.Code)
		}
		e.Message = c.redact(clipLine(eb.Error.Message, maxErrorMessageBytes))
	}
	return e
}

func (c *Client) redact(s string) string {
	if c.o.APIKey == "" {
		return s
	}
	return strings.ReplaceAll(s, c.o.APIKey, "[redacted]")
}

// redactErr keeps the chain (errors.Is on deadlines still works) but never
// shows the key.
func (c *Client) redactErr(err error) error {
	if c.o.APIKey == "" || !strings.Contains(err.Error(), c.o.APIKey) {
		return err
	}
	return &redactedError{msg: c.redact(err.Error()), err: err}
}

type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// clipLine makes an untrusted message one line of at most n bytes.
func clipLine(s string, n int) string {
	s = strings.Join(strings.Fields(strings.ToValidUTF8(s, "?")), " ")
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "…"
}

func (c *Client) parse(data []byte) (review.SemanticOutput, error) {
	var resp chatResponse
	if err := json.Unmarshal(data, &resp); err != nil {
		return review.SemanticOutput{}, fmt.Errorf("chat completions: response is not a chat completion: %w", err)
	}
	out := review.SemanticOutput{Usage: review.TokenUsage{Model: resp.Model}}
	if out.Usage.Model == "" {
		out.Usage.Model = c.o.Model
	}
	if resp.Usage != nil {
		out.Usage.PromptTokens = resp.Usage.PromptTokens
		out.Usage.CompletionTokens = resp.Usage.CompletionTokens
		out.Usage.TotalTokens = resp.Usage.TotalTokens
	}
	if len(resp.Choices) == 0 {
		return out, fmt.Errorf("%w: no choices", ErrAnswer)
	}
	msg := resp.Choices[0].Message
	if msg.Content == nil || *msg.Content == "" {
		if msg.Refusal != nil && *msg.Refusal != "" {
			return out, fmt.Errorf("%w: the model refused: %s", ErrAnswer, clipLine(*msg.Refusal, maxErrorMessageBytes))
		}
		return out, fmt.Errorf("%w: empty content (finish_reason %q)", ErrAnswer, resp.Choices[0].FinishReason)
	}
	findings, notes, err := parseFindings(*msg.Content)
	if err != nil {
		return out, fmt.Errorf("%w (finish_reason %q): %w", ErrAnswer, resp.Choices[0].FinishReason, err)
	}
	out.Findings, out.Notes = findings, notes
	return out, nil
}

type answer struct {
	Findings *[]struct {
		Severity string `json:"severity"`
		Path     string `json:"path"`
		Line     int    `json:"line"`
		Title    string `json:"title"`
		Body     string `json:"body"`
	} `json:"findings"`
}

// parseFindings reads the content: the findings JSON, bare or in a
// ```json (or bare ```) fence.
func parseFindings(content string) ([]review.SemanticFinding, []string, error) {
	s := strings.TrimSpace(content)
	if rest, ok := strings.CutPrefix(s, "```"); ok {
		nl := strings.IndexByte(rest, '\n')
		lang := ""
		if nl >= 0 {
			lang = strings.TrimSpace(rest[:nl])
		}
		body, closed := strings.CutSuffix(strings.TrimSpace(rest[nl+1:]), "```")
		if nl < 0 || !closed || (lang != "" && lang != "json") {
			return nil, nil, errors.New("content is a fence but not one ```json block")
		}
		s = strings.TrimSpace(body)
	}
	dec := json.NewDecoder(strings.NewReader(s))
	var a answer
	if err := dec.Decode(&a); err != nil {
		return nil, nil, fmt.Errorf("content is not JSON: %w", err)
	}
	if dec.More() {
		return nil, nil, errors.New("content has text after the JSON")
	}
	if a.Findings == nil {
		return nil, nil, errors.New(`content has no "findings" list`)
	}
	var out []review.SemanticFinding
	var notes []string
	unknown := 0
	for i, f := range *a.Findings {
		if i == MaxFindings {
			notes = append(notes, fmt.Sprintf("gilf dropped %d model findings over the cap of %d", len(*a.Findings)-i, MaxFindings))
			break
		}
		sev, ok := review.ModelSeverity(f.Severity)
		if !ok {
			sev, _ = review.ModelSeverity("low")
			unknown++
		}
		out = append(out, review.SemanticFinding{Severity: sev, Path: strings.TrimPrefix(f.Path, "./"), Line: max(0, f.Line), Title: clipLine(f.Title, maxTitleOutBytes), Body: cutBody(f.Body)})
	}
	if unknown > 0 {
		notes = append(notes, fmt.Sprintf("%d model findings had an unknown severity and count as low", unknown))
	}
	return out, notes, nil
}

// cutBody keeps at most MaxFindingBodyBytes of a finding's body, saying
// how much was cut.
func cutBody(s string) string {
	if len(s) <= MaxFindingBodyBytes {
		return s
	}
	const marker = "\n[gilf cut %d bytes of this finding]"
	keep := MaxFindingBodyBytes - len(marker) - 8
	for keep > 0 && s[keep]&0xC0 == 0x80 {
		keep--
	}
	return s[:keep] + fmt.Sprintf(marker, len(s)-keep)
}
