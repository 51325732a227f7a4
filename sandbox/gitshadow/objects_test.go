package gitshadow

import (
	"bytes"
	"compress/zlib"
	"crypto/sha1"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
)

// zlibOf compresses b as git does.
func zlibOf(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := zlib.NewWriter(&buf)
	if _, err := w.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// allocated returns the bytes f allocates (the test must not run in
// parallel with others for the figure to be f's).
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

func TestLooseObjectLimits(t *testing.T) {
	t.Parallel()
	hello := plumbing.ComputeHash(plumbing.BlobObject, []byte("hello")).String()
	big := bytes.Repeat([]byte("x"), 2048)
	cases := []struct {
		name, oid string
		data      []byte
		want      string
	}{
		{"content longer than its header says", hello, []byte("blob 5\x00hello world"), "longer"},
		{"content shorter than its header says", hello, []byte("blob 9\x00hello"), "shorter"},
		{"a size over the limit", plumbing.ComputeHash(plumbing.BlobObject, big).String(), append([]byte("blob 2048\x00"), big...), "more than 1024"},
		{"a delta type", plumbing.NewHasher(plumbing.OFSDeltaObject, 1).Sum().String(), []byte("ofs-delta 1\x00x"), "type"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newObjectStore(t.TempDir())
			s.maxObject = 1024
			err := s.importLoose(tc.oid, zlibOf(t, tc.data))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("importLoose: %v, want an error saying %q", err, tc.want)
			}
			if _, err := os.Stat(filepath.Join(s.dir, tc.oid[:2], tc.oid[2:])); err == nil {
				t.Error("the object was written")
			}
		})
	}
	t.Run("bytes after the zlib stream", func(t *testing.T) {
		t.Parallel()
		s := newObjectStore(t.TempDir())
		err := s.importLoose(hello, append(zlibOf(t, []byte("blob 5\x00hello")), "junk"...))
		if err == nil || !strings.Contains(err.Error(), "after the zlib stream") {
			t.Fatalf("importLoose: %v", err)
		}
	})
	t.Run("the same object is taken", func(t *testing.T) {
		t.Parallel()
		s := newObjectStore(t.TempDir())
		if err := s.importLoose(hello, zlibOf(t, []byte("blob 5\x00hello"))); err != nil {
			t.Fatal(err)
		}
	})
}

// A header that never ends is refused without being read: go-git's reader
// would collect it into memory up to its NUL.
func TestLooseObjectHeaderWithoutEnd(t *testing.T) {
	data := zlibOf(t, append([]byte("blob "), bytes.Repeat([]byte("1"), 8<<20)...))
	s := newObjectStore(t.TempDir())
	var err error
	n := allocated(func() { err = s.importLoose(strings.Repeat("a", 40), data) })
	if err == nil || !strings.Contains(err.Error(), "no header") {
		t.Fatalf("importLoose: %v", err)
	}
	if n > 2<<20 {
		t.Errorf("refusing a header of 8 MiB allocated %d bytes", n)
	}
}

// packObj is one entry of a pack built by hand: an object, or a delta on
// the entry base (OFS_DELTA) or on the object ref (REF_DELTA).
type packObj struct {
	typ  plumbing.ObjectType
	data []byte
	size int64 // the size the header declares; -1: len(data)
	base int   // OFS_DELTA: the index of the base entry
	ref  plumbing.Hash
}

// buildPack writes a pack of objs declaring count objects, with extra
// after its trailer.
func buildPack(t *testing.T, count uint32, objs []packObj, extra []byte) string {
	t.Helper()
	var buf bytes.Buffer
	buf.WriteString("PACK")
	binary.Write(&buf, binary.BigEndian, uint32(2))
	binary.Write(&buf, binary.BigEndian, count)
	offsets := make([]int, len(objs))
	for i, o := range objs {
		offsets[i] = buf.Len()
		size := o.size
		if size < 0 {
			size = int64(len(o.data))
		}
		c := byte(o.typ)<<4 | byte(size&0x0f)
		for size >>= 4; size > 0; size >>= 7 {
			buf.WriteByte(c | 0x80)
			c = byte(size & 0x7f)
		}
		buf.WriteByte(c)
		switch o.typ {
		case plumbing.OFSDeltaObject:
			ofs := uint64(offsets[i] - offsets[o.base])
			var enc [10]byte
			pos := len(enc) - 1
			enc[pos] = byte(ofs & 0x7f)
			for ofs >>= 7; ofs > 0; ofs >>= 7 {
				ofs--
				pos--
				enc[pos] = 0x80 | byte(ofs&0x7f)
			}
			buf.Write(enc[pos:])
		case plumbing.REFDeltaObject:
			buf.Write(o.ref[:])
		}
		buf.Write(zlibOf(t, o.data))
	}
	sum := sha1.Sum(buf.Bytes())
	buf.Write(sum[:])
	buf.Write(extra)
	p := filepath.Join(t.TempDir(), "in.pack")
	if err := os.WriteFile(p, buf.Bytes(), 0o444); err != nil {
		t.Fatal(err)
	}
	return p
}

// delta makes a git delta turning base into base's first n bytes copied
// times times, then add.
func delta(base []byte, n, times int, add string) []byte {
	varint := func(b []byte, v int) []byte {
		for ; v >= 0x80; v >>= 7 {
			b = append(b, byte(v)|0x80)
		}
		return append(b, byte(v))
	}
	d := varint(nil, len(base))
	d = varint(d, n*times+len(add))
	for range times {
		d = append(d, 0x80|0x10|0x20, byte(n), byte(n>>8)) // copy from offset 0, two size bytes
	}
	if add != "" {
		d = append(d, byte(len(add)))
		d = append(d, add...)
	}
	return d
}

func TestPackLimits(t *testing.T) {
	t.Parallel()
	base := bytes.Repeat([]byte("base line\n"), 100)
	baseID := plumbing.ComputeHash(plumbing.BlobObject, base)
	blob := packObj{typ: plumbing.BlobObject, data: base, size: -1}
	chain := func(n int) []packObj {
		objs := []packObj{blob}
		prev := base
		for i := range n {
			objs = append(objs, packObj{typ: plumbing.OFSDeltaObject, data: delta(prev, len(prev), 1, "+"), size: -1, base: i})
			prev = append(append([]byte{}, prev...), '+')
		}
		return objs
	}
	cases := []struct {
		name  string
		count uint32
		objs  []packObj
		extra []byte
		want  string
	}{
		{"2^31 objects declared", 1 << 31, []packObj{blob}, nil, "objects declared"},
		{"an object over the limit", 1, []packObj{{typ: plumbing.BlobObject, data: bytes.Repeat([]byte("x"), 5000), size: -1}}, nil, "more than 4096"},
		{"an object shorter than its header", 1, []packObj{{typ: plumbing.BlobObject, data: []byte("short"), size: 10}}, nil, "header says 10"},
		{"an object longer than its header", 1, []packObj{{typ: plumbing.BlobObject, data: []byte("longer than ten"), size: 10}}, nil, "exceeds declared size"},
		{"a delta whose result is over the limit", 2, []packObj{blob, {typ: plumbing.OFSDeltaObject, data: delta(base, len(base), 5, ""), size: -1, base: 0}}, nil, "delta result of 5000 bytes"},
		{"a chain of 4,096 deltas", 4097, chain(4096), nil, "more than 4095 deltas"},
		{"an object twice", 2, []packObj{blob, blob}, nil, "twice"},
		{"bytes after the trailer", 1, []packObj{blob}, []byte("junk"), "after the trailer"},
		{"a base outside the pack", 1, []packObj{{typ: plumbing.REFDeltaObject, data: delta(base, 10, 1, ""), size: -1, ref: baseID}}, nil, "thin packs"},
		{"a bad type", 1, []packObj{{typ: 5, data: base, size: -1}}, nil, "bad object type"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path := buildPack(t, tc.count, tc.objs, tc.extra)
			s := newObjectStore(t.TempDir())
			s.maxObject = 4096
			if len(tc.objs) > 100 {
				s.maxObject = 8192 // the chain's last object is 5,096 bytes
			}
			err := s.importPack(path, "in.pack")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("importPack: %v, want an error saying %q", err, tc.want)
			}
			if idx, _ := filepath.Glob(filepath.Join(s.dir, "pack", "*.idx")); len(idx) != 0 {
				t.Errorf("an index was written: %v", idx)
			}
		})
	}
	t.Run("a chain of 4,095 deltas is taken", func(t *testing.T) {
		t.Parallel()
		s := newObjectStore(t.TempDir())
		s.maxObject = 8192
		if err := s.importPack(buildPack(t, 4096, chain(4095), nil), "in.pack"); err != nil {
			t.Fatal(err)
		}
	})
}

// A pack built by hand, with both kinds of delta and a REF_DELTA before
// its base, is imported with an index git takes for it.
func TestImportedPackIndexIsGits(t *testing.T) {
	requireGit(t)
	t.Parallel()
	base := bytes.Repeat([]byte("base line\n"), 100)
	baseID := plumbing.ComputeHash(plumbing.BlobObject, base)
	objs := []packObj{
		{typ: plumbing.REFDeltaObject, data: delta(base, 500, 2, "ref\n"), size: -1, ref: baseID},
		{typ: plumbing.BlobObject, data: base, size: -1},
		{typ: plumbing.OFSDeltaObject, data: delta(base, 300, 1, "ofs\n"), size: -1, base: 1},
	}
	for i := range 300 { // enough ids to fill the fan-out table
		objs = append(objs, packObj{typ: plumbing.BlobObject, data: fmt.Appendf(nil, "blob %d\n", i), size: -1})
	}
	gitDir := t.TempDir()
	gitIn(t, gitDir, nil, "init", "-q", "--bare")
	s := newObjectStore(gitDir)
	if err := s.importPack(buildPack(t, uint32(len(objs)), objs, nil), "in.pack"); err != nil {
		t.Fatal(err)
	}
	idx, _ := filepath.Glob(filepath.Join(gitDir, "objects", "pack", "*.idx"))
	if len(idx) != 1 {
		t.Fatalf("indexes: %v", idx)
	}
	out := gitIn(t, gitDir, nil, "verify-pack", "-v", idx[0])
	if !strings.Contains(out, "chain length = 1: 2 objects") {
		t.Errorf("verify-pack:\n%s", out)
	}
	for _, want := range []string{baseID.String(), plumbing.ComputeHash(plumbing.BlobObject, []byte("blob 7\n")).String()} {
		if got := gitIn(t, gitDir, nil, "cat-file", "-t", want); got != "blob" {
			t.Errorf("cat-file -t %s: %s", want, got)
		}
		if !s.has(want) || !newObjectStore(gitDir).has(want) {
			t.Errorf("%s is not found in the index", want)
		}
	}
}
