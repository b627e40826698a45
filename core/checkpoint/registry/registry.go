package registry

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/retain-dev/retain/core/storage"
)

// Where the registry lives in a store.
const (
	// RegistryPath is the registry's prefix (without the trailing '/'),
	// also the Path of registry pin targets.
	RegistryPath = "_retain/registry"
	// VersionsPrefix holds one object per registry version, named by
	// VersionKey so that an ordered listing returns the newest first.
	VersionsPrefix = RegistryPath + "/versions/"
	// HintKey is the best-effort latest-version hint, written after each
	// commit on stores whose listing is not ordered. Never authority.
	HintKey = RegistryPath + "/latest_version_hint.json"
	// TagsPrefix is reserved for the registry's pin tags (the create
	// protocol writes them, in Lance's tag file format, as
	// TagsPrefix+<tag>.json).
	TagsPrefix = RegistryPath + "/_refs/tags/"
)

const (
	versionDigits = 20
	versionSuffix = ".json"
	// headPageSize is the page size of the one listing request that finds
	// the head: the newest version sorts first, so one entry suffices;
	// two leave room for a stray object without a second request.
	headPageSize = 2
	// maxSnapshotBytes bounds one read of a snapshot.
	maxSnapshotBytes = 256 << 20
	// maxHistoryList bounds a full listing of the versions (History and
	// the unordered-store fallback), never used by Head on ordered stores.
	maxHistoryList = 10_000_000
)

// VersionKey is the object key of registry version v (v >= 1):
// VersionsPrefix + the 20-digit zero-padded decimal of u64::MAX - v +
// ".json", Lance's V2 manifest naming. Newer versions sort first.
func VersionKey(v Version) string {
	return fmt.Sprintf("%s%0*d%s", VersionsPrefix, versionDigits, uint64(math.MaxUint64)-uint64(v), versionSuffix)
}

// ParseVersionKey returns the version an object key under VersionsPrefix
// stands for; ok is false for anything else (including version 0, which is
// never stored).
func ParseVersionKey(key string) (Version, bool) {
	name, ok := strings.CutPrefix(key, VersionsPrefix)
	if !ok {
		return 0, false
	}
	digits, ok := strings.CutSuffix(name, versionSuffix)
	if !ok || len(digits) != versionDigits {
		return 0, false
	}
	for i := 0; i < len(digits); i++ {
		if digits[i] < '0' || digits[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseUint(digits, 10, 64)
	if err != nil || n == math.MaxUint64 {
		return 0, false
	}
	return Version(math.MaxUint64 - n), true
}

// Ref is the physical-ref token of one registry version: its number and
// the size and SHA-256 of its exact bytes. It depends only on the bytes, so
// it is known before the commit (Snapshot.Encode) and survives a copy of
// the store.
type Ref struct {
	Version Version
	Size    int64
	SHA256  string // 64 lower-case hex digits
}

const refPrefix = "retain-registry/1"

func refOf(v Version, body []byte) Ref {
	sum := sha256.Sum256(body)
	return Ref{Version: v, Size: int64(len(body)), SHA256: hex.EncodeToString(sum[:])}
}

// IsZero reports whether r is the zero Ref (no object).
func (r Ref) IsZero() bool { return r == Ref{} }

// String is the token form: "retain-registry/1 <version> <size> <sha256>".
func (r Ref) String() string {
	return fmt.Sprintf("%s %d %d %s", refPrefix, uint64(r.Version), r.Size, r.SHA256)
}

// ParseRef parses String's output, and only that.
func ParseRef(s string) (Ref, error) {
	var v uint64
	var r Ref
	_, err := fmt.Sscanf(s, refPrefix+" %d %d %s", &v, &r.Size, &r.SHA256)
	r.Version = Version(v)
	if err == nil && (r.String() != s || len(r.SHA256) != 64 || v == 0 || r.Size <= 0) {
		err = errors.New("not in canonical form")
	}
	if err == nil {
		if _, herr := hex.DecodeString(r.SHA256); herr != nil || strings.ToLower(r.SHA256) != r.SHA256 {
			err = errors.New("the digest is not lower-case hex")
		}
	}
	if err != nil {
		return Ref{}, errorf("parse-ref", s, ErrInvalidSnapshot, "not a registry ref: %v", err)
	}
	return r, nil
}

// RegistryTarget is the pin target of a registry version: path
// RegistryPath, branch "main", its version and its Ref token.
func RegistryTarget(r Ref) Target {
	return Target{Path: RegistryPath, Branch: MainBranch, Version: uint64(r.Version), PhysicalRef: r.String()}
}

// Options configure a Registry.
type Options struct {
	// Scope is how far the store's writers reach: commits need
	// create-if-absent reaching it (claim.ScopeFor gives host for file://,
	// global otherwise). Zero means global. Reads need nothing.
	Scope storage.Scope
}

// Registry reads and commits registry versions of one store. It keeps no
// state but the highest version it has seen (to refuse a commit on a head
// that does not exist) and the immutable segments it has read or written,
// and is safe for concurrent use.
type Registry struct {
	store *storage.Store
	scope storage.Scope
	seen  atomic.Uint64
	segs  segmentCache
}

// Open returns the registry of store s. It reads nothing.
func Open(s *storage.Store, opts Options) *Registry {
	scope := opts.Scope
	if scope == storage.ScopeNone {
		scope = storage.ScopeGlobal
	}
	return &Registry{store: s, scope: scope}
}

// Store is the store the registry lives in.
func (r *Registry) Store() *storage.Store { return r.store }

func (r *Registry) observe(v Version) {
	for {
		cur := r.seen.Load()
		if uint64(v) <= cur || r.seen.CompareAndSwap(cur, uint64(v)) {
			return
		}
	}
}

// Head returns the newest registry version and its snapshot; version 0 and
// Empty() when nothing was ever committed. Its cost does not depend on how
// many versions exist:
//
//   - ordered listing (every first-party adapter): one listing request of
//     page size 2 under VersionsPrefix, whose first version name is the
//     head, then one get of it, and one get of the head record. Where the
//     store does not promise list-after-write, a stat of each following
//     version until one is missing (normally one) covers a commit the
//     listing missed.
//   - unordered listing: one get of HintKey, a stat of hint+1, hint+2, ...
//     until one is missing, one get of the last version found. The hint
//     may lag (it is written after the commit, best effort, and may even
//     move back when two writers race): the cost grows with the lag, never
//     with the depth. A missing or unreadable hint, or one naming a version
//     that does not exist, falls back to one full listing (History).
//
// A head that does not parse, or whose version field disagrees with its
// object name, is ErrCorruptRegistry: nothing is decided from it. So is a
// head that is not the one its commit recorded (CheckHead: a
// *HeadMismatch), so nothing is built on, listed from or decided by a
// rewritten, flipped or rolled-back registry.
func (r *Registry) Head(ctx context.Context) (Version, *Snapshot, error) {
	for attempt := 0; ; attempt++ {
		v, snap, rec, err := r.head(ctx)
		if err == nil {
			_, err = r.checkHead(ctx, v, snap, rec)
		}
		var hm *HeadMismatch
		if attempt == 0 && (errors.As(err, &hm) || errors.Is(err, storage.ErrNotFound) || errors.Is(err, ErrCorruptRegistry)) {
			// Read everything once more before refusing: outside the
			// claim a commit and a registry cleanup may land between the
			// listing, the head and the record (or, for a segmented head,
			// its segments). Real damage stays.
			continue
		}
		if err != nil {
			return 0, nil, err
		}
		return v, snap, nil
	}
}

// HeadUnverified is Head without holding the head to its commit's record:
// for reconcile, which reports a mismatch as lost authority, and registry
// recover, which decides for itself what to build on. Every other caller
// wants Head.
func (r *Registry) HeadUnverified(ctx context.Context) (Version, *Snapshot, error) {
	v, snap, _, err := r.head(ctx)
	return v, snap, err
}

// headRecord is the head record as read: its bytes, or found false.
type headRecord struct {
	body  []byte
	found bool
	read  bool // false: not read yet
}

func (r *Registry) head(ctx context.Context) (Version, *Snapshot, headRecord, error) {
	caps := r.store.Capabilities()
	var v Version
	var err error
	var rec headRecord
	fromHint := false
	if caps.OrderedList {
		if v, err = r.headByListing(ctx); err == nil && !caps.ListAfterWrite {
			v, err = r.probe(ctx, v)
		}
	} else {
		v, fromHint, rec, err = r.headByHint(ctx)
	}
	if err != nil {
		return 0, nil, rec, err
	}
	snap, err := r.Read(ctx, v)
	if fromHint && errors.Is(err, storage.ErrNotFound) {
		// The hint names a version that does not exist: never authority.
		if v, err = r.headByFullListing(ctx); err != nil {
			return 0, nil, rec, err
		}
		snap, err = r.Read(ctx, v)
	}
	if err != nil {
		return 0, nil, rec, err
	}
	return v, snap, rec, nil
}

func (r *Registry) headByListing(ctx context.Context) (Version, error) {
	opts := storage.ListOptions{Prefix: VersionsPrefix, PageSize: headPageSize}
	for {
		page, err := r.store.ListPage(ctx, opts)
		if err != nil {
			return 0, err
		}
		for _, o := range page.Objects {
			if v, ok := ParseVersionKey(o.Key); ok {
				return v, nil
			}
		}
		// Only stray objects so far (not versions): keep going. The cost
		// grows with the strays, never with the versions.
		if !page.More || len(page.Objects) == 0 {
			return 0, nil
		}
		opts.StartAfter = page.Objects[len(page.Objects)-1].Key
	}
}

// probe returns the last version of the run v+1, v+2, ... that exists.
func (r *Registry) probe(ctx context.Context, v Version) (Version, error) {
	for {
		_, err := r.store.Stat(ctx, VersionKey(v+1))
		if errors.Is(err, storage.ErrNotFound) {
			return v, nil
		}
		if err != nil {
			return 0, err
		}
		v++
	}
}

// hint is the head record at HintKey, written after every commit on every
// store, best effort: the version committed and the SHA-256 of its bytes.
// On stores without ordered listing it is Head's starting point (never
// authority); everywhere it is the evidence CheckHead holds the head to.
type hint struct {
	Format  int     `json:"format"`
	Version Version `json:"version"`
	SHA256  string  `json:"sha256,omitempty"`
}

const hintFormat = 1

// headByHint reads the hint and probes forward from it; fromHint is false
// when it fell back to the full listing. The record it read is returned
// for checkHead.
func (r *Registry) headByHint(ctx context.Context) (Version, bool, headRecord, error) {
	b, _, err := r.store.ReadAll(ctx, HintKey)
	rec := headRecord{body: b, found: err == nil, read: err == nil || errors.Is(err, storage.ErrNotFound)}
	var h hint
	switch {
	case err == nil && json.Unmarshal(b, &h) == nil && h.Format == hintFormat && h.Version > 0:
		v, err := r.probe(ctx, h.Version)
		return v, true, rec, err
	case err == nil || errors.Is(err, storage.ErrNotFound):
		v, err := r.headByFullListing(ctx)
		return v, false, rec, err
	}
	return 0, false, rec, err
}

func (r *Registry) headByFullListing(ctx context.Context) (Version, error) {
	vs, err := r.History(ctx, maxHistoryList)
	if err != nil || len(vs) == 0 {
		return 0, err
	}
	return r.probe(ctx, vs[len(vs)-1])
}

// History lists every stored registry version, oldest first, failing with
// storage.ErrLimitExceeded beyond max. Its cost grows with the history: it is
// for audits, tests and registry garbage collection, never for list, show
// or lookup.
func (r *Registry) History(ctx context.Context, max int) ([]Version, error) {
	objs, err := r.store.List(ctx, VersionsPrefix, max)
	if err != nil {
		return nil, err
	}
	out := make([]Version, 0, len(objs))
	for i := len(objs) - 1; i >= 0; i-- {
		if v, ok := ParseVersionKey(objs[i].Key); ok {
			out = append(out, v)
		}
	}
	return out, nil
}

// Read returns registry version v (Empty for 0): one get. A missing
// version is storage.ErrNotFound; an unreadable one ErrCorruptRegistry.
func (r *Registry) Read(ctx context.Context, v Version) (*Snapshot, error) {
	if v == 0 {
		return Empty(), nil
	}
	key := VersionKey(v)
	body, err := r.readObject(ctx, key)
	if err != nil {
		return nil, err
	}
	s, err := r.decodeAny(ctx, key, body, v)
	if err != nil {
		return nil, err
	}
	r.observe(v)
	return s, nil
}

// ReadRef returns the Ref of stored version v: one get of its version
// object, checked as far as the object alone allows (a whole snapshot
// decoded, a segmented one's version object parsed), without reading any
// segment. For callers that need a version's identity, not its content:
// a checkpoint's registry pin, once per live checkpoint. A missing version
// is storage.ErrNotFound.
func (r *Registry) ReadRef(ctx context.Context, v Version) (Ref, error) {
	ref, _, err := r.readRef(ctx, v)
	return ref, err
}

// readRef is ReadRef, also returning the info of the object read.
func (r *Registry) readRef(ctx context.Context, v Version) (Ref, storage.Info, error) {
	key := VersionKey(v)
	body, info, err := r.readObjectInfo(ctx, key)
	if err != nil {
		return Ref{}, storage.Info{}, err
	}
	if _, _, err := link(key, body, v); err != nil {
		return Ref{}, storage.Info{}, err
	}
	return refOf(v, body), info, nil
}

// decodeAny decodes a stored version of any format this build reads,
// reading a segmented one's segments.
func (r *Registry) decodeAny(ctx context.Context, key string, body []byte, want Version) (*Snapshot, error) {
	if peekFormat(body) == formatSegmented {
		return r.decodeSegmented(ctx, key, body, want)
	}
	return decode(key, body, want)
}

// link is what following the chain needs of a stored version: its format
// and prev, checked as far as the version object alone allows.
func link(key string, body []byte, want Version) (int, string, error) {
	if peekFormat(body) == formatSegmented {
		v, err := decodeSegmentedLink(key, body, want)
		if err != nil {
			return 0, "", err
		}
		return v.Format, v.Prev, nil
	}
	s, err := decode(key, body, want)
	if err != nil {
		return 0, "", err
	}
	return s.Format, s.Prev, nil
}

func (r *Registry) readObject(ctx context.Context, key string) ([]byte, error) {
	b, _, err := r.readObjectInfo(ctx, key)
	return b, err
}

func (r *Registry) readObjectInfo(ctx context.Context, key string) ([]byte, storage.Info, error) {
	rd, err := r.store.Get(ctx, key)
	if err != nil {
		return nil, storage.Info{}, err
	}
	defer rd.Close()
	if rd.Info.Size > maxSnapshotBytes {
		return nil, storage.Info{}, storage.Errorf("read", key, storage.ErrLimitExceeded, "a registry version of %d bytes exceeds the %d-byte limit", rd.Info.Size, maxSnapshotBytes)
	}
	var buf bytes.Buffer
	buf.Grow(int(rd.Info.Size))
	if _, err := io.Copy(&buf, rd); err != nil {
		return nil, storage.Info{}, err
	}
	info := rd.Info
	if info.Key == "" {
		info.Key = key
	}
	return buf.Bytes(), info, nil
}

// Commit writes next as registry version expected+1 with create-if-absent:
// the registry's compare-and-swap. next must be a draft from the Next of
// the snapshot of version expected. If another writer wrote that version
// first the error is ErrConflict (kind storage.ErrPreconditionFailed): read
// the head again, re-apply the change to a new draft, commit again.
//
// The bytes written are exactly next.Encode()'s and the returned Ref is the
// one Encode gave. A commit whose outcome is unknown (a transient or
// unavailable error) may or may not have landed: VerifyRef(ref) tells. On
// success next stops being a draft. Commit refuses stores whose
// create-if-absent does not reach Options.Scope (storage.ErrUnsupported), a
// draft of another version, and an expected head that does not exist (so
// the history never has a gap). Stores without ordered listing also get
// the hint rewritten, best effort.
func (r *Registry) Commit(ctx context.Context, expected Version, next *Snapshot) (Ref, error) {
	const op = "commit"
	if err := r.store.Require(storage.FeatureCreateIfAbsent, r.scope); err != nil {
		return Ref{}, fmt.Errorf("registry commits need create-if-absent reaching every writer of this store: %w", err)
	}
	switch {
	case next == nil || !next.draft:
		return Ref{}, errorf(op, "", ErrInvalidSnapshot, "%v (or it was committed already)", errNotDraft)
	case next.Version != expected+1:
		return Ref{}, errorf(op, "", ErrInvalidSnapshot, "the draft is version %d, a commit on head %d writes version %d: take the draft from the head's Next", next.Version, expected, expected+1)
	}
	body, segs, stored, ref, err := next.encode()
	if err != nil {
		return Ref{}, err
	}
	if expected > 0 && uint64(expected) > r.seen.Load() {
		// Never seen by this registry handle: make sure it exists, or
		// the new version would leave a gap.
		if _, err := r.store.Stat(ctx, VersionKey(expected)); errors.Is(err, storage.ErrNotFound) {
			return Ref{}, errorf(op, VersionKey(expected), ErrInvalidSnapshot, "the expected head %d does not exist: read the head first", expected)
		} else if err != nil {
			return Ref{}, err
		}
		r.observe(expected)
	}
	// Segments first: a version object never names one that is not there.
	if err := r.writeSegments(ctx, segs, next.base); err != nil {
		return Ref{}, err
	}
	key := VersionKey(next.Version)
	if _, err := r.store.PutBytes(ctx, key, body, storage.PutOptions{Mode: storage.PutCreateIfAbsent}); err != nil {
		if errors.Is(err, storage.ErrAlreadyExists) {
			// No Cause: storage.KindOf must give the conflict's kind
			// (precondition failed), not the put's (already exists).
			return Ref{}, errorf(op, key, ErrConflict, "registry version %d exists (create-if-absent refused): read the head again, re-apply the change and commit", next.Version)
		}
		return Ref{}, fmt.Errorf("commit of registry version %d (outcome unknown on a transient error: VerifyRef tells whether it landed): %w", next.Version, err)
	}
	r.observe(next.Version)
	next.draft = false
	next.ref = ref
	if segs != nil {
		next.Format = formatSegmented
		next.stored = stored
	}
	// Best effort (the commit stands): Head probes past a stale record,
	// CheckHead follows the chain from one, reconcile settles it.
	_ = r.RecordCommit(ctx, ref)
	return ref, nil
}

// VerifyRef checks that registry version ref.Version holds exactly the
// bytes ref names: nil, storage.ErrNotFound if the version does not exist, or
// ErrRefMismatch.
func (r *Registry) VerifyRef(ctx context.Context, ref Ref) error {
	key := VersionKey(ref.Version)
	body, err := r.readObject(ctx, key)
	if err != nil {
		return err
	}
	if got := refOf(ref.Version, body); got != ref {
		return errorf("verify-ref", key, ErrRefMismatch, "it holds %d bytes with SHA-256 %s, the ref names %d bytes with SHA-256 %s", got.Size, got.SHA256, ref.Size, ref.SHA256)
	}
	return nil
}

// List returns the live checkpoints at the head, sorted by name, and the
// head's version: Head plus a walk of the snapshot.
func (r *Registry) List(ctx context.Context) (Version, []Checkpoint, error) {
	v, s, err := r.Head(ctx)
	if err != nil {
		return 0, nil, err
	}
	return v, s.Live(), nil
}

// Lookup resolves a name or id at the head (Snapshot.Lookup).
func (r *Registry) Lookup(ctx context.Context, ref string) (Version, Checkpoint, error) {
	v, s, err := r.Head(ctx)
	if err != nil {
		return 0, Checkpoint{}, err
	}
	c, err := s.Lookup(ref)
	return v, c, err
}

// HeadMismatch is CheckHead's finding: the head is not what the last
// commit recorded.
type HeadMismatch struct {
	Head     Version // the head Head found
	Recorded Version // the version the head record names
	// Untrusted: the head itself is in doubt (its bytes are not the ones
	// recorded or chained); otherwise versions above it were deleted.
	Untrusted bool
	Reason    string
}

func (m *HeadMismatch) Error() string {
	return fmt.Sprintf("registry head %d: %s; run `retain registry verify STORE`, then `retain registry recover STORE`", m.Head, m.Reason)
}

// Unwrap makes a mismatch match ErrCorruptRegistry.
func (m *HeadMismatch) Unwrap() error { return ErrCorruptRegistry }

// HeadCheck is what CheckHead found when the head holds.
type HeadCheck int

const (
	// HeadRecordCurrent: the record names the head and its bytes.
	HeadRecordCurrent HeadCheck = iota
	// HeadRecordBehind: the record names an older version (a commit whose
	// record write was lost) and the chain leads from it to the head, or
	// a newer one that exists (a commit landed while the head was read).
	HeadRecordBehind
	// HeadNoEvidence: a registry from a build without the chain (format 1
	// head, or a record without a digest), or a store with one version
	// and no record.
	HeadNoEvidence
)

// CheckHead holds the head (version v, as HeadUnverified returned it) to
// the head record the last commit left at HintKey. It holds when the
// record names the head and its bytes; when the record is behind and the
// chain of prev digests leads from it to the head (one get per version of
// lag); or when there is no evidence either way (a format 1 head, a
// record from a build without digests). Otherwise a *HeadMismatch: the
// head was rewritten or flipped, versions above it were deleted, or a
// format 2 head above version 1 has no readable record to prove it. One
// get when the record is current.
func (r *Registry) CheckHead(ctx context.Context, v Version, snap *Snapshot) (HeadCheck, error) {
	return r.checkHead(ctx, v, snap, headRecord{})
}

func (r *Registry) checkHead(ctx context.Context, v Version, snap *Snapshot, rec headRecord) (HeadCheck, error) {
	if !rec.read {
		b, _, err := r.store.ReadAll(ctx, HintKey)
		if err != nil && !errors.Is(err, storage.ErrNotFound) {
			return 0, err
		}
		rec = headRecord{body: b, found: err == nil, read: true}
	}
	if v == 0 || snap.Format == formatUnchained {
		return HeadNoEvidence, nil
	}
	var h hint
	if !rec.found || json.Unmarshal(rec.body, &h) != nil || h.Format != hintFormat {
		if v == 1 || r.firstChained(ctx, v) {
			// The first commit with a record (of the store, or since an
			// upgrade from format 1) may have lost its record write.
			return HeadNoEvidence, nil
		}
		return 0, &HeadMismatch{Head: v, Untrusted: true, Reason: fmt.Sprintf("no readable head record (%s) proves it, though every commit writes one", HintKey)}
	}
	if h.SHA256 == "" {
		return HeadNoEvidence, nil // written by a build without digests
	}
	switch {
	case h.Version > v:
		if _, err := r.store.Stat(ctx, VersionKey(h.Version)); err == nil {
			// A commit landed between reading the head and reading the
			// record: the head read is stale, as any read may be, not
			// damaged (commits are compare-and-swap).
			return HeadRecordBehind, nil
		} else if !errors.Is(err, storage.ErrNotFound) {
			return 0, err
		}
		return 0, &HeadMismatch{Head: v, Recorded: h.Version, Reason: fmt.Sprintf("the last commit recorded version %d, which is gone: registry versions above %d were deleted", h.Version, v)}
	case h.Version == v:
		if snap.Ref().SHA256 != h.SHA256 {
			return 0, &HeadMismatch{Head: v, Recorded: h.Version, Untrusted: true, Reason: "its bytes are not the ones its commit recorded: the head was rewritten or damaged"}
		}
		return HeadRecordCurrent, nil
	}
	// Behind: follow the chain down from the head to the recorded version.
	want, format := snap.Prev, snap.Format
	for k := v - 1; ; k-- {
		if format == formatUnchained {
			return HeadNoEvidence, nil // below, a build without the chain wrote it
		}
		if want == "" {
			return 0, &HeadMismatch{Head: v, Recorded: h.Version, Untrusted: true, Reason: fmt.Sprintf("version %d names no predecessor: the chain to the recorded version %d is broken", k+1, h.Version)}
		}
		body, err := r.readObject(ctx, VersionKey(k))
		if errors.Is(err, storage.ErrNotFound) {
			return 0, &HeadMismatch{Head: v, Recorded: h.Version, Untrusted: true, Reason: fmt.Sprintf("version %d, between the recorded version %d and the head, is missing: the chain to the head cannot be followed", k, h.Version)}
		}
		if err != nil {
			return 0, err
		}
		if DigestOf(body) != want {
			return 0, &HeadMismatch{Head: v, Recorded: h.Version, Untrusted: true, Reason: fmt.Sprintf("version %d is not the predecessor version %d names: the history was rewritten", k, k+1)}
		}
		if k == h.Version {
			if DigestOf(body) != "sha256:"+h.SHA256 {
				return 0, &HeadMismatch{Head: v, Recorded: h.Version, Untrusted: true, Reason: fmt.Sprintf("version %d is not the one its commit recorded", k)}
			}
			return HeadRecordBehind, nil
		}
		f, prev, err := link(VersionKey(k), body, k)
		if err != nil {
			return 0, &HeadMismatch{Head: v, Recorded: h.Version, Untrusted: true, Reason: err.Error()}
		}
		format, want = f, prev
	}
}

// firstChained reports whether version v's predecessor is format 1: v is
// the first version written by a build that keeps the head record.
func (r *Registry) firstChained(ctx context.Context, v Version) bool {
	body, err := r.readObject(ctx, VersionKey(v-1))
	if err != nil {
		return false
	}
	f, _, err := link(VersionKey(v-1), body, v-1)
	return err == nil && f == formatUnchained
}

// RecordCommit writes the head record for the committed version ref names,
// retrying once and outliving the caller's cancellation: every Commit does
// it, and so does a caller that learned through VerifyRef that a commit
// whose answer was lost landed. A head without its record is one Head
// must refuse, so the record is worth a second try.
func (r *Registry) RecordCommit(ctx context.Context, ref Ref) error {
	b, err := json.Marshal(hint{Format: hintFormat, Version: ref.Version, SHA256: ref.SHA256})
	if err != nil {
		return err
	}
	ctx = context.WithoutCancel(ctx)
	if _, err = r.store.PutBytes(ctx, HintKey, b, storage.PutOptions{Mode: storage.PutOverwrite}); err != nil {
		_, err = r.store.PutBytes(ctx, HintKey, b, storage.PutOptions{Mode: storage.PutOverwrite})
	}
	return err
}

// WriteHeadRecord writes the head record for snap (version v): what every
// commit does best effort, done by reconcile to settle a record that lags
// and by registry recover, which must not leave it unsettled.
func (r *Registry) WriteHeadRecord(ctx context.Context, v Version, snap *Snapshot) error {
	ref := snap.Ref()
	ref.Version = v
	return r.RecordCommit(ctx, ref)
}

// RecordedVersion is the version the head record names, 0 if there is no
// readable record. Registry cleanup never removes it or anything above it:
// CheckHead follows the chain from it to the head.
func (r *Registry) RecordedVersion(ctx context.Context) (Version, error) {
	v, _, err := r.HeadRecord(ctx)
	return v, err
}

// HeadRecord is what the head record says: the version and the SHA-256 of
// its bytes ("" from a build without digests); version 0 without a
// readable record.
func (r *Registry) HeadRecord(ctx context.Context) (Version, string, error) {
	b, _, err := r.store.ReadAll(ctx, HintKey)
	if errors.Is(err, storage.ErrNotFound) {
		return 0, "", nil
	}
	if err != nil {
		return 0, "", err
	}
	var h hint
	if json.Unmarshal(b, &h) != nil || h.Format != hintFormat {
		return 0, "", nil
	}
	return h.Version, h.SHA256, nil
}

// ChainBreak is a stored version that does not name its predecessor's
// exact bytes: one of the two was rewritten after the commit.
type ChainBreak struct {
	Version Version `json:"version"`
	Detail  string  `json:"detail"`
}

// VerifyChain reads every stored version, oldest first: how many it read,
// the ones that do not read, and every break of the chain between two
// consecutive versions that both exist (a gap, as registry cleanup leaves,
// is not a break). Its cost grows with the history: for audits
// (`retain registry verify`), never for list, show or cleanup.
func (r *Registry) VerifyChain(ctx context.Context) (int, []Version, []ChainBreak, error) {
	vs, err := r.History(ctx, maxHistoryList)
	if err != nil {
		return 0, nil, nil, err
	}
	var unreadable []Version
	var breaks []ChainBreak
	var prev []byte
	var prevV Version
	n := 0
	for _, v := range vs {
		body, err := r.readObject(ctx, VersionKey(v))
		if errors.Is(err, storage.ErrNotFound) {
			continue // removed since the listing
		}
		if err != nil {
			return n, unreadable, breaks, err
		}
		n++
		s, derr := r.decodeAny(ctx, VersionKey(v), body, v)
		switch {
		case derr != nil:
			unreadable = append(unreadable, v)
		case s.Format == formatUnchained || prev == nil || prevV != v-1:
		case s.Prev == "":
			breaks = append(breaks, ChainBreak{Version: v, Detail: fmt.Sprintf("version %d names no predecessor", v)})
		case s.Prev != DigestOf(prev):
			breaks = append(breaks, ChainBreak{Version: v, Detail: fmt.Sprintf("version %d names a predecessor other than the stored version %d: one of them was rewritten", v, v-1)})
		}
		prev, prevV = body, v
	}
	return n, unreadable, breaks, nil
}
