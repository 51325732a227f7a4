package openai

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"

	"github.com/openai/openai-go/v3/option"
)

// errorShape rewrites an error body that compatible servers send in a shape
// of their own ({"error": "text"} from xAI, {"message": "text"} from vLLM)
// into OpenAI's ({"error": {"message": "text"}}), so that the status and
// the message reach the caller instead of a decoding error of the SDK.
func errorShape(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
	res, err := next(req)
	if err != nil || res.StatusCode < 400 || res.Body == nil {
		return res, err
	}
	body, readErr := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	res.Body.Close()
	res.Body = io.NopCloser(bytes.NewReader(body))
	if readErr != nil {
		return res, nil
	}
	var doc map[string]json.RawMessage
	if json.Unmarshal(body, &doc) != nil {
		return res, nil
	}
	msg := doc["error"]
	if len(msg) > 0 && msg[0] == '{' {
		return res, nil // OpenAI's shape
	}
	if len(msg) == 0 || msg[0] != '"' {
		msg = doc["message"]
	}
	var text string
	if json.Unmarshal(msg, &text) != nil || text == "" {
		return res, nil
	}
	e := map[string]any{"message": text}
	var code string
	if json.Unmarshal(doc["code"], &code) == nil && code != "" {
		e["code"] = code
	}
	out, err := json.Marshal(map[string]any{"error": e})
	if err != nil {
		return res, nil
	}
	res.Body = io.NopCloser(bytes.NewReader(out))
	res.ContentLength = int64(len(out))
	res.Header.Del("Content-Length")
	return res, nil
}
