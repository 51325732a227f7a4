package tui

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/shiroagent/shiro/agent"
	"github.com/shiroagent/shiro/internal/confine"
)

// preview is what an approval prompt shows about a call, computed off the
// UI goroutine (it reads the file an edit would change).
type preview struct {
	command string // bash
	// A diff (write_file, edit_file, multi_edit).
	diff           bool
	label          string
	rows           []diffRow
	added, removed int
	problem        string // why the edit would fail, when it would
	json           string // anything else
}

// buildPreview describes req: the command of bash, the sentence the
// session put on a publish_port call, the diff of an edit (the file read
// through the workspace root, the edit applied in memory), or the
// pretty-printed arguments.
func buildPreview(read previewReader, req agent.ApprovalRequest) preview {
	var in struct {
		Command    string `json:"command"`
		Approval   string `json:"approval"`
		Path       string `json:"path"`
		Content    string `json:"content"`
		OldString  string `json:"oldString"`
		NewString  string `json:"newString"`
		ReplaceAll bool   `json:"replaceAll"`
		Edits      []struct {
			OldString  string `json:"oldString"`
			NewString  string `json:"newString"`
			ReplaceAll bool   `json:"replaceAll"`
		} `json:"edits"`
	}
	if json.Unmarshal(req.Input, &in) != nil {
		return preview{json: prettyJSON(req.Input)}
	}
	switch req.Tool {
	case "bash":
		return preview{command: in.Command}
	case "publish_port":
		// The session words the question (the ports, what listens there);
		// a model's own "approval" fails the tool's check before any ask.
		if in.Approval != "" {
			return preview{command: in.Approval}
		}
		return preview{json: prettyJSON(req.Input)}
	case "write_file", "edit_file", "multi_edit":
	default:
		return preview{json: prettyJSON(req.Input)}
	}
	old, exists, problem := read(in.Path)
	p := preview{diff: true, label: in.Path}
	if problem != "" && (req.Tool != "write_file" || exists) {
		p.problem = problem
		return p
	}
	var content string
	switch req.Tool {
	case "write_file":
		content = in.Content
		if !exists {
			p.label += " (new file)"
		}
	case "edit_file":
		content, p.problem = applyEdit(old, in.OldString, in.NewString, in.ReplaceAll, in.Path)
	case "multi_edit":
		content = old
		for i, e := range in.Edits {
			var prob string
			content, prob = applyEdit(content, e.OldString, e.NewString, e.ReplaceAll, in.Path)
			if prob != "" {
				p.problem = fmt.Sprintf("edit %d: %s", i+1, prob)
				break
			}
		}
	}
	if p.problem != "" {
		return p
	}
	p.rows, p.added, p.removed = diffRows(lineDiff(old, content))
	return p
}

// applyEdit replaces old by new in content as edit_file would, or says why
// it would fail.
func applyEdit(content, old, new string, all bool, path string) (string, string) {
	n := strings.Count(content, old)
	switch {
	case old == "":
		return content, "oldString is empty"
	case n == 0:
		return content, fmt.Sprintf("oldString not found in %s", path)
	case n > 1 && !all:
		return content, fmt.Sprintf("oldString appears %d times in %s", n, path)
	case all:
		return strings.ReplaceAll(content, old, new), ""
	}
	return strings.Replace(content, old, new, 1), ""
}

// previewReader reads the file at the model's path p for a preview: its
// content, whether it exists, or why it cannot be shown.
type previewReader func(p string) (content string, exists bool, problem string)

// hostReader reads previews through the workspace's root on this machine.
func hostReader(root *os.Root, workspace string) previewReader {
	return func(p string) (string, bool, string) { return confine.ReadPreview(root, workspace, p) }
}

// prettyJSON indents raw JSON (as it came when it does not parse).
func prettyJSON(raw json.RawMessage) string {
	var b bytes.Buffer
	if json.Indent(&b, raw, "", "  ") != nil {
		return string(raw)
	}
	return b.String()
}
