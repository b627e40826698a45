package lance

import (
	"context"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/retain-dev/retain/core/storage"
)

// PutTagFile writes the tag file of t under d's _refs/tags/ in Lance's tag
// file format, with create-if-absent, WITHOUT checking that the version it
// names exists. It is for tag-shaped pins of objects that are not Lance
// manifests (retain's registry pins, which may name a registry version
// about to be committed); Lance datasets' own tags go through
// CreateTagOnBranch. t.Name, t.Branch ("" or "main" for main),
// t.Version, t.ManifestSize and t.Metadata are written; CreatedAt and
// UpdatedAt default to now. An existing file is ErrTagExists.
func (d *Dataset) PutTagFile(ctx context.Context, t Tag) (Tag, error) {
	key, err := d.tagKey(t.Name)
	if err != nil {
		return Tag{}, err
	}
	if t.Branch == "main" {
		t.Branch = ""
	}
	for k, v := range t.Metadata {
		if !utf8.ValidString(k) || !utf8.ValidString(v) {
			return Tag{}, &RefError{Op: "create-tag", Key: key, Err: storage.ErrInvalidArgument, Msg: fmt.Sprintf("metadata %q: keys and values must be UTF-8", k)}
		}
	}
	if t.Metadata == nil {
		t.Metadata = map[string]string{}
	}
	now := time.Now().UTC()
	if t.CreatedAt.IsZero() {
		t.CreatedAt = now
	}
	if t.UpdatedAt.IsZero() {
		t.UpdatedAt = t.CreatedAt
	}
	info, err := d.Store.PutBytes(ctx, key, encodeTag(t), storage.PutOptions{Mode: storage.PutCreateIfAbsent})
	switch {
	case errors.Is(err, storage.ErrAlreadyExists):
		return Tag{}, &RefError{Op: "create-tag", Key: key, Err: ErrTagExists,
			Msg: fmt.Sprintf("tag %q exists and is never replaced", t.Name), Cause: err}
	case err != nil:
		return Tag{}, err
	}
	t.Info = info
	return t, nil
}
