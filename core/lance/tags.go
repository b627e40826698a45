package lance

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/retain-dev/retain/core/storage"
)

// Typed refusals about tags. Errors wrap one of these and keep the storage
// kind of their cause (storage.ErrAlreadyExists, storage.ErrNotFound, ...).
var (
	// ErrMalformedTag: a tag file retain cannot read as Lance would. Any
	// cleanup of the dataset must refuse while one exists.
	ErrMalformedTag = errors.New("malformed Lance tag file")
	// ErrTagExists: CreateTag lost create-if-absent; the tag exists.
	ErrTagExists = errors.New("Lance tag already exists")
	// ErrTagNotFound: no tag of that name.
	ErrTagNotFound = errors.New("Lance tag not found")
	// ErrTagChanged: DeleteTag's expected version token no longer matches.
	ErrTagChanged = errors.New("Lance tag changed since it was read")
)

// Tag is one Lance tag: a name for a version of main or of a branch. Tags
// of every branch live under the main dataset's _refs/tags/.
type Tag struct {
	Name string
	// Branch is the branch whose version the tag names; "" for main
	// (written as null).
	Branch  string
	Version uint64
	// ManifestSize is the byte size of the tagged manifest, as recorded.
	ManifestSize uint64
	// CreatedAt and UpdatedAt are zero when the file does not carry them
	// (tags written by older Lance releases).
	CreatedAt, UpdatedAt time.Time
	Metadata             map[string]string
	// Info is the tag file's key, size and version token: pass
	// Info.Version to DeleteTag to delete only this state of the tag.
	Info storage.Info
	// unknown are keys of the file Lance 12 does not write (a newer Lance,
	// a hand edit): UpdateTagFile refuses to rewrite and drop them.
	unknown []string
}

// RefError is a typed refusal about one tag or branch. errors.Is matches
// its sentinel (ErrTagExists, ErrTagNotFound, ...) and, through Cause, the
// storage error's kind.
type RefError struct {
	Op    string // "create-tag", "read-tag", "delete-tag", "read-branch"
	Key   string
	Err   error // the sentinel
	Msg   string
	Cause error
}

func (e *RefError) Error() string {
	s := fmt.Sprintf("%s %q: %v", e.Op, e.Key, e.Err)
	if e.Msg != "" {
		s += ": " + e.Msg
	}
	if e.Cause != nil {
		s += ": " + e.Cause.Error()
	}
	return s
}

func (e *RefError) Unwrap() []error {
	if e.Cause == nil {
		return []error{e.Err}
	}
	return []error{e.Err, e.Cause}
}

// MalformedRefError is one tag or branch file retain cannot read as Lance
// would. It matches ErrMalformedTag or ErrMalformedBranch.
type MalformedRefError struct {
	Ref    string // "tag" or "branch"
	Key    string
	Reason string
}

func (e *MalformedRefError) Error() string {
	return fmt.Sprintf("malformed Lance %s file %q: %s", e.Ref, e.Key, e.Reason)
}

func (e *MalformedRefError) Unwrap() error {
	if e.Ref == "branch" {
		return ErrMalformedBranch
	}
	return ErrMalformedTag
}

// MalformedRefsError lists every malformed file one listing found, next to
// the refs it could read. It matches ErrMalformedTag or ErrMalformedBranch.
type MalformedRefsError struct {
	Ref   string // "tag" or "branch"
	Files []*MalformedRefError
}

// Keys returns the keys of the malformed files.
func (e *MalformedRefsError) Keys() []string {
	out := make([]string, len(e.Files))
	for i, f := range e.Files {
		out[i] = f.Key
	}
	return out
}

func (e *MalformedRefsError) Error() string {
	const show = 10
	var b strings.Builder
	fmt.Fprintf(&b, "%d malformed Lance %s file(s): ", len(e.Files), e.Ref)
	for i, f := range e.Files {
		if i == show {
			fmt.Fprintf(&b, "; and %d more", len(e.Files)-show)
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%q (%s)", f.Key, f.Reason)
	}
	b.WriteString(": Lance's own listing fails on them too; fix or remove them — cleanup of this dataset refuses until then")
	return b.String()
}

func (e *MalformedRefsError) Unwrap() []error {
	out := make([]error, len(e.Files))
	for i, f := range e.Files {
		out[i] = f
	}
	return out
}

func (d *Dataset) tagKey(name string) (string, error) {
	file, err := tagFileName(name)
	if err != nil {
		return "", err
	}
	return d.Key(tagsDir + "/" + file), nil
}

// ListTags reads every tag under _refs/tags/, sorted by name. d must be the
// main dataset: tags of branches live there too. A malformed tag file —
// bad JSON, missing fields, a name Lance could not read back, a folder
// Lance would take for a tag — never stops the listing: the good tags are
// returned together with a *MalformedRefsError (ErrMalformedTag) naming
// every bad key, so a caller that must be sure (cleanup) refuses. Files
// Lance ignores (not ending in .json, or in a subfolder) are ignored, and
// so is a tag deleted between the listing and its read. A storage error
// returns no tags.
func (d *Dataset) ListTags(ctx context.Context) ([]Tag, error) {
	var good []Tag
	var bad []*MalformedRefError
	err := d.readRefs(ctx, "tag", tagsDir, tagNameFromFile, func(name string, body []byte, info storage.Info) {
		t, err := parseTag(body)
		if err != nil {
			bad = append(bad, &MalformedRefError{Ref: "tag", Key: info.Key, Reason: err.Error()})
			return
		}
		t.Name, t.Info = name, info
		good = append(good, t)
	}, func(m *MalformedRefError) { bad = append(bad, m) })
	if err != nil {
		return nil, err
	}
	sort.Slice(good, func(i, j int) bool { return good[i].Name < good[j].Name })
	if len(bad) > 0 {
		sort.Slice(bad, func(i, j int) bool { return bad[i].Key < bad[j].Key })
		return good, &MalformedRefsError{Ref: "tag", Files: bad}
	}
	return good, nil
}

// readRefs lists dir (relative to the dataset), maps each file to a ref
// name with nameOf, reads the good ones concurrently and hands each body to
// got, serially. Files that vanish between listing and reading are
// skipped: they were deleted.
func (d *Dataset) readRefs(ctx context.Context, ref, dir string, nameOf func(string) (string, string),
	got func(name string, body []byte, info storage.Info), malformed func(*MalformedRefError)) error {
	prefix := d.Key(dir) + "/"
	objs, err := d.Store.List(ctx, prefix, maxRefsList)
	if err != nil {
		return err
	}
	return d.readRefFiles(ctx, refFiles(ref, prefix, objs, nameOf, malformed), func(_ int, name string, body []byte, info storage.Info) {
		got(name, body, info)
	})
}

// readRefFiles reads the ref files jobs names, refReadConns at a time, and
// hands each body to got in the order of jobs (i its index), serially. A
// file deleted since its listing is skipped; any other error returns.
func (d *Dataset) readRefFiles(ctx context.Context, jobs []refFile, got func(i int, name string, body []byte, info storage.Info)) error {
	type result struct {
		body []byte
		info storage.Info
		err  error
	}
	res := make([]result, len(jobs))
	cache, store := refCacheFrom(ctx), d.Store.Location().String()
	var wg sync.WaitGroup
	sem := make(chan struct{}, refReadConns)
	for i, j := range jobs {
		if b, info, ok := cache.lookup(store, j.info); ok {
			res[i] = result{b, info, nil}
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			b, info, err := d.Store.ReadAll(ctx, j.info.Key)
			if err == nil {
				cache.remember(store, j.info.Key, b, info)
			}
			res[i] = result{b, info, err}
		}()
	}
	wg.Wait()
	for i, r := range res {
		switch {
		case errors.Is(r.err, storage.ErrNotFound):
			continue
		case r.err != nil:
			return r.err
		}
		got(i, jobs[i].name, r.body, r.info)
	}
	return nil
}

// refFile is one file of a refs folder that Lance reads as a ref, with
// its listing.
type refFile struct {
	name string
	info storage.Info
}

// refFiles picks, from a listing of a refs folder, the files Lance reads as
// refs, as Lance lists them: one level, ".json" files, named by nameOf. A
// folder named like a ref and a file whose name is not one are malformed.
func refFiles(ref, prefix string, objs []storage.Info, nameOf func(string) (string, string), malformed func(*MalformedRefError)) []refFile {
	var out []refFile
	folders := map[string]bool{}
	for _, o := range objs {
		rel := strings.TrimPrefix(o.Key, prefix)
		if i := strings.IndexByte(rel, '/'); i >= 0 {
			// Lance lists one level: a folder is ignored unless its name
			// ends in .json, which Lance then fails to read as a file.
			if f := rel[:i]; strings.HasSuffix(f, refExt) && !folders[f] {
				folders[f] = true
				malformed(&MalformedRefError{Ref: ref, Key: prefix + f,
					Reason: "a folder whose name ends in .json: Lance lists it as a " + ref + " and fails to read it"})
			}
			continue
		}
		if !strings.HasSuffix(rel, refExt) {
			continue
		}
		name, reason := nameOf(rel)
		if reason != "" {
			malformed(&MalformedRefError{Ref: ref, Key: o.Key, Reason: reason})
			continue
		}
		out = append(out, refFile{name, o})
	}
	return out
}

// ReadTag reads one tag. A missing tag is ErrTagNotFound (kind
// storage.ErrNotFound); an unreadable one ErrMalformedTag naming its key.
func (d *Dataset) ReadTag(ctx context.Context, name string) (Tag, error) {
	key, err := d.tagKey(name)
	if err != nil {
		return Tag{}, err
	}
	body, info, err := d.Store.ReadAll(ctx, key)
	if errors.Is(err, storage.ErrNotFound) {
		return Tag{}, &RefError{Op: "read-tag", Key: key, Err: ErrTagNotFound, Msg: fmt.Sprintf("no tag %q", name), Cause: err}
	}
	if err != nil {
		return Tag{}, err
	}
	t, err := parseTag(body)
	if err != nil {
		return Tag{}, &MalformedRefError{Ref: "tag", Key: key, Reason: err.Error()}
	}
	t.Name, t.Info = name, info
	return t, nil
}

// CreateTag tags version of main; see CreateTagOnBranch.
func (d *Dataset) CreateTag(ctx context.Context, name string, version uint64, metadata map[string]string) (Tag, error) {
	return d.CreateTagOnBranch(ctx, name, "", version, metadata)
}

// CreateTagOnBranch writes _refs/tags/<name>.json under the main dataset d,
// naming version of branch ("" or "main" for main), exactly as Lance 12
// writes it: the manifest size is the tagged manifest's exact byte size,
// createdAt and updatedAt are now. The write is create-if-absent: an
// existing tag is never replaced (ErrTagExists, kind storage.ErrAlreadyExists),
// and a store that cannot create-if-absent refuses (storage.ErrUnsupported)
// rather than fall back to check-then-put. The version must exist
// (storage.ErrNotFound otherwise). Names Lance refuses, and non-ASCII names
// Lance accepts but cannot list back, are ErrInvalidName.
func (d *Dataset) CreateTagOnBranch(ctx context.Context, name, branch string, version uint64, metadata map[string]string) (Tag, error) {
	key, err := d.tagKey(name)
	if err != nil {
		return Tag{}, err
	}
	if branch == "main" {
		branch = ""
	}
	for k, v := range metadata {
		if !utf8.ValidString(k) || !utf8.ValidString(v) {
			return Tag{}, &RefError{Op: "create-tag", Key: key, Err: storage.ErrInvalidArgument, Msg: fmt.Sprintf("metadata %q: keys and values must be UTF-8", k)}
		}
	}
	src := d
	if branch != "" {
		if src, err = d.Branch(branch); err != nil {
			return Tag{}, err
		}
	}
	v, err := src.VersionAt(ctx, version)
	if err != nil {
		return Tag{}, fmt.Errorf("create tag %q on %s: %w", name, branchLabel(branch), err)
	}
	now := time.Now().UTC()
	t := Tag{Name: name, Branch: branch, Version: version, ManifestSize: uint64(v.Info.Size),
		CreatedAt: now, UpdatedAt: now, Metadata: map[string]string{}}
	for k, val := range metadata {
		t.Metadata[k] = val
	}
	info, err := d.Store.PutBytes(ctx, key, encodeTag(t), storage.PutOptions{Mode: storage.PutCreateIfAbsent})
	switch {
	case errors.Is(err, storage.ErrAlreadyExists):
		return Tag{}, &RefError{Op: "create-tag", Key: key, Err: ErrTagExists,
			Msg: fmt.Sprintf("tag %q exists and is never replaced: choose another name, or delete it first", name), Cause: err}
	case errors.Is(err, storage.ErrUnsupported):
		return Tag{}, &RefError{Op: "create-tag", Key: key, Err: storage.ErrUnsupported,
			Msg: "tags are created with create-if-absent, which this store does not provide; retain does not fall back to check-then-put", Cause: err}
	case err != nil:
		return Tag{}, err
	}
	t.Info = info
	return t, nil
}

func branchLabel(b string) string {
	if b == "" {
		return "main"
	}
	return fmt.Sprintf("branch %q", b)
}

// DeleteTag removes a tag. With ifVersion (a Tag's Info.Version) it is a
// delete-if-version: a tag changed since it was read is refused with
// ErrTagChanged (kind storage.ErrPreconditionFailed) and stays; a store
// without delete-if-version refuses (storage.ErrUnsupported). With ifVersion
// empty the delete is unconditional, as Lance's own. A missing tag is
// ErrTagNotFound either way.
func (d *Dataset) DeleteTag(ctx context.Context, name, ifVersion string) error {
	key, err := d.tagKey(name)
	if err != nil {
		return err
	}
	notFound := func(cause error) error {
		return &RefError{Op: "delete-tag", Key: key, Err: ErrTagNotFound, Msg: fmt.Sprintf("no tag %q", name), Cause: cause}
	}
	if ifVersion == "" {
		if _, err := d.Store.Stat(ctx, key); errors.Is(err, storage.ErrNotFound) {
			return notFound(err)
		} else if err != nil {
			return err
		}
		return d.Store.Delete(ctx, key, storage.DeleteOptions{})
	}
	err = d.Store.Delete(ctx, key, storage.DeleteOptions{IfVersion: ifVersion})
	switch {
	case errors.Is(err, storage.ErrNotFound):
		return notFound(err)
	case errors.Is(err, storage.ErrPreconditionFailed):
		return &RefError{Op: "delete-tag", Key: key, Err: ErrTagChanged,
			Msg: fmt.Sprintf("tag %q is no longer at version token %q and was kept: read it again and decide", name, ifVersion), Cause: err}
	case errors.Is(err, storage.ErrUnsupported):
		return &RefError{Op: "delete-tag", Key: key, Err: storage.ErrUnsupported,
			Msg: "this store cannot delete-if-version: the tag was kept; delete it unconditionally (empty version) only if nothing else writes it", Cause: err}
	}
	return err
}
