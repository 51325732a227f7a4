package gitshadow

import (
	"bytes"
	"crypto/sha1"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// testEntry is one entry of an index the tests write by hand.
type testEntry struct {
	name string
	// nameLen, when not zero, is the length the flags declare instead of
	// len(name).
	nameLen  int
	mode     uint32
	oid      byte // every byte of the object id
	stage    uint16
	extended uint16 // version 3 and 4 extended flags; sets the extended bit
}

// testIndex writes an index of the given version: the header (count is
// the declared number of entries, -1 for len(entries)), the entries in
// git's layout for that version, the extensions, then extra bytes and the
// checksum of all of it.
func testIndex(version uint32, count int, entries []testEntry, extensions [][]byte, extra []byte) []byte {
	var b bytes.Buffer
	b.WriteString("DIRC")
	if count < 0 {
		count = len(entries)
	}
	binary.Write(&b, binary.BigEndian, version)
	binary.Write(&b, binary.BigEndian, uint32(count))
	prev := ""
	for _, e := range entries {
		start := b.Len()
		b.Write(make([]byte, 24)) // ctime, mtime, dev, ino
		binary.Write(&b, binary.BigEndian, e.mode)
		b.Write(make([]byte, 12)) // uid, gid, size
		b.Write(bytes.Repeat([]byte{e.oid}, 20))
		n := len(e.name)
		if e.nameLen != 0 {
			n = e.nameLen
		}
		flags := uint16(min(n, 0xfff)) | e.stage<<12
		if e.extended != 0 {
			flags |= 0x4000
		}
		binary.Write(&b, binary.BigEndian, flags)
		if e.extended != 0 {
			binary.Write(&b, binary.BigEndian, e.extended)
		}
		if version == 4 {
			common := 0
			for common < len(prev) && common < len(e.name) && prev[common] == e.name[common] {
				common++
			}
			b.Write(v4Varint(uint64(len(prev) - common)))
			b.WriteString(e.name[common:])
			b.WriteByte(0)
			prev = e.name
			continue
		}
		b.WriteString(e.name)
		pad := 8 - (b.Len()-start)%8 // one to eight NULs
		b.Write(make([]byte, pad))
	}
	for _, x := range extensions {
		b.Write(x)
	}
	b.Write(extra)
	sum := sha1.Sum(b.Bytes())
	b.Write(sum[:])
	return b.Bytes()
}

// testExtension is an index extension: its signature, size and data.
func testExtension(sig string, data []byte) []byte {
	out := append([]byte(sig), 0, 0, 0, 0)
	binary.BigEndian.PutUint32(out[4:], uint32(len(data)))
	return append(out, data...)
}

// v4Varint writes git's offset varint, the one readV4Varint reads.
func v4Varint(v uint64) []byte {
	var buf [16]byte
	pos := len(buf) - 1
	buf[pos] = byte(v & 0x7f)
	for v >>= 7; v != 0; v >>= 7 {
		v--
		pos--
		buf[pos] = 0x80 | byte(v&0x7f)
	}
	return buf[pos:]
}

func file(name string) testEntry { return testEntry{name: name, mode: 0o100644, oid: 1} }

func TestIndexEdges(t *testing.T) {
	two := []testEntry{file("a.txt"), file("dir/b.txt")}
	tree := testExtension("TREE", []byte("\x002 0\n"+strings.Repeat("\x11", 20)))
	tests := []struct {
		name  string
		index []byte
		want  string // "" decodes; else a part of the error
	}{
		{"version 2", testIndex(2, -1, two, nil, nil), ""},
		{"version 3 with extended flags", testIndex(3, -1, []testEntry{file("a.txt"), {name: "b", mode: 0o100644, oid: 2, extended: 0x2000}}, nil, nil), ""},
		{"version 4", testIndex(4, -1, two, nil, nil), ""},
		{"a cache tree", testIndex(2, -1, two, [][]byte{tree}, nil), ""},
		{"an optional extension git does not know", testIndex(2, -1, two, [][]byte{testExtension("ZZZZ", []byte("anything"))}, nil), ""},
		{"too short", []byte("DIRC\x00\x00\x00\x02"), "too short"},
		{"a wrong signature", func() []byte { b := testIndex(2, -1, two, nil, nil); b[3] = 'X'; return fixIndexChecksum(b) }(), "index:"},
		{"version 1", testIndex(1, -1, two, nil, nil), "unsupported version"},
		{"version 5", testIndex(5, -1, two, nil, nil), "unsupported version"},
		{"a checksum that does not match", func() []byte { b := testIndex(2, -1, two, nil, nil); b[len(b)-1] ^= 1; return b }(), "checksum mismatch"},
		{"a byte changed under the checksum", func() []byte { b := testIndex(2, -1, two, nil, nil); b[12+62] ^= 1; return b }(), "checksum mismatch"},
		{"a count above the entries", testIndex(2, 3, two, nil, nil), "EOF"},
		{"a count below the entries", testIndex(2, 1, two, nil, nil), "index:"},
		{"a count of millions in a small file", testIndex(2, 1<<24, two, nil, nil), "EOF"},
		{"a NUL inside a version 2 path", testIndex(2, -1, []testEntry{{name: "a/.git\x00x", mode: 0o100644, oid: 1}}, nil, nil), "NUL in the path"},
		{"a NUL inside a version 3 path", testIndex(3, -1, []testEntry{{name: ".git\x00/hooks", mode: 0o100644, oid: 1, extended: 0x2000}}, nil, nil), "NUL in the path"},
		{"extended flags in version 2", testIndex(2, -1, []testEntry{{name: "a", mode: 0o100644, oid: 1, extended: 0x4000}}, nil, nil), "extended flags in a version 2 index"},
		{"a split index", testIndex(2, -1, two, [][]byte{testExtension("link", make([]byte, 20))}, nil), "unknown extension"},
		{"a sparse index", testIndex(2, -1, two, [][]byte{testExtension("sdir", nil)}, nil), "unknown extension"},
		{"a mandatory extension git does not know", testIndex(2, -1, two, [][]byte{testExtension("zzzz", nil)}, nil), "unknown extension"},
		{"an extension longer than the file", testIndex(2, -1, two, [][]byte{testExtension("ZZZZ", nil)[:4], {0x7f, 0, 0, 0}}, nil), "index:"},
		{"bytes after the extensions", testIndex(2, -1, two, [][]byte{tree}, bytes.Repeat([]byte{0xff}, 40)), "index:"},
		// git skips up to 27 bytes before the checksum; the decoder
		// reads them as an extension. git never writes them.
		{"a few NULs after the entries", testIndex(2, -1, two, nil, make([]byte, 10)), "unknown extension"},
		{"a path into .git", testIndex(2, -1, []testEntry{file(".git/hooks/pre-commit")}, nil, nil), "inside .git"},
		{"a path into .GIT", testIndex(2, -1, []testEntry{file("sub/.GIT/config")}, nil, nil), "inside .git"},
		{"a path into git~1", testIndex(2, -1, []testEntry{file("GIT~1/config")}, nil, nil), "inside .git"},
		{"an absolute path", testIndex(2, -1, []testEntry{file("/etc/passwd")}, nil, nil), "bad path"},
		{"a path with ..", testIndex(2, -1, []testEntry{file("a/../../b")}, nil, nil), "bad path"},
		{"an empty component", testIndex(2, -1, []testEntry{file("a//b")}, nil, nil), "bad path"},
		{"a backslash", testIndex(2, -1, []testEntry{file(`a\..\b`)}, nil, nil), "bad path"},
		{"a mode git never writes", testIndex(2, -1, []testEntry{{name: "a", mode: 0o100600, oid: 1}}, nil, nil), "has mode"},
		{"a directory mode", testIndex(2, -1, []testEntry{{name: "a", mode: 0o040000, oid: 1}}, nil, nil), "has mode"},
		{".gitmodules as a symlink", testIndex(2, -1, []testEntry{{name: "sub/.GITMODULES", mode: 0o120000, oid: 1}}, nil, nil), ".gitmodules as a symlink"},
		{"a version 4 prefix longer than the path before", func() []byte {
			b := testIndex(4, -1, []testEntry{file("ab")}, nil, nil)
			// The first entry's strip count (0) becomes 5: more than the
			// empty path before it.
			b[12+62] = 5
			return fixIndexChecksum(b)
		}(), "index:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := decodeIndex(tt.index, 1<<20)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.want != "" && err == nil:
				t.Fatalf("accepted; want an error with %q", tt.want)
			case tt.want != "" && !strings.Contains(err.Error(), tt.want):
				t.Fatalf("error %q; want one with %q", err, tt.want)
			}
		})
	}
}

// TestIndexLengthCoversPadding pins what a path whose declared length runs
// into its padding decodes to: the NULs are part of the name, so the check
// for a NUL refuses it rather than a .git slipping through as ".git\0\0".
func TestIndexLengthCoversPadding(t *testing.T) {
	b := testIndex(2, -1, []testEntry{{name: ".git", nameLen: 6, mode: 0o100644, oid: 1}}, nil, nil)
	entries, err := decodeIndex(b, 1<<20)
	if err == nil {
		t.Fatalf("accepted as %+v", entries)
	}
}

func TestVersion4PathsAreCappedBeforeTheyAreBuilt(t *testing.T) {
	// Each path is the one before plus a byte: 300 entries from a file
	// of about 20 KB make 45,150 bytes of paths.
	var entries []testEntry
	name := ""
	for range 300 {
		name += "a"
		entries = append(entries, file(name))
	}
	b := testIndex(4, -1, entries, nil, nil)
	if _, err := decodeIndex(b, 1<<20); err != nil {
		t.Fatalf("under the cap: %v", err)
	}
	_, err := decodeIndex(b, 40_000)
	if err == nil || !strings.Contains(err.Error(), "index paths of more than 40000 bytes") {
		t.Fatalf("over the cap: %v", err)
	}
}

// TestIndexesGitWritesDecodeAsGitListsThem decodes the indexes real git
// writes in versions 2, 3 and 4, with a cache tree, an intent-to-add entry
// (the extended flags of version 3) and a conflict's stages, and compares
// them with git ls-files --stage.
func TestIndexesGitWritesDecodeAsGitListsThem(t *testing.T) {
	dir := t.TempDir()
	git := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "init.defaultBranch=main"}, args...)...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	write := func(name, content string) {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git("init", "-q")
	for i := range 40 {
		write(fmt.Sprintf("src/pkg%02d/file.go", i), fmt.Sprint(i))
	}
	write("conflict.txt", "base\n")
	git("add", ".")
	git("commit", "-qm", "base")
	git("checkout", "-qb", "other")
	write("conflict.txt", "other\n")
	git("commit", "-qam", "other")
	git("checkout", "-q", "main")
	write("conflict.txt", "main\n")
	git("commit", "-qam", "main")
	cmd := exec.Command("git", "-c", "user.name=t", "-c", "user.email=t@example.com", "merge", "-q", "other")
	cmd.Dir, cmd.Env = dir, append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	cmd.Run() // conflicts: the index holds stages 1 to 3
	check := func(version string) {
		t.Helper()
		git("update-index", "--index-version", version)
		b, err := os.ReadFile(filepath.Join(dir, ".git", "index"))
		if err != nil {
			t.Fatal(err)
		}
		if got := binary.BigEndian.Uint32(b[4:8]); strconv.Itoa(int(got)) != version {
			t.Fatalf("git wrote version %d, want %s", got, version)
		}
		entries, err := decodeIndex(b, maxIndexNames)
		if err != nil {
			t.Fatalf("version %s: %v", version, err)
		}
		var got strings.Builder
		for _, e := range entries {
			fmt.Fprintf(&got, "%o %s %d\t%s\n", e.mode, hex.EncodeToString(e.oid[:]), e.stage, e.path)
		}
		if want := git("ls-files", "--stage"); got.String() != want {
			t.Fatalf("version %s decodes as\n%s\ngit lists\n%s", version, got.String(), want)
		}
	}
	check("2")
	check("4")
	// An intent-to-add entry has an extended flag, which version 2 cannot
	// hold: git writes version 3.
	write("new.txt", "new")
	git("add", "-N", "new.txt")
	check("3")
	check("4")
}
