// Package httpretry retries the transient failures of a model API's HTTP
// requests for the providers' SDKs, whose own retries are turned off: the
// SDKs wait without saying so, while this middleware reports every wait
// through llm.ReportRetry before it starts, with the delay it really takes.
//
// Transient is the SDKs' rule: a connection error, or status 408, 409, 429
// or 5xx, unless the x-should-retry header says otherwise. The wait is the
// server's retry-after-ms or retry-after (at most MaxWait; a longer one is
// not waited for), else half a second doubling up to 8 seconds.
package httpretry

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/shiroagent/shiro/agent/llm"
)

// MaxWait is the longest retry-after honoured; a server asking for more is
// not retried.
const MaxWait = time.Minute

// countHeader numbers the attempts for the server, as the SDKs do.
const countHeader = "X-Stainless-Retry-Count"

// Next sends one attempt (the SDKs' MiddlewareNext).
type Next = func(*http.Request) (*http.Response, error)

// Middleware returns an SDK middleware that makes up to retries more
// attempts of a request that failed transiently.
func Middleware(retries int) func(*http.Request, Next) (*http.Response, error) {
	return func(req *http.Request, next Next) (*http.Response, error) {
		return do(req, next, retries, backoff)
	}
}

// backoff doubles from half a second up to 8 seconds.
func backoff(retry int) time.Duration {
	if retry >= 4 {
		return 8 * time.Second
	}
	return 500 * time.Millisecond << retry
}

func do(req *http.Request, next Next, retries int, wait func(int) time.Duration) (*http.Response, error) {
	ctx := req.Context()
	replayable := req.Body == nil || req.Body == http.NoBody || req.GetBody != nil
	attempt := req
	for n := 0; ; n++ {
		res, err := next(attempt)
		if n >= retries || !replayable || ctx.Err() != nil || !transient(res, err) {
			return res, err
		}
		delay, ok := retryAfter(res)
		if !ok {
			delay = wait(n)
		}
		if delay > MaxWait {
			return res, err
		}
		reason := why(res, err)
		if res != nil {
			res.Body.Close()
		}
		attempt = req.Clone(ctx)
		if req.GetBody != nil {
			body, gerr := req.GetBody()
			if gerr != nil {
				return nil, fmt.Errorf("retry %s %s: %w", req.Method, req.URL.Path, gerr)
			}
			attempt.Body = body
		}
		if req.Header.Get(countHeader) != "" {
			attempt.Header.Set(countHeader, strconv.Itoa(n+1))
		}
		llm.ReportRetry(ctx, llm.Retry{Attempt: n + 2, Attempts: retries + 1, Delay: delay, Reason: reason})
		if err := sleep(ctx, delay); err != nil {
			return nil, err
		}
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// transient reports whether an attempt's failure may pass on its own.
func transient(res *http.Response, err error) bool {
	if err != nil {
		return !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
	}
	switch res.Header.Get("x-should-retry") {
	case "true":
		return true
	case "false":
		return false
	}
	s := res.StatusCode
	return s == http.StatusRequestTimeout || s == http.StatusConflict || s == http.StatusTooManyRequests || s >= 500
}

// retryAfter is the wait the server asked for, if it did.
func retryAfter(res *http.Response) (time.Duration, bool) {
	if res == nil {
		return 0, false
	}
	if v := res.Header.Get("retry-after-ms"); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms >= 0 {
			return time.Duration(ms * float64(time.Millisecond)), true
		}
	}
	v := res.Header.Get("retry-after")
	if v == "" {
		return 0, false
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil && s >= 0 {
		return time.Duration(s * float64(time.Second)), true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(0, time.Until(t)), true
	}
	return 0, false
}

// why is the one-line reason of a failed attempt: the status and the API's
// message, or the connection error.
func why(res *http.Response, err error) string {
	if err != nil {
		line, _, _ := strings.Cut(err.Error(), "\n")
		return line
	}
	s := strconv.Itoa(res.StatusCode)
	if t := http.StatusText(res.StatusCode); t != "" {
		s += " " + t
	}
	body, _ := io.ReadAll(io.LimitReader(res.Body, 64<<10))
	if msg := Message(body); msg != "" {
		s += ": " + msg
	}
	return s
}

// Message is the human message of a model API's JSON error body
// (error.message, or message), on one line and at most 200 characters; ""
// when the body is not such a document (an HTML page, say).
func Message(body []byte) string {
	body = bytes.TrimSpace(body)
	if len(body) == 0 || body[0] != '{' {
		return ""
	}
	var doc struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
	}
	if json.Unmarshal(body, &doc) != nil {
		return ""
	}
	msg := doc.Message
	var inner struct {
		Message string `json:"message"`
	}
	if len(doc.Error) > 0 && json.Unmarshal(doc.Error, &inner) == nil && inner.Message != "" {
		msg = inner.Message
	} else if s := ""; len(doc.Error) > 0 && json.Unmarshal(doc.Error, &s) == nil && s != "" {
		msg = s
	}
	return OneLine(msg, 200)
}

// OneLine joins the lines of s with spaces and cuts it at n runes.
func OneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		s = string(r[:n]) + "..."
	}
	return s
}
