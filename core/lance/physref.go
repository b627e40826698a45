package lance

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/retain-dev/retain/core/storage"
)

// ErrPhysRefMismatch: the version a physical ref names now holds another
// commit (the dataset was deleted and recreated, or the manifest rewritten).
var ErrPhysRefMismatch = errors.New("Lance version is not the one the physical ref names")

// PhysRef names one commit of a dataset: a version and the exact manifest
// that commit wrote.
//
// Identity is the commit's content, never where or how it is stored: a copy
// (cp -a, rsync, a restore, an s3 sync to another bucket), chmod, a relink
// and Lance's own V1 -> V2 manifest rename keep the manifest's bytes and so
// keep the ref valid, while every store token (an inode and ctime on
// localfs, a VersionId) changes. A dataset deleted and recreated at the same
// path writes other bytes for the same version number (a new nanosecond
// timestamp and transaction uuid are inside them), so ABA is still refused.
//
// Two token formats are read:
//
//	lance-physref/2 <version> <size> <sha256 hex> <unix ns> "<txn uuid>"
//	lance-physref/1 <version> <size> <unix ns> "<key>" "<object version>" "<txn uuid>"
//
// Format 2, written for every new pin, is the commit's content digest. A
// format-1 token (older stores) is held to its commit: version, size,
// timestamp and transaction uuid; its key and object version are only where
// it was read then (the key is tried first), except for a manifest that
// carries neither timestamp nor uuid, which nothing but the object can
// identify. Tag names digest the token a row stores, so format-1 pins stay
// valid as they are: no migration renames them.
type PhysRef struct {
	Version uint64
	Size    int64
	// SHA256 is the hex digest of the manifest's bytes ("" in a format-1
	// token).
	SHA256 string
	// Committed and TxnUUID identify the commit.
	Committed time.Time
	TxnUUID   string
	// Key and ObjectVersion say where the manifest was read: not identity.
	// A format-1 token encodes them.
	Key           string
	ObjectVersion string
	// Format is the token format: 2 for refs read now, 1 for old tokens.
	Format int
}

const (
	physRefPrefix1 = "lance-physref/1"
	physRefPrefix2 = "lance-physref/2"
)

// PhysRef reads version v's manifest and returns its (format 2) ref.
func (d *Dataset) PhysRef(ctx context.Context, v Version) (PhysRef, error) {
	m, err := d.ReadManifest(ctx, v)
	if err != nil {
		return PhysRef{}, err
	}
	return m.physRef(), nil
}

func (m *Manifest) physRef() PhysRef {
	return PhysRef{Version: m.Version, Size: m.Size, SHA256: hex.EncodeToString(m.SHA256[:]),
		Committed: m.Timestamp, TxnUUID: m.TransactionUUID, Key: m.Key, ObjectVersion: m.ObjectVersion, Format: 2}
}

// String encodes the ref as one token in its format: safe to store in a
// checkpoint and compare for equality; ParsePhysRef reads it back.
func (p PhysRef) String() string {
	if p.Format == 1 {
		return fmt.Sprintf("%s %d %d %d %q %q %q", physRefPrefix1, p.Version, p.Size, unixNano(p.Committed),
			p.Key, p.ObjectVersion, p.TxnUUID)
	}
	return fmt.Sprintf("%s %d %d %s %d %q", physRefPrefix2, p.Version, p.Size, p.SHA256, unixNano(p.Committed), p.TxnUUID)
}

// unixNano is 0 for a manifest without a timestamp (UnixNano of the zero
// time is undefined).
func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// ParsePhysRef parses String's output in either format, and only that:
// anything that does not re-encode to the same text is refused.
func ParsePhysRef(s string) (PhysRef, error) {
	var p PhysRef
	var ns int64
	var err error
	switch {
	case strings.HasPrefix(s, physRefPrefix2+" "):
		p.Format = 2
		_, err = fmt.Sscanf(s, physRefPrefix2+" %d %d %s %d %q", &p.Version, &p.Size, &p.SHA256, &ns, &p.TxnUUID)
		if err == nil {
			if b, herr := hex.DecodeString(p.SHA256); herr != nil || len(b) != 32 || strings.ToLower(p.SHA256) != p.SHA256 {
				err = errors.New("the digest is not 64 lower-case hex digits")
			}
		}
	case strings.HasPrefix(s, physRefPrefix1+" "):
		p.Format = 1
		_, err = fmt.Sscanf(s, physRefPrefix1+" %d %d %d %q %q %q", &p.Version, &p.Size, &ns, &p.Key, &p.ObjectVersion, &p.TxnUUID)
	default:
		err = fmt.Errorf("it begins with neither %q nor %q", physRefPrefix2, physRefPrefix1)
	}
	if err == nil {
		if ns != 0 {
			p.Committed = time.Unix(0, ns).UTC()
		}
		if p.String() != s {
			err = errors.New("not in canonical form")
		}
	}
	if err != nil {
		return PhysRef{}, storage.Errorf("lance-physref", "", storage.ErrInvalidArgument, "cannot parse physical ref %q: %v", s, err)
	}
	return p, nil
}

// SameCommit reports whether two refs name the same version, commit
// timestamp and transaction: the commit's metadata, whatever happened to
// the object since.
func (p PhysRef) SameCommit(q PhysRef) bool {
	return p.Version == q.Version && p.Committed.Equal(q.Committed) && p.TxnUUID == q.TxnUUID
}

// Equal reports whether two refs encode the same token.
func (p PhysRef) Equal(q PhysRef) bool { return p.String() == q.String() }

// hasCommitIdentity: the manifest carries a timestamp or a transaction.
func (p PhysRef) hasCommitIdentity() bool { return !p.Committed.IsZero() || p.TxnUUID != "" }

// Matches reports whether got, a ref just read (format 2), is the commit p
// names. Format 2 compares the content digest; format 1 the commit (see
// PhysRef).
func (p PhysRef) Matches(got PhysRef) bool {
	if p.Version != got.Version || p.Size != got.Size {
		return false
	}
	if p.Format != 1 {
		return p.SHA256 == got.SHA256
	}
	if !p.hasCommitIdentity() {
		return p.Key == got.Key && p.ObjectVersion == got.ObjectVersion
	}
	return p.SameCommit(got)
}

// manifestKeys are the keys version n's manifest may have: the one a
// format-1 token recorded, then the V2 name, then the V1 name. Lance's own
// migration renames V1 to V2; a copy keeps either.
func (d *Dataset) manifestKeys(ref PhysRef) []string {
	keys := make([]string, 0, 3)
	if ref.Key != "" && strings.HasPrefix(ref.Key, d.Key(versionsDir)+"/") {
		keys = append(keys, ref.Key)
	}
	for _, nm := range []Naming{NamingV2, NamingV1} {
		if k := d.Key(versionsDir + "/" + ManifestName(ref.Version, nm)); k != ref.Key {
			keys = append(keys, k)
		}
	}
	return keys
}

// ReadPinned reads the manifest of the version ref names, under whichever
// name it has now, and returns it with the ref just read. It does not
// compare: see CheckPhysRef. storage.ErrNotFound when no name holds it.
func (d *Dataset) ReadPinned(ctx context.Context, ref PhysRef) (*Manifest, PhysRef, error) {
	var first error
	for _, k := range d.manifestKeys(ref) {
		m, err := d.ReadManifest(ctx, Version{N: ref.Version, Key: k})
		if errors.Is(err, storage.ErrNotFound) {
			if first == nil {
				first = err
			}
			continue
		}
		if err != nil {
			return nil, PhysRef{}, err
		}
		return m, m.physRef(), nil
	}
	return nil, PhysRef{}, storage.Errorf("lance-version", d.Key(versionsDir), storage.ErrNotFound,
		"version %d has no manifest under either naming scheme: %v", ref.Version, first)
}

// CheckPhysRef confirms the version ref names still holds its commit: nil,
// storage.ErrNotFound if the manifest is gone, or ErrPhysRefMismatch saying
// what changed.
func (d *Dataset) CheckPhysRef(ctx context.Context, ref PhysRef) error {
	_, err := d.VerifyPhysRef(ctx, ref)
	return err
}

// VerifyPhysRef is CheckPhysRef that also returns the ref as read now
// (format 2, with the key it was found under).
func (d *Dataset) VerifyPhysRef(ctx context.Context, ref PhysRef) (PhysRef, error) {
	_, got, err := d.ReadPinned(ctx, ref)
	if err != nil {
		return PhysRef{}, err
	}
	if ref.Matches(got) {
		return got, nil
	}
	what := fmt.Sprintf("size %d sha256 %s", got.Size, got.SHA256)
	was := fmt.Sprintf("size %d sha256 %s", ref.Size, ref.SHA256)
	if ref.Format == 1 {
		was = fmt.Sprintf("size %d", ref.Size)
		if !ref.hasCommitIdentity() {
			was += fmt.Sprintf(" at %s version token %q", ref.Key, ref.ObjectVersion)
			what += fmt.Sprintf(" at %s version token %q", got.Key, got.ObjectVersion)
		}
	}
	return got, fmt.Errorf("%w: %s holds version %d committed %s (txn %s, %s), not the commit of %s (txn %s, %s): the dataset was recreated or the manifest rewritten",
		ErrPhysRefMismatch, got.Key, got.Version, got.Committed.Format(time.RFC3339Nano), got.TxnUUID, what,
		ref.Committed.Format(time.RFC3339Nano), ref.TxnUUID, was)
}

// PinnedManifestKey is the key a ref's manifest is looked for first: what
// to name when it is missing under every name.
func (d *Dataset) PinnedManifestKey(ref PhysRef) string { return d.manifestKeys(ref)[0] }
