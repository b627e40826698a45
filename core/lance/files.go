package lance

import (
	"fmt"
	"path"
	"strconv"
	"strings"

	"github.com/retain-dev/retain/core/storage"
)

// FileKind says what a referenced file is.
type FileKind uint8

const (
	KindManifest    FileKind = iota + 1 // _versions/*.manifest
	KindData                            // data/*.lance
	KindOverlay                         // an overlay's data file
	KindDeletion                        // _deletions/{frag}-{read_version}-{id}.{arrow|bin}
	KindIndex                           // a file or (Prefix) the folder _indices/<uuid>/
	KindTransaction                     // _transactions/*.txn
	KindExternal                        // row-id / row-version sequences stored in files
)

func (k FileKind) String() string {
	switch k {
	case KindManifest:
		return "manifest"
	case KindData:
		return "data"
	case KindOverlay:
		return "overlay"
	case KindDeletion:
		return "deletion"
	case KindIndex:
		return "index"
	case KindTransaction:
		return "transaction"
	case KindExternal:
		return "external"
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// MarshalText lets reports read "data" rather than 2.
func (k FileKind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// FileRef is one object (or, with Prefix, every object under a folder) a
// version references.
type FileRef struct {
	// Key is the store key. With Prefix it ends in '/' and names a folder
	// whose every object is referenced (an index). With Outside it is
	// Lance's URI of a file that lies outside this dataset family.
	Key string
	// Size in bytes as the manifest records it, -1 when it does not.
	Size int64
	Kind FileKind
	// Prefix: Key is a folder.
	Prefix bool
	// Owner is the root key of the dataset the file lives under: this
	// dataset's, or for files a branch inherits, its parent's.
	Owner string
	// Outside: the file lies under a base path that is not part of this
	// dataset family (a shallow-clone source, an import); Key is not a
	// store key and retain must never delete it.
	Outside bool
}

// resolveFiles lists every file of m as store keys. Paths from the manifest
// are checked segment by segment: a path that could climb out of its folder
// ("..", absolute, empty segments) is a corrupt manifest, never a key.
func (d *Dataset) resolveFiles(m *Manifest) ([]FileRef, error) {
	bases := make(map[uint32]resolvedBase, len(m.BasePaths))
	for _, bp := range m.BasePaths {
		bases[bp.ID] = d.resolveBase(bp)
	}
	out := make([]FileRef, 0, 2+len(m.Fragments)*2+len(m.Indexes)*3)
	seen := make(map[string]bool, cap(out))
	add := func(r FileRef) {
		if !seen[r.Key] {
			seen[r.Key] = true
			out = append(out, r)
		}
	}
	own := resolvedBase{key: d.Root, root: true}
	under := func(id *uint32) resolvedBase {
		if id == nil {
			return own
		}
		return bases[*id] // existence checked by ParseManifest
	}
	// file places rel under dir ("data", "_deletions", ...) of base b, or
	// directly under b when b is a plain directory rather than a dataset.
	file := func(b resolvedBase, dir, rel string, kind FileKind, size int64, prefix bool) error {
		if err := checkRel(rel); err != nil {
			return fmt.Errorf("%w: %s path %q: %v", ErrCorruptManifest, kind, rel, err)
		}
		if b.root {
			rel = dir + "/" + rel
		}
		r := FileRef{Size: size, Kind: kind, Prefix: prefix, Owner: b.key, Outside: b.outside}
		if b.outside {
			r.Key = strings.TrimRight(b.uri, "/") + "/" + rel
			r.Owner = ""
		} else {
			r.Key = join(b.key, rel)
			if err := storage.ValidateKey("lance-manifest", strings.TrimSuffix(r.Key, "/")); err != nil {
				return fmt.Errorf("%w: %s path %q: %v", ErrCorruptManifest, kind, rel, err)
			}
		}
		if prefix {
			r.Key += "/"
		}
		add(r)
		return nil
	}
	if m.Key != "" {
		add(FileRef{Key: m.Key, Size: m.Size, Kind: KindManifest, Owner: d.Root})
	}
	sizeOf := func(n uint64) int64 {
		if n == 0 || n > 1<<62 {
			return -1
		}
		return int64(n)
	}
	for _, fr := range m.Fragments {
		for _, f := range fr.Files {
			if err := file(under(f.BaseID), "data", f.Path, KindData, sizeOf(f.Size), false); err != nil {
				return nil, err
			}
		}
		for _, f := range fr.Overlays {
			if err := file(under(f.BaseID), "data", f.Path, KindOverlay, sizeOf(f.Size), false); err != nil {
				return nil, err
			}
		}
		if del := fr.Deletion; del != nil {
			ext := "arrow"
			if del.Type == 1 {
				ext = "bin"
			}
			// Exact u64 formatting: ids use all 64 bits.
			name := strconv.FormatUint(fr.ID, 10) + "-" + strconv.FormatUint(del.ReadVersion, 10) + "-" +
				strconv.FormatUint(del.ID, 10) + "." + ext
			if err := file(under(del.BaseID), "_deletions", name, KindDeletion, -1, false); err != nil {
				return nil, err
			}
		}
		for _, ef := range fr.External {
			// Relative to this dataset's root, whatever folder it names.
			if err := file(resolvedBase{key: d.Root}, "", ef.Path, KindExternal, -1, false); err != nil {
				return nil, err
			}
		}
	}
	for _, ix := range m.Indexes {
		b := under(ix.BaseID)
		// The folder is what Lance's cleanup protects (by uuid), so it is
		// referenced whole even when the manifest lists its files.
		if err := file(b, "_indices", ix.UUID, KindIndex, -1, true); err != nil {
			return nil, err
		}
		for _, f := range ix.Files {
			if err := file(b, "_indices", ix.UUID+"/"+f.Path, KindIndex, int64(min(f.Size, 1<<62)), false); err != nil {
				return nil, err
			}
		}
	}
	if m.TransactionFile != "" {
		if err := file(own, "_transactions", m.TransactionFile, KindTransaction, -1, false); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// checkRel refuses a manifest path that is not a plain relative path.
func checkRel(p string) error {
	if p == "" || strings.HasPrefix(p, "/") || strings.HasSuffix(p, "/") || strings.ContainsRune(p, '\\') {
		return fmt.Errorf("not a plain relative path")
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return fmt.Errorf("segment %q is not allowed", seg)
		}
	}
	return nil
}

func join(root, rel string) string {
	if root == "" {
		return rel
	}
	return root + "/" + rel
}

// resolvedBase is a base path mapped into the store.
type resolvedBase struct {
	key     string // store key of the base folder
	root    bool   // a dataset root (files under data/, _deletions/, ...)
	outside bool   // not in this dataset family: uri is all there is
	uri     string
}

// resolveBase maps a Lance base path onto this dataset family. Lance records
// bases by absolute URI ("/abs/db/t.lance", "s3://bucket/db/t.lance"), but a
// store only knows keys relative to its root. A branch dataset lives at
// <main>/tree/<branch>, and the bases it uses are the main dataset or
// another branch of it, so a base resolves when its path ends with the main
// root's key, optionally followed by tree/<branch>. The match is by whole
// path segments. A wrong match can only make retain keep more (it names
// keys of this family as referenced); a base that matches nothing is
// Outside and never deleted. A dataset at the store's root (main key "")
// matches every base: files of foreign bases would then only be kept, never
// deleted, since their keys fall outside the dataset's own folders.
func (d *Dataset) resolveBase(bp BasePath) resolvedBase {
	p := segments(uriPath(bp.Path))
	out := resolvedBase{root: bp.IsDatasetRoot, outside: true, uri: bp.Path}
	for _, main := range familyRoots(d.Root) {
		m := segments(main)
		if key, ok := matchFamily(p, m); ok {
			out.key, out.outside = key, false
			return out
		}
	}
	return out
}

// familyRoots returns the candidate main-dataset roots of the dataset at
// root, longest first: root itself, and every prefix that root continues
// with "/tree/..." (a branch's main dataset, under any branch naming).
func familyRoots(root string) []string {
	var out []string
	out = append(out, root)
	for i := len(root) - 1; i >= 0; i-- {
		if strings.HasPrefix(root[i:], "/tree/") {
			out = append(out, root[:i])
		}
	}
	if strings.HasPrefix(root, "tree/") {
		out = append(out, "")
	}
	return out
}

// matchFamily finds main (as whole segments) in p followed by nothing or by
// tree/<branch...>, and returns the store key p stands for.
func matchFamily(p, main []string) (string, bool) {
	if len(main) == 0 {
		// The main dataset is the store root: p is the root itself or
		// <root>/tree/<branch>; the first "tree" segment splits them.
		for j := 0; j < len(p)-1; j++ {
			if p[j] == "tree" {
				return strings.Join(p[j:], "/"), true
			}
		}
		return "", true
	}
	for j := len(p) - len(main); j >= 0; j-- {
		if !equalSegs(p[j:j+len(main)], main) {
			continue
		}
		rest := p[j+len(main):]
		if len(rest) == 0 {
			return strings.Join(main, "/"), true
		}
		if len(rest) >= 2 && rest[0] == "tree" {
			return strings.Join(main, "/") + "/" + strings.Join(rest, "/"), true
		}
	}
	return "", false
}

func equalSegs(a, b []string) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// uriPath strips a scheme and authority: "s3://bucket/a/b" -> "a/b",
// "file:///a/b" -> "/a/b"; plain paths are returned as they are.
func uriPath(u string) string {
	if i := strings.Index(u, "://"); i > 0 && !strings.ContainsAny(u[:i], "/") {
		rest := u[i+3:]
		if j := strings.IndexByte(rest, '/'); j >= 0 {
			return rest[j:]
		}
		return ""
	}
	return u
}

func segments(p string) []string {
	var out []string
	for _, s := range strings.Split(p, "/") {
		if s != "" && s != "." {
			out = append(out, s)
		}
	}
	return out
}

// RefSet answers "is this key referenced?" the way Lance's cleanup does:
// exact keys, whole index folders, and blob sidecars
// (data/<stem>/<blob> lives as long as data/<stem>.lance).
type RefSet struct {
	exact   map[string]bool
	folders map[string]bool // keys ending in '/'
}

// NewRefSet returns an empty set.
func NewRefSet() *RefSet { return &RefSet{exact: map[string]bool{}, folders: map[string]bool{}} }

// Add records refs. Outside refs are ignored: they are not store keys.
func (s *RefSet) Add(refs ...FileRef) {
	for _, r := range refs {
		switch {
		case r.Outside:
		case r.Prefix:
			s.folders[r.Key] = true
		default:
			s.exact[r.Key] = true
		}
	}
}

// Len is the number of exact keys and folders recorded.
func (s *RefSet) Len() int { return len(s.exact) + len(s.folders) }

// Contains reports whether key is referenced.
func (s *RefSet) Contains(key string) bool {
	if s.exact[key] {
		return true
	}
	for i := strings.LastIndexByte(key, '/'); i > 0; i = strings.LastIndexByte(key[:i], '/') {
		if s.folders[key[:i+1]] {
			return true
		}
	}
	// Blob v2 sidecar: <base>/data/<stem>/<file> with data/<stem>.lance.
	dir := path.Dir(key)
	if path.Base(path.Dir(dir)) == "data" {
		return s.exact[dir+".lance"]
	}
	return false
}
