package lance

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/retain-dev/retain/core"
)

// ErrPhysRefMismatch: the version a physical ref names is no longer the
// object it was: rewritten, or a different commit at the same key (the
// dataset was deleted and recreated).
var ErrPhysRefMismatch = errors.New("Lance version is not the one the physical ref names")

// PhysRef pins one physical manifest object: which key, which write of it
// (the store's version token and size), and which commit it holds.
//
// Lance has no dataset-level identity that survives cleanup (version 1's
// manifest is removed like any other), so the identity is the commit's:
// the manifest's nanosecond timestamp and its transaction uuid, both written
// once per commit and copied by nothing. A dataset deleted and recreated at
// the same path gets new ones for the same version number, even on stores
// whose version token is a content hash (an S3 ETag). A byte-for-byte copy
// keeps them (SameCommit), while its object token may change (it does on
// localfs, not for an ETag of the same bytes).
type PhysRef struct {
	Version uint64
	Key     string
	// ObjectVersion and Size are the store's view of the manifest object.
	ObjectVersion string
	Size          int64
	// Committed and TxnUUID identify the commit.
	Committed time.Time
	TxnUUID   string
}

const physRefPrefix = "lance-physref/1"

// PhysRef reads version v's manifest and returns its physical ref. The
// object info comes from the same read as the bytes, so the token and the
// commit identity describe one write.
func (d *Dataset) PhysRef(ctx context.Context, v Version) (PhysRef, error) {
	m, err := d.ReadManifest(ctx, v)
	if err != nil {
		return PhysRef{}, err
	}
	return m.physRef(), nil
}

func (m *Manifest) physRef() PhysRef {
	return PhysRef{Version: m.Version, Key: m.Key, ObjectVersion: m.ObjectVersion, Size: m.Size,
		Committed: m.Timestamp, TxnUUID: m.TransactionUUID}
}

// String encodes the ref as one token: safe to store in a checkpoint and
// compare for equality; ParsePhysRef reads it back.
func (p PhysRef) String() string {
	return fmt.Sprintf("%s %d %d %d %q %q %q", physRefPrefix, p.Version, p.Size, unixNano(p.Committed),
		p.Key, p.ObjectVersion, p.TxnUUID)
}

// unixNano is 0 for a manifest without a timestamp (UnixNano of the zero
// time is undefined).
func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// ParsePhysRef parses String's output, and only that: anything that does
// not re-encode to the same text is refused.
func ParsePhysRef(s string) (PhysRef, error) {
	var p PhysRef
	var ns int64
	_, err := fmt.Sscanf(s, physRefPrefix+" %d %d %d %q %q %q", &p.Version, &p.Size, &ns, &p.Key, &p.ObjectVersion, &p.TxnUUID)
	if err == nil {
		if ns != 0 {
			p.Committed = time.Unix(0, ns).UTC()
		}
		if p.String() != s {
			err = errors.New("not in canonical form")
		}
	}
	if err != nil {
		return PhysRef{}, core.Errorf("lance-physref", "", core.ErrInvalidArgument, "cannot parse physical ref %q: %v", s, err)
	}
	return p, nil
}

// SameCommit reports whether two refs name the same commit of the same
// version, whatever happened to the object since (a copy, a restore).
func (p PhysRef) SameCommit(q PhysRef) bool {
	return p.Version == q.Version && p.Committed.Equal(q.Committed) && p.TxnUUID == q.TxnUUID
}

// Equal reports whether two refs name the same physical object.
func (p PhysRef) Equal(q PhysRef) bool {
	return p.SameCommit(q) && p.Key == q.Key && p.ObjectVersion == q.ObjectVersion && p.Size == q.Size
}

// CheckPhysRef confirms ref still names the object at its key: it returns
// nil, core.ErrNotFound if the manifest is gone, or ErrPhysRefMismatch
// saying what changed.
func (d *Dataset) CheckPhysRef(ctx context.Context, ref PhysRef) error {
	v := Version{N: ref.Version, Key: ref.Key}
	got, err := d.PhysRef(ctx, v)
	if err != nil {
		return err
	}
	switch {
	case !got.SameCommit(ref):
		return fmt.Errorf("%w: %s holds version %d committed %s (txn %s), not the commit of %s (txn %s): the dataset was recreated",
			ErrPhysRefMismatch, ref.Key, got.Version, got.Committed.Format(time.RFC3339Nano), got.TxnUUID,
			ref.Committed.Format(time.RFC3339Nano), ref.TxnUUID)
	case !got.Equal(ref):
		return fmt.Errorf("%w: %s holds the same commit but the object was rewritten (version token %q size %d, was %q size %d)",
			ErrPhysRefMismatch, ref.Key, got.ObjectVersion, got.Size, ref.ObjectVersion, ref.Size)
	}
	return nil
}
