package storage

import (
	"fmt"
	"io"
	"time"
)

// Info describes one stored object.
type Info struct {
	Key  string
	Size int64
	// Version is an opaque token that changes on every write of the key
	// (an etag, a generation, ...). Compare tokens only for equality.
	Version string
	ModTime time.Time
}

// PutMode selects how Put treats an existing object.
type PutMode uint8

const (
	// PutOverwrite writes unconditionally.
	PutOverwrite PutMode = iota
	// PutCreateIfAbsent writes only if the key does not exist; otherwise
	// ErrAlreadyExists and nothing is written.
	PutCreateIfAbsent
	// PutReplaceIfVersion writes only if the key exists with version
	// PutOptions.IfVersion; otherwise ErrPreconditionFailed (version
	// mismatch) or ErrNotFound (missing key) and nothing is written.
	PutReplaceIfVersion
)

func (m PutMode) String() string {
	switch m {
	case PutOverwrite:
		return "overwrite"
	case PutCreateIfAbsent:
		return "create-if-absent"
	case PutReplaceIfVersion:
		return "replace-if-version"
	}
	return fmt.Sprintf("put-mode(%d)", uint8(m))
}

// PutOptions controls a Put.
type PutOptions struct {
	Mode      PutMode
	IfVersion string // required for PutReplaceIfVersion
}

// DeleteOptions controls a Delete. With IfVersion empty the delete is
// unconditional and a missing key is not an error. With IfVersion set the
// delete happens only if the object has that version: a mismatch is
// ErrPreconditionFailed, a missing key is ErrNotFound.
type DeleteOptions struct {
	IfVersion string
}

// DeleteResult is the outcome for one key of a DeleteMany.
type DeleteResult struct {
	Key string
	Err error // nil when deleted or already absent
}

// ListOptions selects one page of a listing.
type ListOptions struct {
	Prefix     string
	StartAfter string // exclusive; keys strictly greater are returned
	PageSize   int    // 0 means the adapter's default; clamped to its limit
	// Delimiter, if "/", lists one level: a key with a '/' after Prefix is
	// not listed itself, its folder is, once, in ListPage.Folders
	// ("<Prefix><name>/"), as S3's delimiter and a directory listing do.
	// A StartAfter that is a folder (ends in '/') continues after every
	// key under it. Only "/" is supported. A driver that does not declare
	// Capabilities.ListDelimiter never sees one: the Store lists its
	// folders one request each.
	Delimiter string
}

// ListPage is one page of keys in lexicographic (byte) order.
type ListPage struct {
	Objects []Info
	// Folders, with ListOptions.Delimiter: the folders on this page. Objects
	// and folders together are in byte order and at most the page size.
	Folders []string
	// More is true when keys after the last one on this page may exist;
	// continue with StartAfter set to Last().
	More bool
}

// Last is the last entry of the page, object key or folder: the StartAfter
// of the next page ("" for an empty page).
func (p ListPage) Last() string {
	last := ""
	if n := len(p.Objects); n > 0 {
		last = p.Objects[n-1].Key
	}
	if n := len(p.Folders); n > 0 && p.Folders[n-1] > last {
		last = p.Folders[n-1]
	}
	return last
}

// ClampLevel keeps the first size entries of a level's page, objects and
// folders together in byte order, marking it More when it dropped any: for
// an adapter whose backend does not count folders against the page size
// (the dropped entries come back on the next page, which starts after the
// last one kept).
func ClampLevel(p ListPage, size int) ListPage {
	if size <= 0 || len(p.Objects)+len(p.Folders) <= size {
		return p
	}
	var out ListPage
	oi, fi := 0, 0
	for len(out.Objects)+len(out.Folders) < size {
		if fi < len(p.Folders) && (oi == len(p.Objects) || p.Folders[fi] < p.Objects[oi].Key) {
			out.Folders, fi = append(out.Folders, p.Folders[fi]), fi+1
		} else {
			out.Objects, oi = append(out.Objects, p.Objects[oi]), oi+1
		}
	}
	out.More = true
	return out
}

// Delimiter is the one ListOptions.Delimiter the contract knows.
const Delimiter = "/"

// AfterFolder is the StartAfter that continues past every key under
// folder (which ends in '/'): folder followed by the greatest code point,
// which sorts after any valid key below it but the pathological ones that
// continue with that code point, which a caller skips by calling again.
func AfterFolder(folder string) string { return folder + "\U0010FFFF" }

// Reader is an open object body with the info of exactly the version being
// read. Close it.
type Reader struct {
	Info Info
	io.ReadCloser
}
