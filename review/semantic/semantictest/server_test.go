package semantictest

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

func post(t *testing.T, url, key, contentType, body string) (int, string, http.Header) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", contentType)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(data), resp.Header
}

// The stand-in refuses what OpenAI refuses, in OpenAI's error shape,
// before it spends a scripted answer.
func TestServerWire(t *testing.T) {
	s := New(t, "k")
	good := `{"model":"m","messages":[{"role":"user","content":"hi"}]}`
	tests := []struct {
		name, path, key, ctype, body string
		status                       int
		message                      string
	}{
		{"wrong path", "/completions", "k", "application/json", good, 404, "Invalid URL (POST /v1/completions)"},
		{"no key", "/chat/completions", "", "application/json", good, 401, "Incorrect API key provided."},
		{"bad JSON", "/chat/completions", "k", "application/json", "{", 400, "We could not parse the JSON body of your request."},
		{"no messages", "/chat/completions", "k", "application/json", `{"model":"m"}`, 400, "you must provide a model parameter and messages"},
		{"script empty", "/chat/completions", "k", "application/json", good, 500, "semantictest: no scripted answer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, body, _ := post(t, s.URL+tt.path, tt.key, tt.ctype, tt.body)
			var e struct {
				Error struct {
					Message string  `json:"message"`
					Type    string  `json:"type"`
					Param   *string `json:"param"`
					Code    *string `json:"code"`
				} `json:"error"`
			}
			if status != tt.status || json.Unmarshal([]byte(body), &e) != nil || e.Error.Message != tt.message || e.Error.Type == "" {
				t.Errorf("got %d %s", status, body)
			}
		})
	}

	s.Push(Completion("m", `{"findings":[]}`, Usage{PromptTokens: 3, CompletionTokens: 2, TotalTokens: 5}).WithHeader("X-Request-Id", "req_1"))
	status, body, h := post(t, s.URL+"/chat/completions", "k", "application/json", good)
	var c struct {
		Object  string `json:"object"`
		Choices []struct {
			Message struct {
				Role    string `json:"role"`
				Content string `json:"content"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage Usage `json:"usage"`
	}
	if status != 200 || h.Get("X-Request-Id") != "req_1" || json.Unmarshal([]byte(body), &c) != nil ||
		c.Object != "chat.completion" || len(c.Choices) != 1 || c.Choices[0].Message.Role != "assistant" ||
		c.Choices[0].Message.Content != `{"findings":[]}` || c.Choices[0].FinishReason != "stop" || c.Usage.TotalTokens != 5 {
		t.Errorf("completion: %d %s", status, body)
	}
	if n := len(s.Requests()); n != len(tests) { // the wrong path is not a chat request
		t.Errorf("recorded %d requests", n)
	}
}
