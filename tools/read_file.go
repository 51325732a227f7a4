package tools

import (
	"bufio"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"syscall"
)

//go:embed read_file.md
var readFileDoc string

// Line window defaults shared by read_file and read_many_files.
const (
	defaultReadLimit = 2000
)

type readFileParams struct {
	Path   string `json:"path" desc:"Workspace-relative path."`
	Offset int    `json:"offset,omitempty" jsonschema:"minimum=1,default=1" desc:"First line (1-based)."`
	Limit  int    `json:"limit,omitempty" jsonschema:"minimum=1,default=2000" desc:"Lines to read."`
}

// NewReadFile returns the read_file tool.
func NewReadFile() Tool {
	return newFileTool("read_file", SetCore, false, readFileDoc, func(ctx context.Context, env *Env, p *readFileParams) (Result, error) {
		text, problem := readLines(env, p.Path, p.Offset, p.Limit)
		if problem != "" {
			return Errorf("%s", problem), nil
		}
		return Text(text), nil
	})
}

// readerPool recycles the buffered readers of readLines.
var readerPool = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 32<<10) }}

// readLines returns lines offset..offset+limit-1 of the file at p, each
// prefixed "<n>: ", capped at MaxOutput characters; or, when the file
// cannot be read as text, the problem for the model. The file is streamed:
// only the window is kept, and only MaxOutput characters of it.
func readLines(env *Env, p string, offset, limit int) (string, string) {
	rel, err := resolvePath(env, p)
	if err != nil {
		return "", fileProblem(env.Root, p, err)
	}
	// O_NONBLOCK: opening a FIFO must not hang; it is refused below.
	f, err := env.Root.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return "", fileProblem(env.Root, p, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", fileProblem(env.Root, p, err)
	}
	switch {
	case fi.IsDir():
		return "", fmt.Sprintf("%s is a directory, not a file. Use list_dir to see what it holds.", p)
	case !fi.Mode().IsRegular():
		return "", fmt.Sprintf("%s is not a regular file.", p)
	}
	br := readerPool.Get().(*bufio.Reader)
	br.Reset(f)
	defer func() {
		br.Reset(nil)
		readerPool.Put(br)
	}()
	head, err := br.Peek(BinarySniff)
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, bufio.ErrBufferFull) {
		return "", fileProblem(env.Root, p, err)
	}
	if IsBinary(head) {
		return "", fmt.Sprintf("%s is a binary file, not text. Use bash if you need to inspect it.", p)
	}
	if offset < 1 {
		offset = 1
	}
	if limit < 1 {
		limit = defaultReadLimit
	}
	end := offset + limit // first line not shown
	if end < offset {     // overflow
		end = int(^uint(0) >> 1)
	}
	// Room for the text and its line prefixes, up to what the cap keeps.
	out := capWriter{buf: make([]byte, 0, min(fi.Size()+fi.Size()/4+16, 4*MaxOutput))}
	line, atStart, shown := 1, true, 0
	var num []byte
	for line < end {
		chunk, err := br.ReadSlice('\n')
		if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, bufio.ErrBufferFull) {
			return "", fileProblem(env.Root, p, err)
		}
		if line >= offset {
			if atStart {
				if shown > 0 {
					out.WriteByte('\n')
				}
				num = append(strconv.AppendInt(num[:0], int64(line), 10), ':', ' ')
				out.Write(num)
				shown++
			}
			body := chunk
			if n := len(body); n > 0 && body[n-1] == '\n' {
				body = body[:n-1]
			}
			out.Write(body)
		}
		atStart = false
		if n := len(chunk); n > 0 && chunk[n-1] == '\n' {
			line++
			atStart = true
		}
		if errors.Is(err, io.EOF) {
			break
		}
	}
	return out.String(), ""
}
