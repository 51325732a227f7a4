package gitshadow

import (
	"bufio"
	"bytes"
	"compress/zlib"
	"crypto/sha1"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Object types as git numbers them in packs.
const (
	objCommit   = 1
	objTree     = 2
	objBlob     = 3
	objTag      = 4
	objOfsDelta = 6
	objRefDelta = 7
)

var typeNames = map[int]string{objCommit: "commit", objTree: "tree", objBlob: "blob", objTag: "tag"}

// oidLen is the length of a SHA-1 object id in hex. SHA-256 repositories
// are not mirrored back (see Syncer).
const oidLen = 40

func validOID(s string) bool {
	if len(s) != oidLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// objectStore is the host repository's object directory, written only
// with objects whose content was checked against their name.
type objectStore struct {
	dir string // <gitdir>/objects
	// packs caches the ids of each pack index read, by file name.
	packs map[string][]string
	// links are the objects each imported object names (commit: tree and
	// parents; tree: entries; tag: object), for the connectivity check.
	links map[string][]string
	// imported holds the ids written by this store.
	imported map[string]bool
}

func newObjectStore(gitDir string) *objectStore {
	return &objectStore{dir: filepath.Join(gitDir, "objects"), packs: map[string][]string{}, links: map[string][]string{}, imported: map[string]bool{}}
}

// has reports whether the repository (or one of its alternates) holds oid.
func (s *objectStore) has(oid string) bool {
	if s.imported[oid] {
		return true
	}
	return s.hasIn(s.dir, oid, 0)
}

func (s *objectStore) hasIn(dir, oid string, depth int) bool {
	if _, err := os.Stat(filepath.Join(dir, oid[:2], oid[2:])); err == nil {
		return true
	}
	packDir := filepath.Join(dir, "pack")
	entries, _ := os.ReadDir(packDir)
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".idx") {
			continue
		}
		key := filepath.Join(packDir, e.Name())
		ids, ok := s.packs[key]
		if !ok {
			ids, _ = readIdxIDs(key)
			s.packs[key] = ids
		}
		i := sort.SearchStrings(ids, oid)
		if i < len(ids) && ids[i] == oid {
			return true
		}
	}
	if depth >= 5 {
		return false
	}
	alt, err := os.ReadFile(filepath.Join(dir, "info", "alternates"))
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(alt), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if !filepath.IsAbs(line) {
			line = filepath.Join(dir, line)
		}
		if s.hasIn(line, oid, depth+1) {
			return true
		}
	}
	return false
}

// readIdxIDs returns the sorted object ids of a version 2 pack index.
func readIdxIDs(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if len(b) < 8+256*4 || !bytes.Equal(b[:4], []byte{0xff, 't', 'O', 'c'}) || binary.BigEndian.Uint32(b[4:8]) != 2 {
		return nil, fmt.Errorf("%s: not a version 2 pack index", path)
	}
	n := int(binary.BigEndian.Uint32(b[8+255*4:]))
	start := 8 + 256*4
	if len(b) < start+n*20 {
		return nil, fmt.Errorf("%s: truncated", path)
	}
	ids := make([]string, n)
	for i := range n {
		ids[i] = hex.EncodeToString(b[start+i*20 : start+(i+1)*20])
	}
	return ids, nil
}

// importLoose checks that data (a loose object file: zlib of "type size\0"
// and the content) holds the object named oid, and writes it.
func (s *objectStore) importLoose(oid string, data []byte) error {
	if !validOID(oid) {
		return fmt.Errorf("loose object %q: not an object id", oid)
	}
	if s.has(oid) {
		return nil
	}
	typ, content, err := inflateLoose(data)
	if err != nil {
		return fmt.Errorf("loose object %s: %w", oid, err)
	}
	if got := objectID(typ, content); got != oid {
		return fmt.Errorf("loose object %s holds %s", oid, got)
	}
	links, err := objectLinks(typ, content)
	if err != nil {
		return fmt.Errorf("loose object %s: %w", oid, err)
	}
	dir := filepath.Join(s.dir, oid[:2])
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := writeFileAtomic(filepath.Join(dir, oid[2:]), data, 0o444); err != nil {
		return err
	}
	s.imported[oid] = true
	s.links[oid] = links
	return nil
}

// inflateLoose decodes a loose object.
func inflateLoose(data []byte) (int, []byte, error) {
	zr, err := zlib.NewReader(bytes.NewReader(data))
	if err != nil {
		return 0, nil, err
	}
	defer zr.Close()
	raw, err := io.ReadAll(zr)
	if err != nil {
		return 0, nil, err
	}
	header, content, ok := bytes.Cut(raw, []byte{0})
	if !ok {
		return 0, nil, errors.New("no header")
	}
	name, size, ok := strings.Cut(string(header), " ")
	n, err := strconv.Atoi(size)
	if !ok || err != nil || n != len(content) {
		return 0, nil, fmt.Errorf("bad header %q", header)
	}
	for t, tn := range typeNames {
		if tn == name {
			return t, content, nil
		}
	}
	return 0, nil, fmt.Errorf("bad type %q", name)
}

// objectID is git's SHA-1 id of an object.
func objectID(typ int, content []byte) string {
	h := sha1.New()
	fmt.Fprintf(h, "%s %d\x00", typeNames[typ], len(content))
	h.Write(content)
	return hex.EncodeToString(h.Sum(nil))
}

// objectLinks returns the ids an object names, checking that a commit,
// tree or tag parses as one.
func objectLinks(typ int, content []byte) ([]string, error) {
	switch typ {
	case objBlob:
		return nil, nil
	case objTree:
		var out []string
		for rest := content; len(rest) > 0; {
			sp := bytes.IndexByte(rest, ' ')
			nul := bytes.IndexByte(rest, 0)
			if sp <= 0 || nul < sp || len(rest) < nul+21 {
				return nil, errors.New("malformed tree")
			}
			mode := string(rest[:sp])
			id := hex.EncodeToString(rest[nul+1 : nul+21])
			if mode != "160000" { // a submodule's commit lives in another repository
				out = append(out, id)
			}
			rest = rest[nul+21:]
		}
		return out, nil
	case objCommit, objTag:
		var out []string
		header, _, _ := bytes.Cut(content, []byte("\n\n"))
		for _, line := range strings.Split(string(header), "\n") {
			k, v, _ := strings.Cut(line, " ")
			if k == "tree" || k == "parent" || (typ == objTag && k == "object") {
				if !validOID(v) {
					return nil, fmt.Errorf("malformed %s line %q", k, line)
				}
				out = append(out, v)
			}
		}
		if typ == objCommit && (len(out) == 0 || !strings.HasPrefix(string(header), "tree ")) {
			return nil, errors.New("commit without a tree")
		}
		if typ == objTag && len(out) != 1 {
			return nil, errors.New("tag without an object")
		}
		return out, nil
	}
	return nil, fmt.Errorf("unknown object type %d", typ)
}

// connected reports whether oid and everything it reaches exist: objects
// that were already in the repository are taken as complete, imported ones
// are followed.
func (s *objectStore) connected(oid string) error {
	seen := map[string]bool{}
	stack := []string{oid}
	for len(stack) > 0 {
		id := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if seen[id] {
			continue
		}
		seen[id] = true
		if !s.imported[id] {
			if !s.has(id) {
				return fmt.Errorf("object %s is missing", id)
			}
			continue
		}
		stack = append(stack, s.links[id]...)
	}
	return nil
}

// maxPackObjectBytes caps what one pack import holds in memory.
const maxPackObjectBytes = 1 << 30

// importPack checks a pack (every object's content against its id, every
// delta resolved within the pack, the trailer) and writes it with an index
// it computed itself.
func (s *objectStore) importPack(path, name string) error {
	// A pack is named after its checksum: one whose name the host has is
	// one shiro imported (and checked) before. A pack under a borrowed name
	// is not imported at all, which harms nothing.
	if base, ok := strings.CutSuffix(name, ".pack"); ok {
		if _, err := os.Stat(filepath.Join(s.dir, "pack", base+".idx")); err == nil {
			return nil
		}
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	p, err := parsePack(f)
	if err != nil {
		return fmt.Errorf("pack %s: %w", filepath.Base(path), err)
	}
	for _, e := range p.entries {
		if err := s.noteLinks(e.oid, e.typ, p, e); err != nil {
			return fmt.Errorf("pack %s: %w", filepath.Base(path), err)
		}
	}
	name = "pack-" + hex.EncodeToString(p.checksum)
	packDir := filepath.Join(s.dir, "pack")
	if err := os.MkdirAll(packDir, 0o755); err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(packDir, name+".idx")); err == nil {
		return nil // already here
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	if err := copyFileAtomic(filepath.Join(packDir, name+".pack"), f, 0o444); err != nil {
		return err
	}
	// The index goes last: git sees a pack once its index is there.
	if err := writeFileAtomic(filepath.Join(packDir, name+".idx"), p.index(), 0o444); err != nil {
		return err
	}
	for _, e := range p.entries {
		s.imported[e.oid] = true
	}
	return nil
}

func (s *objectStore) noteLinks(oid string, typ int, p *pack, e *packEntry) error {
	if typ == objBlob {
		return nil
	}
	content, err := p.content(e)
	if err != nil {
		return err
	}
	links, err := objectLinks(typ, content)
	if err != nil {
		return fmt.Errorf("object %s: %w", oid, err)
	}
	s.links[oid] = links
	return nil
}

// pack is a parsed pack file.
type pack struct {
	r        io.ReaderAt
	entries  []*packEntry
	byOffset map[int64]*packEntry
	checksum []byte
	cache    map[int64][]byte // resolved contents, by offset
	cached   int
}

type packEntry struct {
	offset  int64
	typ     int // the resolved type
	rawType int
	size    int64
	dataAt  int64 // where the zlib stream starts
	base    int64 // OFS_DELTA base offset
	baseID  string
	crc     uint32
	oid     string
}

// countingReader reads a pack sequentially and tracks the offset and the
// CRC-32 of the bytes of the current entry; it is a ByteReader, so zlib
// reads exactly the stream and no further.
type countingReader struct {
	r   *bufio.Reader
	off int64
	crc hash.Hash32
	sum hash.Hash
}

func (c *countingReader) ReadByte() (byte, error) {
	b, err := c.r.ReadByte()
	if err == nil {
		c.off++
		c.crc.Write([]byte{b})
		c.sum.Write([]byte{b})
	}
	return b, err
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.off += int64(n)
	c.crc.Write(p[:n])
	c.sum.Write(p[:n])
	return n, err
}

func parsePack(f *os.File) (*pack, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	total := fi.Size()
	if total < 32 {
		return nil, errors.New("too short")
	}
	cr := &countingReader{r: bufio.NewReaderSize(io.NewSectionReader(f, 0, total-20), 64<<10), crc: crc32.NewIEEE(), sum: sha1.New()}
	var hdr [12]byte
	if _, err := io.ReadFull(cr, hdr[:]); err != nil {
		return nil, err
	}
	if string(hdr[:4]) != "PACK" {
		return nil, errors.New("not a pack")
	}
	if v := binary.BigEndian.Uint32(hdr[4:8]); v != 2 && v != 3 {
		return nil, fmt.Errorf("pack version %d", v)
	}
	count := int(binary.BigEndian.Uint32(hdr[8:12]))
	p := &pack{r: f, byOffset: map[int64]*packEntry{}, cache: map[int64][]byte{}}
	for range count {
		e := &packEntry{offset: cr.off}
		cr.crc.Reset()
		b, err := cr.ReadByte()
		if err != nil {
			return nil, err
		}
		e.rawType = int(b>>4) & 7
		e.size = int64(b & 0x0f)
		for shift := 4; b&0x80 != 0; shift += 7 {
			if b, err = cr.ReadByte(); err != nil {
				return nil, err
			}
			e.size |= int64(b&0x7f) << shift
		}
		switch e.rawType {
		case objCommit, objTree, objBlob, objTag:
		case objOfsDelta:
			b, err := cr.ReadByte()
			if err != nil {
				return nil, err
			}
			off := int64(b & 0x7f)
			for b&0x80 != 0 {
				if b, err = cr.ReadByte(); err != nil {
					return nil, err
				}
				off = ((off + 1) << 7) | int64(b&0x7f)
			}
			e.base = e.offset - off
			if e.base <= 0 || p.byOffset[e.base] == nil {
				return nil, fmt.Errorf("delta at %d has no base in the pack", e.offset)
			}
		case objRefDelta:
			var id [20]byte
			if _, err := io.ReadFull(cr, id[:]); err != nil {
				return nil, err
			}
			e.baseID = hex.EncodeToString(id[:])
		default:
			return nil, fmt.Errorf("bad object type %d at %d", e.rawType, e.offset)
		}
		e.dataAt = cr.off
		zr, err := zlib.NewReader(cr)
		if err != nil {
			return nil, fmt.Errorf("object at %d: %w", e.offset, err)
		}
		n, err := io.Copy(io.Discard, zr)
		if err != nil {
			return nil, fmt.Errorf("object at %d: %w", e.offset, err)
		}
		if n != e.size {
			return nil, fmt.Errorf("object at %d: %d bytes, header says %d", e.offset, n, e.size)
		}
		e.crc = cr.crc.Sum32()
		p.entries = append(p.entries, e)
		p.byOffset[e.offset] = e
	}
	if cr.off != total-20 {
		return nil, fmt.Errorf("%d bytes after the last object", total-20-cr.off)
	}
	trailer := make([]byte, 20)
	if _, err := f.ReadAt(trailer, total-20); err != nil {
		return nil, err
	}
	if !bytes.Equal(trailer, cr.sum.Sum(nil)) {
		return nil, errors.New("checksum mismatch")
	}
	p.checksum = trailer
	byID := map[string]*packEntry{}
	// Resolve every object (bases first: a delta's base is earlier for
	// OFS_DELTA; REF_DELTA bases are looked up by id, in passes).
	for pending := len(p.entries); pending > 0; {
		progress := 0
		for _, e := range p.entries {
			if e.oid != "" {
				continue
			}
			if e.rawType == objRefDelta {
				base := byID[e.baseID]
				if base == nil {
					continue
				}
				e.base = base.offset
			}
			content, typ, err := p.resolve(e)
			if err != nil {
				return nil, err
			}
			e.typ = typ
			e.oid = objectID(typ, content)
			byID[e.oid] = e
			progress++
			pending--
		}
		if progress == 0 {
			return nil, errors.New("a delta's base is not in the pack (thin packs are not imported)")
		}
	}
	return p, nil
}

// raw inflates the stored data of an entry.
func (p *pack) raw(e *packEntry) ([]byte, error) {
	zr, err := zlib.NewReader(io.NewSectionReader(p.r, e.dataAt, 1<<62))
	if err != nil {
		return nil, err
	}
	defer zr.Close()
	buf := make([]byte, e.size)
	if _, err := io.ReadFull(zr, buf); err != nil {
		return nil, err
	}
	return buf, nil
}

// resolve returns an entry's content and type, applying deltas.
func (p *pack) resolve(e *packEntry) ([]byte, int, error) {
	if c, ok := p.cache[e.offset]; ok {
		return c, e.typ, nil
	}
	data, err := p.raw(e)
	if err != nil {
		return nil, 0, fmt.Errorf("object at %d: %w", e.offset, err)
	}
	typ := e.rawType
	if typ == objOfsDelta || typ == objRefDelta {
		base := p.byOffset[e.base]
		if base == nil {
			return nil, 0, fmt.Errorf("object at %d: missing base", e.offset)
		}
		baseContent, baseType, err := p.resolve(base)
		if err != nil {
			return nil, 0, err
		}
		if data, err = applyDelta(baseContent, data); err != nil {
			return nil, 0, fmt.Errorf("object at %d: %w", e.offset, err)
		}
		typ = baseType
	}
	e.typ = typ
	if p.cached+len(data) <= maxPackObjectBytes {
		p.cache[e.offset] = data
		p.cached += len(data)
	}
	return data, typ, nil
}

func (p *pack) content(e *packEntry) ([]byte, error) {
	c, _, err := p.resolve(e)
	return c, err
}

// applyDelta applies a git delta to base.
func applyDelta(base, delta []byte) ([]byte, error) {
	varint := func() (int, error) {
		v, shift := 0, 0
		for {
			if len(delta) == 0 {
				return 0, errors.New("truncated delta")
			}
			b := delta[0]
			delta = delta[1:]
			v |= int(b&0x7f) << shift
			if b&0x80 == 0 {
				return v, nil
			}
			shift += 7
			if shift > 56 {
				return 0, errors.New("delta size overflows")
			}
		}
	}
	srcSize, err := varint()
	if err != nil {
		return nil, err
	}
	if srcSize != len(base) {
		return nil, errors.New("delta base size mismatch")
	}
	dstSize, err := varint()
	if err != nil {
		return nil, err
	}
	if dstSize > maxPackObjectBytes {
		return nil, errors.New("delta result too large")
	}
	out := make([]byte, 0, dstSize)
	for len(delta) > 0 {
		op := delta[0]
		delta = delta[1:]
		switch {
		case op&0x80 != 0:
			var off, size int
			for i := 0; i < 4; i++ {
				if op&(1<<i) != 0 {
					if len(delta) == 0 {
						return nil, errors.New("truncated copy")
					}
					off |= int(delta[0]) << (8 * i)
					delta = delta[1:]
				}
			}
			for i := 0; i < 3; i++ {
				if op&(0x10<<i) != 0 {
					if len(delta) == 0 {
						return nil, errors.New("truncated copy")
					}
					size |= int(delta[0]) << (8 * i)
					delta = delta[1:]
				}
			}
			if size == 0 {
				size = 0x10000
			}
			if off+size > len(base) || off+size < off {
				return nil, errors.New("copy outside the base")
			}
			out = append(out, base[off:off+size]...)
		case op != 0:
			if int(op) > len(delta) {
				return nil, errors.New("truncated insert")
			}
			out = append(out, delta[:op]...)
			delta = delta[op:]
		default:
			return nil, errors.New("reserved delta opcode")
		}
		if len(out) > dstSize {
			return nil, errors.New("delta writes past its size")
		}
	}
	if len(out) != dstSize {
		return nil, errors.New("delta result size mismatch")
	}
	return out, nil
}

// index builds a version 2 pack index.
func (p *pack) index() []byte {
	entries := append([]*packEntry(nil), p.entries...)
	sort.Slice(entries, func(i, j int) bool { return entries[i].oid < entries[j].oid })
	var buf bytes.Buffer
	buf.Write([]byte{0xff, 't', 'O', 'c', 0, 0, 0, 2})
	var fan [256]uint32
	ids := make([][]byte, len(entries))
	for i, e := range entries {
		ids[i], _ = hex.DecodeString(e.oid)
		fan[ids[i][0]]++
	}
	var run uint32
	for i := range fan {
		run += fan[i]
		binary.Write(&buf, binary.BigEndian, run) //nolint:errcheck // bytes.Buffer
	}
	for _, id := range ids {
		buf.Write(id)
	}
	for _, e := range entries {
		binary.Write(&buf, binary.BigEndian, e.crc) //nolint:errcheck
	}
	var large []uint64
	for _, e := range entries {
		if e.offset < 1<<31 {
			binary.Write(&buf, binary.BigEndian, uint32(e.offset)) //nolint:errcheck
			continue
		}
		binary.Write(&buf, binary.BigEndian, uint32(1<<31|len(large))) //nolint:errcheck
		large = append(large, uint64(e.offset))
	}
	for _, l := range large {
		binary.Write(&buf, binary.BigEndian, l) //nolint:errcheck
	}
	buf.Write(p.checksum)
	sum := sha1.Sum(buf.Bytes())
	buf.Write(sum[:])
	return buf.Bytes()
}

// copyFileAtomic copies r to a temporary file beside path and renames it
// into place.
func copyFileAtomic(path string, r io.Reader, mode fs.FileMode) error {
	tmp := tempName(path)
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, r)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}

func tempName(path string) string {
	return filepath.Join(filepath.Dir(path), ".tmp-shiro-"+randomHex())
}

// writeFileAtomic writes data to a temporary file beside path and renames
// it into place.
func writeFileAtomic(path string, data []byte, mode fs.FileMode) error {
	tmp := tempName(path)
	if err := os.WriteFile(tmp, data, mode); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}
