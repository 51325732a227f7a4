package fakemodel

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"
)

// openaiModel is the model id the fake reports in its responses and chunks.
const openaiModel = "gpt-fake"

// openaiSeq numbers response, item and call ids so they are unique across
// servers and requests, as the real API's are.
var openaiSeq atomic.Int64

// openaiID makes an id with the API's prefix for its kind ("rs", "msg",
// "fc", "call", "resp").
func openaiID(prefix string) string {
	return fmt.Sprintf("%s_fake%04d", prefix, openaiSeq.Add(1))
}

// OpenAIEncrypted is the encrypted_content the fake gives a reasoning item
// with the given summary text, so tests can check it is sent back unchanged.
func OpenAIEncrypted(reasoning string) string {
	sum := sha256.Sum256([]byte(reasoning))
	return "gAAAAA" + base64.StdEncoding.EncodeToString(sum[:18])
}

// openaiErrors maps statuses to the API's error type and code.
var openaiErrors = map[int]struct{ typ, code, msg string }{
	http.StatusBadRequest:          {"invalid_request_error", "", "Invalid request."},
	http.StatusUnauthorized:        {"invalid_request_error", "invalid_api_key", "Incorrect API key provided."},
	http.StatusForbidden:           {"invalid_request_error", "unsupported_country_region_territory", "Country, region, or territory not supported."},
	http.StatusNotFound:            {"invalid_request_error", "model_not_found", "The model `" + openaiModel + "` does not exist or you do not have access to it."},
	http.StatusTooManyRequests:     {"requests", "rate_limit_exceeded", "Rate limit reached for requests."},
	http.StatusInternalServerError: {"server_error", "", "The server had an error while processing your request. Sorry about that!"},
	http.StatusServiceUnavailable:  {"server_error", "", "The engine is currently overloaded, please try again later."},
}

// openaiError is the body of an error reply, the same shape for the
// Responses and Chat Completions APIs.
func openaiError(status int) string {
	e, ok := openaiErrors[status]
	if !ok {
		e.typ, e.msg = "invalid_request_error", http.StatusText(status)
		if status >= 500 {
			e.typ = "server_error"
		}
		if e.msg == "" {
			e.msg = fmt.Sprintf("status %d", status)
		}
	}
	var code any
	if e.code != "" {
		code = e.code
	}
	b, err := json.Marshal(map[string]any{"error": map[string]any{
		"message": e.msg, "type": e.typ, "param": nil, "code": code,
	}})
	if err != nil {
		panic(err)
	}
	return string(b)
}

// responses answers an OpenAI Responses API request with the real event
// stream: response.created and response.in_progress; an output item per
// reasoning summary, message and function call (output_item.added, its
// deltas and done events, output_item.done); then response.completed with
// every item and the usage. Error replies use the API's JSON error shape.
func (s *Server) responses(w http.ResponseWriter, rep Reply) {
	if !startSSE(w, rep, openaiError(rep.Status)) {
		return
	}

	seq := 0
	emit := func(typ string, data map[string]any) {
		data["type"] = typ
		data["sequence_number"] = seq
		seq++
		sse(w, typ, data)
	}
	resp := map[string]any{
		"id":                  openaiID("resp"),
		"object":              "response",
		"created_at":          time.Now().Unix(),
		"status":              "in_progress",
		"error":               nil,
		"incomplete_details":  nil,
		"instructions":        nil,
		"model":               openaiModel,
		"output":              []any{},
		"parallel_tool_calls": true,
		"store":               false,
		"tool_choice":         "auto",
		"tools":               []any{},
		"usage":               nil,
	}
	emit("response.created", map[string]any{"response": resp})
	emit("response.in_progress", map[string]any{"response": resp})

	var output []any
	index := 0
	added := func(item map[string]any) {
		emit("response.output_item.added", map[string]any{"output_index": index, "item": item})
	}
	done := func(item map[string]any) {
		emit("response.output_item.done", map[string]any{"output_index": index, "item": item})
		output = append(output, item)
		index++
	}

	if rep.Reasoning != "" {
		id := openaiID("rs")
		added(map[string]any{"id": id, "type": "reasoning", "summary": []any{}})
		summary := func(typ string, data map[string]any) {
			data["item_id"], data["output_index"], data["summary_index"] = id, index, 0
			emit(typ, data)
		}
		summary("response.reasoning_summary_part.added", map[string]any{"part": map[string]any{"type": "summary_text", "text": ""}})
		for _, p := range pieces(rep.Reasoning, rep.Chunks) {
			summary("response.reasoning_summary_text.delta", map[string]any{"delta": p})
		}
		summary("response.reasoning_summary_text.done", map[string]any{"text": rep.Reasoning})
		summary("response.reasoning_summary_part.done", map[string]any{"part": map[string]any{"type": "summary_text", "text": rep.Reasoning}})
		done(map[string]any{
			"id":                id,
			"type":              "reasoning",
			"encrypted_content": OpenAIEncrypted(rep.Reasoning),
			"summary":           []any{map[string]any{"type": "summary_text", "text": rep.Reasoning}},
		})
	}

	if rep.Text != "" {
		id := openaiID("msg")
		added(map[string]any{"id": id, "type": "message", "status": "in_progress", "role": "assistant", "content": []any{}})
		part := func(text string) map[string]any {
			return map[string]any{"type": "output_text", "annotations": []any{}, "logprobs": []any{}, "text": text}
		}
		emit("response.content_part.added", map[string]any{"item_id": id, "output_index": index, "content_index": 0, "part": part("")})
		for _, p := range pieces(rep.Text, rep.Chunks) {
			emit("response.output_text.delta", map[string]any{"item_id": id, "output_index": index, "content_index": 0, "delta": p, "logprobs": []any{}})
		}
		rep.stall()
		if rep.CutAfterText {
			return
		}
		emit("response.output_text.done", map[string]any{"item_id": id, "output_index": index, "content_index": 0, "text": rep.Text, "logprobs": []any{}})
		emit("response.content_part.done", map[string]any{"item_id": id, "output_index": index, "content_index": 0, "part": part(rep.Text)})
		done(map[string]any{"id": id, "type": "message", "status": "completed", "role": "assistant", "content": []any{part(rep.Text)}})
	} else {
		rep.stall()
	}
	if rep.CutAfterText {
		return
	}

	for _, tc := range rep.ToolCalls {
		id, callID := openaiID("fc"), tc.ID
		if callID == "" {
			callID = openaiID("call")
		}
		item := func(status, args string) map[string]any {
			return map[string]any{"id": id, "type": "function_call", "status": status, "arguments": args, "call_id": callID, "name": tc.Name}
		}
		added(item("in_progress", ""))
		if tc.Input != "" {
			for _, p := range pieces(tc.Input, 3) {
				emit("response.function_call_arguments.delta", map[string]any{"item_id": id, "output_index": index, "delta": p})
			}
		}
		emit("response.function_call_arguments.done", map[string]any{"item_id": id, "output_index": index, "name": tc.Name, "arguments": tc.Input})
		done(item("completed", tc.Input))
	}

	resp["status"] = "completed"
	resp["completed_at"] = time.Now().Unix()
	resp["output"] = append([]any{}, output...)
	resp["usage"] = map[string]any{
		"input_tokens":          rep.InputTokens,
		"input_tokens_details":  map[string]any{"cached_tokens": 0},
		"output_tokens":         rep.OutputTokens,
		"output_tokens_details": map[string]any{"reasoning_tokens": 0},
		"total_tokens":          rep.InputTokens + rep.OutputTokens,
	}
	emit("response.completed", map[string]any{"response": resp})
}

// chat answers an OpenAI Chat Completions request with the real chunk
// stream: a role chunk; reasoning_content deltas (as vLLM and DeepSeek send
// them); content deltas; tool_calls deltas (index, id and name first, then
// the arguments in pieces); a chunk with the finish reason; a usage chunk
// when the request set stream_options.include_usage; then data: [DONE].
// Error replies use the API's JSON error shape.
func (s *Server) chat(w http.ResponseWriter, rep Reply) {
	usage := s.usageRequested()
	if !startSSE(w, rep, openaiError(rep.Status)) {
		return
	}

	id, created := openaiID("chatcmpl"), time.Now().Unix()
	chunk := func(choices []any, usage any) {
		sse(w, "", map[string]any{
			"id":                 id,
			"object":             "chat.completion.chunk",
			"created":            created,
			"model":              openaiModel,
			"system_fingerprint": "fp_fake",
			"choices":            choices,
			"usage":              usage,
		})
	}
	delta := func(d map[string]any, finish any) {
		chunk([]any{map[string]any{"index": 0, "delta": d, "logprobs": nil, "finish_reason": finish}}, nil)
	}

	delta(map[string]any{"role": "assistant", "content": "", "refusal": nil}, nil)
	if rep.Reasoning != "" {
		for _, p := range pieces(rep.Reasoning, rep.Chunks) {
			delta(map[string]any{"content": nil, "reasoning_content": p}, nil)
		}
	}
	if rep.Text != "" {
		for _, p := range pieces(rep.Text, rep.Chunks) {
			delta(map[string]any{"content": p}, nil)
		}
	}
	rep.stall()
	if rep.CutAfterText {
		return
	}

	for i, tc := range rep.ToolCalls {
		callID := tc.ID
		if callID == "" {
			callID = openaiID("call")
		}
		delta(map[string]any{"tool_calls": []any{map[string]any{
			"index": i, "id": callID, "type": "function",
			"function": map[string]any{"name": tc.Name, "arguments": ""},
		}}}, nil)
		if tc.Input != "" {
			for _, p := range pieces(tc.Input, 3) {
				delta(map[string]any{"tool_calls": []any{map[string]any{
					"index": i, "function": map[string]any{"arguments": p},
				}}}, nil)
			}
		}
	}

	finish := "stop"
	if len(rep.ToolCalls) > 0 {
		finish = "tool_calls"
	}
	delta(map[string]any{}, finish)
	if usage {
		chunk([]any{}, map[string]any{
			"prompt_tokens":             rep.InputTokens,
			"completion_tokens":         rep.OutputTokens,
			"total_tokens":              rep.InputTokens + rep.OutputTokens,
			"prompt_tokens_details":     map[string]any{"cached_tokens": 0, "audio_tokens": 0},
			"completion_tokens_details": map[string]any{"reasoning_tokens": 0, "audio_tokens": 0, "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0},
		})
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}

// usageRequested reports whether the chat request being answered — the last
// one recorded — asked for a usage chunk (stream_options.include_usage).
func (s *Server) usageRequested() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.requests) == 0 {
		return false
	}
	var body struct {
		StreamOptions struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
	}
	_ = json.Unmarshal(s.requests[len(s.requests)-1].Body, &body)
	return body.StreamOptions.IncludeUsage
}
