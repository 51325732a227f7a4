package docker

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/shiroagent/shiro/sandbox"
)

// totalsWriter keeps the lines and the totals it is given.
type totalsWriter struct {
	bytes.Buffer
	totals []sandbox.Total
}

func (w *totalsWriter) Total(t sandbox.Total) { w.totals = append(w.totals, t) }

func TestDecodeImageStreamTotals(t *testing.T) {
	t.Parallel()
	t.Run("a pull's bytes are summed over its layers", func(t *testing.T) {
		t.Parallel()
		stream := strings.Join([]string{
			`{"status":"Pulling fs layer","id":"a"}`,
			`{"status":"Pulling fs layer","id":"b"}`,
			`{"status":"Already exists","id":"c"}`,
			`{"status":"Downloading","id":"a","progressDetail":{"current":500,"total":1000}}`,
			`{"status":"Downloading","id":"a","progressDetail":{"current":501,"total":1000}}`,
			`{"status":"Downloading","id":"b","progressDetail":{"current":1000,"total":3000}}`,
			`{"status":"Download complete","id":"a"}`,
			`{"status":"Extracting","id":"a","progressDetail":{"current":10,"total":1000}}`,
			`{"status":"Download complete","id":"b"}`,
			`{"status":"Pull complete","id":"b"}`,
		}, "\n")
		var w totalsWriter
		if err := decodeImageStream(strings.NewReader(stream), &w); err != nil {
			t.Fatal(err)
		}
		want := []sandbox.Total{{Done: 500, Of: 1000}, {Done: 1501, Of: 4000}, {Done: 2000, Of: 4000}, {Done: 4000, Of: 4000}}
		if !slices.Equal(w.totals, want) {
			t.Errorf("totals %+v, want %+v", w.totals, want)
		}
		if !strings.Contains(w.String(), "a: Downloading") {
			t.Errorf("the lines are gone:\n%s", w.String())
		}
	})
	t.Run("a build's steps", func(t *testing.T) {
		t.Parallel()
		stream := `{"stream":"Step 1/3 : FROM x\n"}{"stream":"Step 2/3 : RUN a\n"}{"stream":"ok\n"}{"stream":"Step 3/3 : LABEL b\n"}`
		var w totalsWriter
		if err := decodeImageStream(strings.NewReader(stream), &w); err != nil {
			t.Fatal(err)
		}
		want := []sandbox.Total{{Build: true, Done: 0, Of: 3}, {Build: true, Done: 1, Of: 3}, {Build: true, Done: 2, Of: 3}}
		if !slices.Equal(w.totals, want) {
			t.Errorf("totals %+v, want %+v", w.totals, want)
		}
	})
	t.Run("shared callers each get the totals", func(t *testing.T) {
		t.Parallel()
		var f progressFanout
		var a, b totalsWriter
		defer f.attach(&a)()
		defer f.attach(&b)()
		sandbox.ReportTotal(&f, sandbox.Total{Done: 1, Of: 2})
		if len(a.totals) != 1 || len(b.totals) != 1 {
			t.Errorf("fanout gave %v and %v", a.totals, b.totals)
		}
	})
}
