package lance

import (
	"context"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/retain-dev/retain/core/storage"
)

// UpdateTagOptions select how UpdateTagFile makes its write conditional.
type UpdateTagOptions struct {
	// Gated: the caller holds adapter gates (storage.Store.WithGates) that
	// keep every other writer of the tag out. The compare is then a read of
	// the tag's current version token and the write an overwrite. Without
	// it the write is one replace-if-version, and a store that cannot
	// replace-if-version refuses (storage.ErrUnsupported): never a silent
	// check-then-put.
	Gated bool
	// DropUnknown lets the rewrite drop fields Lance 12 does not write
	// (otherwise ErrTagNotRewritable): only for the delete mark of a tag
	// about to be deleted.
	DropUnknown bool
	// Now is the new updatedAt; zero means time.Now. It is moved forward
	// to just after the old updatedAt when it is not later, so updatedAt
	// only grows.
	Now time.Time
}

// ErrTagNotRewritable: the tag file holds fields Lance 12 does not write;
// rewriting it would drop them, so retain refuses and keeps the file. Kind
// storage.ErrUnsupported.
var ErrTagNotRewritable = errors.New("Lance tag file holds fields retain would drop on rewrite")

// UpdateTagFile rewrites the tag file old was read from (ReadTag or
// ListTags) with metadata as its whole new metadata map, exactly as Lance 12
// rewrites a tag (tags.update): branch, version, manifestSize and createdAt
// are kept as read, updatedAt becomes now. The write is conditional on the
// object still being the one read (old.Info.Version): a tag changed since is
// ErrTagChanged (kind storage.ErrPreconditionFailed) and stays as it is; a tag
// deleted since is ErrTagNotFound (kind storage.ErrNotFound) and is never
// created again — a replace-if-version of a missing object writes nothing.
func (d *Dataset) UpdateTagFile(ctx context.Context, old Tag, metadata map[string]string, o UpdateTagOptions) (Tag, error) {
	key, err := d.tagKey(old.Name)
	if err != nil {
		return Tag{}, err
	}
	if old.Info.Version == "" {
		return Tag{}, &RefError{Op: "update-tag", Key: key, Err: storage.ErrInvalidArgument,
			Msg: "no version token: update a tag read from the store (ReadTag or ListTags)"}
	}
	if old.Info.Key != "" && old.Info.Key != key {
		return Tag{}, &RefError{Op: "update-tag", Key: key, Err: storage.ErrInvalidArgument,
			Msg: fmt.Sprintf("the tag was read from %q", old.Info.Key)}
	}
	if len(old.unknown) > 0 && !o.DropUnknown {
		return Tag{}, &RefError{Op: "update-tag", Key: key, Err: ErrTagNotRewritable, Cause: storage.ErrUnsupported,
			Msg: fmt.Sprintf("fields %v are not ones Lance 12 writes; retain does not rewrite the file and drop them", old.unknown)}
	}
	for k, v := range metadata {
		if !utf8.ValidString(k) || !utf8.ValidString(v) {
			return Tag{}, &RefError{Op: "update-tag", Key: key, Err: storage.ErrInvalidArgument, Msg: fmt.Sprintf("metadata %q: keys and values must be UTF-8", k)}
		}
	}
	next := old
	next.Metadata = make(map[string]string, len(metadata))
	for k, v := range metadata {
		next.Metadata[k] = v
	}
	now := o.Now
	if now.IsZero() {
		now = time.Now()
	}
	now = now.UTC()
	if !old.UpdatedAt.IsZero() && !now.After(old.UpdatedAt) {
		now = old.UpdatedAt.Add(time.Microsecond).UTC()
	}
	next.UpdatedAt = now
	changed := func(cause error) error {
		return &RefError{Op: "update-tag", Key: key, Err: ErrTagChanged,
			Msg: fmt.Sprintf("tag %q is no longer at version token %q and was not rewritten: read it again and decide", old.Name, old.Info.Version), Cause: cause}
	}
	notFound := func(cause error) error {
		return &RefError{Op: "update-tag", Key: key, Err: ErrTagNotFound,
			Msg: fmt.Sprintf("tag %q was deleted since it was read; an update never creates it again", old.Name), Cause: cause}
	}
	opts := storage.PutOptions{Mode: storage.PutReplaceIfVersion, IfVersion: old.Info.Version}
	if o.Gated {
		cur, err := d.Store.Stat(ctx, key)
		switch {
		case errors.Is(err, storage.ErrNotFound):
			return Tag{}, notFound(err)
		case err != nil:
			return Tag{}, err
		case cur.Version != old.Info.Version:
			return Tag{}, changed(storage.Errorf("update-tag", key, storage.ErrPreconditionFailed, "version token %q, expected %q", cur.Version, old.Info.Version))
		}
		opts = storage.PutOptions{Mode: storage.PutOverwrite}
	}
	info, err := d.Store.PutBytes(ctx, key, encodeTag(next), opts)
	switch {
	case errors.Is(err, storage.ErrNotFound):
		return Tag{}, notFound(err)
	case errors.Is(err, storage.ErrPreconditionFailed):
		return Tag{}, changed(err)
	case errors.Is(err, storage.ErrUnsupported):
		return Tag{}, &RefError{Op: "update-tag", Key: key, Err: storage.ErrUnsupported,
			Msg: "tags are updated with replace-if-version, which this store does not provide; retain does not fall back to check-then-put", Cause: err}
	case err != nil:
		return Tag{}, err
	}
	next.Info = info
	return next, nil
}

// EncodeTagFile returns the bytes of t's tag file exactly as Lance 12
// writes them (t.Name and t.Info are not part of the file).
func EncodeTagFile(t Tag) []byte { return encodeTag(t) }

// TagKey returns the key of the tag file of name under d's _refs/tags/, or
// ErrInvalidName.
func (d *Dataset) TagKey(name string) (string, error) { return d.tagKey(name) }
