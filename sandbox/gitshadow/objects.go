package gitshadow

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/idxfile"
	"github.com/go-git/go-git/v5/plumbing/format/objfile"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
	gitsync "github.com/go-git/go-git/v5/utils/sync"
)

// Object types: go-git's, which number them as git does in packs.
const (
	objCommit   = plumbing.CommitObject
	objTree     = plumbing.TreeObject
	objBlob     = plumbing.BlobObject
	objTag      = plumbing.TagObject
	objOfsDelta = plumbing.OFSDeltaObject
	objRefDelta = plumbing.REFDeltaObject
)

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
	// maxObject caps the size of one object (and of one delta's result)
	// before anything of that size is allocated.
	maxObject int64
	// packs caches each pack index read, by file name (nil: unreadable).
	packs map[string]*idxfile.MemoryIndex
	// links are the objects each imported object names (commit: tree and
	// parents; tree: entries; tag: object), for the connectivity check.
	links map[string][]string
	// imported holds the ids written by this store.
	imported map[string]bool
}

func newObjectStore(gitDir string) *objectStore {
	return &objectStore{
		dir:       filepath.Join(gitDir, "objects"),
		maxObject: maxPackObjectBytes,
		packs:     map[string]*idxfile.MemoryIndex{},
		links:     map[string][]string{},
		imported:  map[string]bool{},
	}
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
		idx, ok := s.packs[key]
		if !ok {
			idx, _ = readPackIndex(key)
			s.packs[key] = idx
		}
		if idx == nil {
			continue
		}
		if found, _ := idx.Contains(plumbing.NewHash(oid)); found {
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

// readPackIndex reads a version 2 pack index with go-git's decoder, which
// checks the index's own checksum and, given a file, its size against the
// object count in its fan-out table before it allocates for the names.
func readPackIndex(path string) (*idxfile.MemoryIndex, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	idx := idxfile.NewMemoryIndex()
	if err := idxfile.NewDecoder(f).Decode(idx); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return idx, nil
}

// importLoose checks that data (a loose object file: zlib of "type size\0"
// and the content) holds the object named oid, and writes it.
func (s *objectStore) importLoose(oid string, data []byte) error {
	if !validOID(oid) {
		return fmt.Errorf("loose object %q: not an object id", oid)
	}
	if s.has(oid) {
		s.freshen(oid)
		return nil
	}
	typ, content, got, err := inflateLoose(data, s.maxObject)
	if err != nil {
		return fmt.Errorf("loose object %s: %w", oid, err)
	}
	if got != oid {
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

// freshen marks the repository's own copy of oid (its loose file, or the
// packs that hold it) as just written, as git does for an object it would
// have written again: a git gc on the host prunes unreachable objects by
// age, and one the sandbox's refs are about to name must not be old.
func (s *objectStore) freshen(oid string) {
	now := time.Now()
	if os.Chtimes(filepath.Join(s.dir, oid[:2], oid[2:]), now, now) == nil {
		return
	}
	packDir := filepath.Join(s.dir, "pack")
	entries, _ := os.ReadDir(packDir)
	for _, e := range entries {
		base, ok := strings.CutSuffix(e.Name(), ".idx")
		if !ok {
			continue
		}
		idx := s.packs[filepath.Join(packDir, e.Name())]
		if idx == nil {
			continue
		}
		if found, _ := idx.Contains(plumbing.NewHash(oid)); found {
			_ = os.Chtimes(filepath.Join(packDir, base+".pack"), now, now)
		}
	}
}

// maxLooseHeader bounds a loose object's header ("commit 1234\0"): the
// longest git writes is "commit" and a 19-digit size.
const maxLooseHeader = 32

// inflateLoose decodes a loose object with go-git's objfile reader (the
// header's type and size, the content, its id) and returns its type,
// content and id. The limits around the reader are the boundary's: the
// reader collects the header a byte at a time until its NUL with no bound,
// so the header must end within maxLooseHeader inflated bytes first; the
// size it declares must be at most max before that much is allocated; the
// content must be exactly that size, and nothing may follow the zlib
// stream (git calls that garbage at the end of a loose object).
func inflateLoose(data []byte, max int64) (plumbing.ObjectType, []byte, string, error) {
	if err := looseHeaderEnds(data); err != nil {
		return 0, nil, "", err
	}
	in := bytes.NewReader(data)
	r, err := objfile.NewReader(in)
	if err != nil {
		return 0, nil, "", err
	}
	defer r.Close()
	typ, size, err := r.Header()
	if err != nil {
		return 0, nil, "", err
	}
	switch typ {
	case objCommit, objTree, objBlob, objTag:
	default: // objfile takes "ofs-delta" and "ref-delta" too
		return 0, nil, "", fmt.Errorf("bad type %q", typ)
	}
	if size < 0 || size > max {
		return 0, nil, "", fmt.Errorf("header says %d bytes, more than %d", size, max)
	}
	content := make([]byte, size)
	if _, err := io.ReadFull(r, content); err != nil {
		return 0, nil, "", fmt.Errorf("shorter than its header says: %w", err)
	}
	// Reading on to the end of the stream also checks its Adler-32.
	if n, err := io.Copy(io.Discard, io.LimitReader(r, 1)); err != nil || n != 0 {
		return 0, nil, "", fmt.Errorf("longer than its header says (%v)", err)
	}
	if in.Len() != 0 {
		return 0, nil, "", fmt.Errorf("%d bytes after the zlib stream", in.Len())
	}
	return typ, content, r.Hash().String(), nil
}

// looseHeaderEnds checks that a loose object's inflated data has its
// header's NUL within maxLooseHeader bytes, inflating no more than that.
func looseHeaderEnds(data []byte) error {
	zr, err := gitsync.GetZlibReader(bytes.NewReader(data))
	if err != nil {
		return err
	}
	defer gitsync.PutZlibReader(zr)
	var head [maxLooseHeader]byte
	n, err := io.ReadFull(zr.Reader, head[:])
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		return err
	}
	if bytes.IndexByte(head[:n], 0) < 0 {
		return errors.New("no header")
	}
	return nil
}

// objectLinks returns the ids an object names, checking that a commit,
// tree or tag parses as one.
func objectLinks(typ plumbing.ObjectType, content []byte) ([]string, error) {
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

// maxPackObjectBytes caps what one pack import holds in memory, and the
// size of one object.
const maxPackObjectBytes = 1 << 30

// maxDeltaDepth is git's own limit on a delta chain (pack-objects'
// --depth cannot exceed it); a longer chain is refused rather than
// resolved through that many bases.
const maxDeltaDepth = 4095

// importPack checks a pack (every object's content against its id, every
// delta resolved within the pack, the trailer) and writes it with an index
// it computed itself.
func (s *objectStore) importPack(path, name string) error {
	// A pack is named after its checksum: one whose name the host has is
	// one shiro imported (and checked) before. A pack under a borrowed name
	// is not imported at all, which harms nothing.
	if base, ok := strings.CutSuffix(name, ".pack"); ok {
		if _, err := os.Stat(filepath.Join(s.dir, "pack", base+".idx")); err == nil {
			now := time.Now()
			_ = os.Chtimes(filepath.Join(s.dir, "pack", name), now, now) // fresh, as freshen
			return nil
		}
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	p, err := parsePack(f, s.maxObject)
	if err != nil {
		return fmt.Errorf("pack %s: %w", filepath.Base(path), err)
	}
	for _, e := range p.entries {
		if err := s.noteLinks(e.oid.String(), e.typ, p, e); err != nil {
			return fmt.Errorf("pack %s: %w", filepath.Base(path), err)
		}
	}
	idx, err := p.index()
	if err != nil {
		return fmt.Errorf("pack %s: %w", filepath.Base(path), err)
	}
	name = "pack-" + p.checksum.String()
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
	if err := writeFileAtomic(filepath.Join(packDir, name+".idx"), idx, 0o444); err != nil {
		return err
	}
	for _, e := range p.entries {
		s.imported[e.oid.String()] = true
	}
	return nil
}

func (s *objectStore) noteLinks(oid string, typ plumbing.ObjectType, p *pack, e *packEntry) error {
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
	sc       *packfile.Scanner // reads an entry's data again, by offset
	max      int64             // the largest object, as objectStore.maxObject
	entries  []*packEntry
	byOffset map[int64]*packEntry
	checksum plumbing.Hash
	cache    map[int64][]byte // resolved contents, by offset
	cached   int
}

type packEntry struct {
	offset  int64
	typ     plumbing.ObjectType // the resolved type
	rawType plumbing.ObjectType
	size    int64
	base    int64 // OFS_DELTA base offset
	baseID  plumbing.Hash
	depth   int // deltas between this object and its base object
	crc     uint32
	oid     plumbing.Hash
}

// minPackEntry is the fewest bytes an entry of a pack takes: a one-byte
// header and the shortest zlib stream (a 2-byte header, an empty final
// block of 2 bytes, a 4-byte checksum).
const minPackEntry = 9

// parsePack reads a pack with go-git's scanner, which parses the entry
// headers (their varints bounded), refuses an OFS_DELTA base that is not
// before the entry, stops an object's data that inflates past its declared
// size, computes each entry's CRC-32 and checks the trailing checksum. What
// the boundary adds: the declared object count checked against the file's
// size before it sizes anything, each object's declared size capped before
// it is allocated and checked to be exact (the scanner lets a shorter one
// through), the entry types, OFS_DELTA bases that are entries, nothing
// after the trailer, every object resolved within the pack (no thin packs),
// and no object twice.
func parsePack(f *os.File, max int64) (*pack, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	total := fi.Size()
	if total < 32 {
		return nil, errors.New("too short")
	}
	sc := packfile.NewScanner(io.NewSectionReader(f, 0, total))
	_, count, err := sc.Header()
	if err != nil {
		return nil, err
	}
	if int64(count) > (total-32)/minPackEntry {
		return nil, fmt.Errorf("%d objects declared in %d bytes", count, total)
	}
	p := &pack{
		sc:       packfile.NewScanner(io.NewSectionReader(f, 0, total)),
		max:      max,
		entries:  make([]*packEntry, 0, count),
		byOffset: make(map[int64]*packEntry, count),
		cache:    map[int64][]byte{},
	}
	for range count {
		h, err := sc.NextObjectHeader()
		if err != nil {
			return nil, err
		}
		e := &packEntry{offset: h.Offset, rawType: h.Type, size: h.Length}
		switch h.Type {
		case objCommit, objTree, objBlob, objTag:
		case objOfsDelta:
			if p.byOffset[h.OffsetReference] == nil {
				return nil, fmt.Errorf("delta at %d has no base in the pack", e.offset)
			}
			e.base = h.OffsetReference
		case objRefDelta:
			e.baseID = h.Reference
		default:
			return nil, fmt.Errorf("bad object type %d at %d", h.Type, e.offset)
		}
		if e.size > max {
			return nil, fmt.Errorf("object at %d: header says %d bytes, more than %d", e.offset, e.size, max)
		}
		n, crc, err := sc.NextObject(io.Discard)
		if err != nil {
			return nil, fmt.Errorf("object at %d: %w", e.offset, err)
		}
		if n != e.size {
			return nil, fmt.Errorf("object at %d: %d bytes, header says %d", e.offset, n, e.size)
		}
		e.crc = crc
		p.entries = append(p.entries, e)
		p.byOffset[e.offset] = e
	}
	if p.checksum, err = sc.Checksum(); err != nil {
		return nil, err
	}
	if end, err := sc.SeekFromStart(total); err != nil || end != total {
		return nil, fmt.Errorf("%d bytes after the trailer (%v)", total-end, err)
	}
	byID := make(map[plumbing.Hash]*packEntry, count)
	// Resolve every object (bases first: a delta's base is earlier for
	// OFS_DELTA; REF_DELTA bases are looked up by id, in passes).
	for pending := len(p.entries); pending > 0; {
		progress := 0
		for _, e := range p.entries {
			if !e.oid.IsZero() {
				continue
			}
			if e.rawType == objRefDelta {
				base := byID[e.baseID]
				if base == nil {
					continue
				}
				e.base = base.offset
			}
			if e.rawType == objOfsDelta || e.rawType == objRefDelta {
				base := p.byOffset[e.base]
				if base.oid.IsZero() {
					continue // a REF_DELTA waiting for its own base
				}
				if e.depth = base.depth + 1; e.depth > maxDeltaDepth {
					return nil, fmt.Errorf("object at %d: a chain of more than %d deltas", e.offset, maxDeltaDepth)
				}
			}
			content, typ, err := p.resolve(e)
			if err != nil {
				return nil, err
			}
			e.typ = typ
			e.oid = plumbing.ComputeHash(typ, content)
			// go-git's index writer keeps one entry per id, and git takes
			// an index whose count is not the pack's for a corrupt one.
			if byID[e.oid] != nil {
				return nil, fmt.Errorf("object %s is in the pack twice", e.oid)
			}
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

// raw inflates the stored data of an entry, through the scanner, which
// stops it at the size its header declares.
func (p *pack) raw(e *packEntry) ([]byte, error) {
	if _, err := p.sc.SeekObjectHeader(e.offset); err != nil {
		return nil, err
	}
	buf := bytes.NewBuffer(make([]byte, 0, e.size))
	n, _, err := p.sc.NextObject(buf)
	if err != nil {
		return nil, err
	}
	if n != e.size {
		return nil, fmt.Errorf("%d bytes, header says %d", n, e.size)
	}
	return buf.Bytes(), nil
}

// resolve returns an entry's content and type, applying deltas. Its bases
// are resolved before it, so it recurses only through bases whose content
// is not cached, and never deeper than maxDeltaDepth.
func (p *pack) resolve(e *packEntry) ([]byte, plumbing.ObjectType, error) {
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
		if data, err = applyDelta(baseContent, data, p.max); err != nil {
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

// applyDelta applies a git delta to base with go-git's PatchDelta, which
// checks the base's size, every copy against the base, the result against
// its declared size and that the whole delta is used. That declared size
// is capped at max first: the result grows to it, and a delta's copies
// can make it far larger than the delta.
func applyDelta(base, delta []byte, max int64) ([]byte, error) {
	_, rest, err := deltaSize(delta)
	if err != nil {
		return nil, err
	}
	size, _, err := deltaSize(rest)
	if err != nil {
		return nil, err
	}
	if size > uint64(max) {
		return nil, fmt.Errorf("delta result of %d bytes, more than %d", size, max)
	}
	return packfile.PatchDelta(base, delta)
}

// deltaSize reads one of the sizes a delta starts with (base, result).
func deltaSize(b []byte) (uint64, []byte, error) {
	var v uint64
	for i, shift := 0, 0; i < len(b) && shift <= 56; i, shift = i+1, shift+7 {
		v |= uint64(b[i]&0x7f) << shift
		if b[i]&0x80 == 0 {
			return v, b[i+1:], nil
		}
	}
	return 0, nil, errors.New("truncated delta")
}

// index builds a version 2 pack index with go-git's index writer and
// encoder. The writer is not told the pack's object count: it would
// allocate for that many before a single object.
func (p *pack) index() ([]byte, error) {
	var w idxfile.Writer
	for _, e := range p.entries {
		w.Add(e.oid, uint64(e.offset), e.crc)
	}
	if err := w.OnFooter(p.checksum); err != nil {
		return nil, err
	}
	idx, err := w.Index()
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if _, err := idxfile.NewEncoder(&buf).Encode(idx); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
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
