package tui

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/shiroagent/shiro/agent/llm"
)

// describeError is a failed request as one line: what happened and the
// next step. fallback is the error's text when err is nil (an error event
// without an error value).
func describeError(err error, fallback string) string {
	msg := fallback
	if err != nil {
		msg = err.Error()
	}
	msg = firstLine(clean(msg))
	var status *llm.StatusError
	var netErr net.Error
	var opErr *net.OpError
	step := ""
	switch {
	case errors.As(err, &status):
		msg = status.Error()
		switch s := status.Status; {
		case s == 401 || s == 403:
			step = "check the key: /provider"
		case s == 404:
			step = "check the model and the endpoint: /model, /provider"
		case s == 400 || s == 413 || s == 422:
			step = "the request was refused: /compact may help if the context is large"
		case s == 429:
			step = "rate limited: wait a moment, then up, enter sends the prompt again"
		case s >= 500:
			step = "the provider failed: up, enter sends the prompt again"
		}
	case errors.Is(err, context.DeadlineExceeded):
		step = "the endpoint took too long: try again, or check it with /provider"
	case errors.As(err, &opErr), errors.As(err, &netErr):
		step = "cannot reach the endpoint: check the URL (/provider) and the network"
	case errors.Is(err, llm.ErrNoFinish):
		step = "the reply was cut off: up, enter sends the prompt again"
	}
	line := "error: " + strings.TrimSpace(clean(msg))
	if step != "" {
		line += " - " + step
	}
	return line
}

// listingWarning is why a model listing gave nothing to pick from, in one
// line.
func listingWarning(url string, err error) string {
	line := describeError(err, "")
	return fmt.Sprintf("%s: %s", url, strings.TrimPrefix(line, "error: "))
}
