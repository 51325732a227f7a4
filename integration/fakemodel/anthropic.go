package fakemodel

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"sync/atomic"
)

// anthropicModel is the model id the fake reports in message_start.
const anthropicModel = "claude-fake"

// anthropicSeq numbers message and tool-use ids so they are unique across
// servers and requests, as the real API's are.
var anthropicSeq atomic.Int64

// AnthropicSignature is the signature the fake gives a thinking block with the given
// text, so tests can check it is sent back unchanged.
func AnthropicSignature(reasoning string) string {
	sum := sha256.Sum256([]byte(reasoning))
	return "sig_" + base64.StdEncoding.EncodeToString(sum[:12])
}

// anthropicErrorTypes maps statuses to the API's error types.
var anthropicErrorTypes = map[int]string{
	http.StatusBadRequest:            "invalid_request_error",
	http.StatusUnauthorized:          "authentication_error",
	http.StatusForbidden:             "permission_error",
	http.StatusNotFound:              "not_found_error",
	http.StatusRequestEntityTooLarge: "request_too_large",
	http.StatusTooManyRequests:       "rate_limit_error",
	http.StatusInternalServerError:   "api_error",
	http.StatusServiceUnavailable:    "overloaded_error",
	529:                              "overloaded_error",
}

// anthropicError is the body of an error reply.
func anthropicError(status int) map[string]any {
	typ, ok := anthropicErrorTypes[status]
	if !ok {
		typ = "api_error"
	}
	msg := http.StatusText(status)
	if typ == "overloaded_error" {
		msg = "Overloaded"
	}
	if msg == "" {
		msg = fmt.Sprintf("status %d", status)
	}
	return map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": msg}}
}

// anthropic answers a Messages API request with the real event stream:
// message_start, a content block per thinking / text / tool_use item (each
// start, deltas, stop), message_delta with the stop reason and usage, and
// message_stop. Error replies use the API's JSON error shape.
func (s *Server) anthropic(w http.ResponseWriter, rep Reply) {
	body, err := json.Marshal(anthropicError(rep.Status))
	if err != nil {
		panic(err)
	}
	if !startSSE(w, rep, string(body)) {
		return
	}

	startOut := 0
	if rep.OutputTokens > 0 {
		startOut = 1
	}
	sse(w, "message_start", map[string]any{
		"type": "message_start",
		"message": map[string]any{
			"id":            fmt.Sprintf("msg_fake%04d", anthropicSeq.Add(1)),
			"type":          "message",
			"role":          "assistant",
			"model":         anthropicModel,
			"content":       []any{},
			"stop_reason":   nil,
			"stop_sequence": nil,
			"usage": map[string]any{
				"input_tokens":                rep.InputTokens,
				"cache_creation_input_tokens": 0,
				"cache_read_input_tokens":     0,
				"output_tokens":               startOut,
			},
		},
	})
	sse(w, "ping", map[string]any{"type": "ping"})

	index := 0
	blockStart := func(block map[string]any) {
		sse(w, "content_block_start", map[string]any{"type": "content_block_start", "index": index, "content_block": block})
	}
	blockDelta := func(delta map[string]any) {
		sse(w, "content_block_delta", map[string]any{"type": "content_block_delta", "index": index, "delta": delta})
	}
	blockStop := func() {
		sse(w, "content_block_stop", map[string]any{"type": "content_block_stop", "index": index})
		index++
	}

	if rep.Reasoning != "" {
		blockStart(map[string]any{"type": "thinking", "thinking": "", "signature": ""})
		for _, p := range pieces(rep.Reasoning, rep.Chunks) {
			blockDelta(map[string]any{"type": "thinking_delta", "thinking": p})
		}
		blockDelta(map[string]any{"type": "signature_delta", "signature": AnthropicSignature(rep.Reasoning)})
		blockStop()
	}

	if rep.Text != "" {
		blockStart(map[string]any{"type": "text", "text": ""})
		for _, p := range pieces(rep.Text, rep.Chunks) {
			blockDelta(map[string]any{"type": "text_delta", "text": p})
		}
		rep.stall()
		if rep.CutAfterText {
			return
		}
		blockStop()
	} else {
		rep.stall()
	}
	if rep.CutAfterText {
		return
	}

	for _, tc := range rep.ToolCalls {
		id := tc.ID
		if id == "" {
			id = fmt.Sprintf("toolu_fake%04d", anthropicSeq.Add(1))
		}
		blockStart(map[string]any{"type": "tool_use", "id": id, "name": tc.Name, "input": map[string]any{}})
		// The API opens with an empty fragment, then streams the arguments.
		blockDelta(map[string]any{"type": "input_json_delta", "partial_json": ""})
		if tc.Input != "" {
			for _, p := range pieces(tc.Input, 3) {
				blockDelta(map[string]any{"type": "input_json_delta", "partial_json": p})
			}
		}
		blockStop()
	}

	stop := "end_turn"
	if len(rep.ToolCalls) > 0 {
		stop = "tool_use"
	}
	sse(w, "message_delta", map[string]any{
		"type":  "message_delta",
		"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
		"usage": map[string]any{
			"input_tokens":                rep.InputTokens,
			"cache_creation_input_tokens": 0,
			"cache_read_input_tokens":     0,
			"output_tokens":               rep.OutputTokens,
		},
	})
	sse(w, "message_stop", map[string]any{"type": "message_stop"})
}
