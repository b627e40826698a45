package lance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/retain-dev/retain/core/storage"
)

// ErrBranchNotRewritable: the branch file carries fields retain does not
// know (a newer Lance, or a hand edit). Rewriting it would drop them, so
// retain refuses and keeps the file. Kind storage.ErrUnsupported.
var ErrBranchNotRewritable = errors.New("Lance branch file holds fields retain would drop on rewrite")

// branchKeys are the keys of a branch file as Lance 12 writes them, in
// the order it writes them (BranchContents).
var branchKeys = []string{"parentBranch", "identifier", "parentVersion", "createAt", "manifestSize", "metadata"}

// encodeBranch writes the branch file exactly as Lance 12 writes it
// (serde_json::to_string_pretty of BranchContents: two-space indent, keys
// in declaration order, no trailing newline): parentBranch (null for
// main), identifier {version_mapping: [[version, id], ...]} — left out
// when b.Lineage is nil, as files of older Lance lack it —, parentVersion,
// createAt (Unix seconds), manifestSize, metadata (keys sorted: Lance's
// HashMap order is arbitrary).
func encodeBranch(b Branch) []byte {
	var s strings.Builder
	s.WriteString("{\n  \"parentBranch\": ")
	if b.ParentBranch == "" {
		s.WriteString("null")
	} else {
		jsonString(&s, b.ParentBranch)
	}
	if b.Lineage != nil {
		s.WriteString(",\n  \"identifier\": {\n    \"version_mapping\": ")
		if len(b.Lineage) == 0 {
			s.WriteString("[]")
		} else {
			s.WriteString("[\n")
			for i, f := range b.Lineage {
				fmt.Fprintf(&s, "      [\n        %d,\n        ", f.Version)
				jsonString(&s, f.ID)
				s.WriteString("\n      ]")
				if i < len(b.Lineage)-1 {
					s.WriteByte(',')
				}
				s.WriteByte('\n')
			}
			s.WriteString("    ]")
		}
		s.WriteString("\n  }")
	}
	fmt.Fprintf(&s, ",\n  \"parentVersion\": %d,\n  \"createAt\": %d,\n  \"manifestSize\": %d,\n  \"metadata\": ",
		b.ParentVersion, b.CreatedAt.Unix(), b.ManifestSize)
	prettyMap(&s, b.Metadata)
	s.WriteString("\n}")
	return []byte(s.String())
}

// unknownBranchFields names the keys of a branch file (and of its
// identifier) that encodeBranch would not write back.
func unknownBranchFields(body []byte) ([]string, error) {
	var unknown []string
	err := readObject(body, func(key string, raw json.RawMessage) error {
		switch {
		case !slices.Contains(branchKeys, key):
			unknown = append(unknown, key)
		case key == "identifier" && len(raw) > 0 && raw[0] == '{':
			return readObject(raw, func(k string, _ json.RawMessage) error {
				if k != "version_mapping" {
					unknown = append(unknown, "identifier."+k)
				}
				return nil
			})
		}
		return nil
	})
	return unknown, err
}

// ReplaceBranchMetadata rewrites the branch file of name with metadata
// meta, everything else as it was, as a compare-and-swap on the file's
// version token: it writes only while the file is still at ifVersion (a
// Branch's Info.Version), with replace-if-version. It is how retain keeps
// a branch's lifecycle (branch/lifecycle) in the file Lance itself lists, and
// costs two requests (one read, one conditional write).
//
// The file is written exactly as Lance 12 writes it (encodeBranch). A file
// changed since ifVersion is ErrBranchChanged (kind
// storage.ErrPreconditionFailed) and is not written; a missing one
// ErrBranchNotFound; a file with fields retain does not know
// ErrBranchNotRewritable (nothing is dropped); a store without
// replace-if-version refuses (storage.ErrUnsupported) rather than fall back
// to check-then-put. Keys and values must be UTF-8.
func (d *Dataset) ReplaceBranchMetadata(ctx context.Context, name, ifVersion string, meta map[string]string) (Branch, error) {
	file, err := branchFileName(name)
	if err != nil {
		return Branch{}, err
	}
	key := d.Key(branchesDir + "/" + file)
	for k, v := range meta {
		if !utf8.ValidString(k) || !utf8.ValidString(v) {
			return Branch{}, &RefError{Op: "update-branch", Key: key, Err: storage.ErrInvalidArgument, Msg: fmt.Sprintf("metadata %q: keys and values must be UTF-8", k)}
		}
	}
	if ifVersion == "" {
		return Branch{}, &RefError{Op: "update-branch", Key: key, Err: storage.ErrInvalidArgument, Msg: "a branch file is only rewritten against the version token it was read at"}
	}
	changed := func(cause error) error {
		return &RefError{Op: "update-branch", Key: key, Err: ErrBranchChanged,
			Msg: fmt.Sprintf("branch %q is no longer at version token %q and was not rewritten: read it again and decide", name, ifVersion), Cause: cause}
	}
	body, info, err := d.Store.ReadAll(ctx, key)
	switch {
	case errors.Is(err, storage.ErrNotFound):
		return Branch{}, &RefError{Op: "update-branch", Key: key, Err: ErrBranchNotFound, Msg: fmt.Sprintf("no branch %q", name), Cause: err}
	case err != nil:
		return Branch{}, err
	case info.Version != ifVersion:
		return Branch{}, changed(storage.ErrPreconditionFailed)
	}
	old, err := parseBranch(body)
	if err != nil {
		return Branch{}, &MalformedRefError{Ref: "branch", Key: key, Reason: err.Error()}
	}
	unknown, err := unknownBranchFields(body)
	if err != nil {
		return Branch{}, &MalformedRefError{Ref: "branch", Key: key, Reason: err.Error()}
	}
	if len(unknown) > 0 {
		return Branch{}, &RefError{Op: "update-branch", Key: key, Err: ErrBranchNotRewritable, Cause: storage.ErrUnsupported,
			Msg: fmt.Sprintf("fields %v are not ones Lance 12 writes; retain does not rewrite the file and drop them", unknown)}
	}
	nb := old
	nb.Metadata = maps.Clone(meta)
	if nb.Metadata == nil {
		nb.Metadata = map[string]string{}
	}
	out := encodeBranch(nb)
	// The new file must read back as the old one with the new metadata.
	back, err := parseBranch(out)
	if err != nil || back.ParentBranch != old.ParentBranch || back.ParentVersion != old.ParentVersion ||
		!back.CreatedAt.Equal(old.CreatedAt) || back.ManifestSize != old.ManifestSize ||
		!slices.Equal(back.Lineage, old.Lineage) || (back.Lineage == nil) != (old.Lineage == nil) || !maps.Equal(back.Metadata, nb.Metadata) {
		return Branch{}, &RefError{Op: "update-branch", Key: key, Err: ErrBranchNotRewritable, Cause: storage.ErrUnsupported,
			Msg: fmt.Sprintf("the file does not survive a rewrite unchanged (%v); it was kept", err)}
	}
	winfo, err := d.Store.PutBytes(ctx, key, out, storage.PutOptions{Mode: storage.PutReplaceIfVersion, IfVersion: ifVersion})
	switch {
	case errors.Is(err, storage.ErrPreconditionFailed), errors.Is(err, storage.ErrNotFound):
		return Branch{}, changed(err)
	case errors.Is(err, storage.ErrUnsupported):
		return Branch{}, &RefError{Op: "update-branch", Key: key, Err: storage.ErrUnsupported,
			Msg: "branch files are rewritten with replace-if-version, which this store does not provide; retain does not fall back to check-then-put", Cause: err}
	case err != nil:
		return Branch{}, err
	}
	nb.Name, nb.Info = name, winfo
	return nb, nil
}
