package registry

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"sync"

	"github.com/retain-dev/retain/core/internal/fanout"
	"github.com/retain-dev/retain/core/storage"
)

// Segmented versions (format 3): what keeps a commit's bytes flat in the
// number of live checkpoints.
//
// A snapshot whose whole encoding is at most spillBytes is written as one
// object, format 2, exactly as before: small registries (and every build
// that reads format 2) are unaffected. A larger one is written as a tree
// of immutable, content-addressed objects under SegmentsPrefix:
//
//   - one rows object per checkpoint: its pins (format 3, kind "rows");
//   - one index bucket per hash bucket of checkpoint names (bucketOf): the
//     reservations, headers and tombstones of the names in it, each header
//     naming its rows object by SHA-256, size and count;
//   - the version object itself (under VersionsPrefix as always): format,
//     version, prev, the table catalog, the gc_boundary rows and the
//     buckets by SHA-256 and size.
//
// A commit writes the version object plus only the segments its
// predecessor did not reference: creating a checkpoint writes its rows
// object and one bucket (the headers of about 1/numBuckets of the names),
// deleting one writes one bucket. Every segment is bound by digest to the
// version object, which the chain (prev) and the head record bind in
// turn, so a rewritten segment is as detectable as a rewritten version. A
// segment that is missing or does not match is ErrCorruptRegistry, never
// storage.ErrNotFound: the version exists, it cannot be read whole.
//
// Segments are never rewritten. The registry's cleanup deletes those only
// the versions it removes referenced (SegmentGarbage), after the versions.

const (
	// SegmentsPrefix holds the segments of format 3 versions, named by
	// the SHA-256 of their bytes.
	SegmentsPrefix = RegistryPath + "/segments/"
	// formatSegmented is the format of a version written as segments.
	formatSegmented = 3
	// numBuckets is how many index buckets names hash into: a create
	// rewrites one, and the version object names at most this many.
	numBuckets = 64
)

// spillBytes is the size above which a snapshot is written as segments. A
// variable so the package's tests can spill small snapshots; other
// packages' tests (and anyone diagnosing the format) set
// RETAIN_REGISTRY_SPILL_BYTES instead.
var spillBytes = 32 << 10

// SpillEnv overrides spillBytes for the process: a number of bytes (0
// writes every snapshot as segments).
const SpillEnv = "RETAIN_REGISTRY_SPILL_BYTES"

func spillThreshold() int {
	if v, ok := os.LookupEnv(SpillEnv); ok {
		if n, err := strconv.Atoi(v); err == nil && n >= 0 {
			return n
		}
	}
	return spillBytes
}

// SegmentKey is the key of the segment whose bytes have SHA-256 hex sum.
func SegmentKey(sum string) string { return SegmentsPrefix + sum + ".json" }

// bucketOf is the index bucket of a checkpoint name.
func bucketOf(name string) int {
	sum := sha256.Sum256([]byte(name))
	return int(binary.BigEndian.Uint16(sum[:2]) % numBuckets)
}

// segRef names a segment by content.
type segRef struct {
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
}

// bucketRef is one bucket of a version object.
type bucketRef struct {
	Bucket int `json:"bucket"`
	segRef
}

// rowsRef is a header's pointer to its rows object.
type rowsRef struct {
	segRef
	Count int `json:"count"`
}

// segmentedVersion is a format 3 version object.
type segmentedVersion struct {
	Format     int               `json:"format"`
	Version    Version           `json:"version"`
	Prev       string            `json:"prev,omitempty"`
	Tables     []Table           `json:"tables"`
	GCBoundary []json.RawMessage `json:"gc_boundary"`
	Buckets    []bucketRef       `json:"buckets"`
}

// indexHeader is a header as a bucket stores it.
type indexHeader struct {
	Header
	Rows *rowsRef `json:"rows,omitempty"`
}

// indexBucket is one bucket segment. Since is the version that wrote
// this content: a bucket unchanged by a commit keeps its since, and one
// changed gets the commit's, so the same content written again later is a
// new object and every segment is referenced by one unbroken run of
// versions [since, the next rewrite) — what lets the registry's cleanup
// tell garbage from the versions it removes alone (SegmentGarbage).
type indexBucket struct {
	Format      int           `json:"format"`
	Kind        string        `json:"kind"` // "index"
	Bucket      int           `json:"bucket"`
	Since       Version       `json:"since"`
	Names       []Reservation `json:"names"`
	Checkpoints []indexHeader `json:"checkpoints"`
	Tombstones  []Tombstone   `json:"tombstones"`
}

// rowsObject is one checkpoint's rows segment. A row's state is its
// header's, so it is not stored: tombstoning rewrites no rows object.
// Since is as for buckets.
type rowsObject struct {
	Format       int     `json:"format"`
	Kind         string  `json:"kind"` // "rows"
	CheckpointID ID      `json:"checkpoint_id"`
	Since        Version `json:"since"`
	Pins         []Pin   `json:"pins"`
}

const (
	kindIndex = "index"
	kindRows  = "rows"
)

// segState is how one version is stored in segments: each bucket's and
// each rows object's since, the digest of its content without since, and
// its key.
type segState struct {
	buckets map[int]segPrev
	rows    map[ID]segPrev
}

type segPrev struct {
	since Version
	sum0  string // SHA-256 of the content encoded with since 0
	key   string
}

// has reports whether the stored version references the segment key.
func (st *segState) has(key string) bool {
	if st == nil {
		return false
	}
	for _, p := range st.buckets {
		if p.key == key {
			return true
		}
	}
	for _, p := range st.rows {
		if p.key == key {
			return true
		}
	}
	return false
}

func sumOf(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func marshalLine(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// sealed encodes a segment whose since is set by setSince: with since 0
// to compare content with the predecessor's, then with the since it
// keeps (the predecessor's when the content is the same, v otherwise).
func sealed(v Version, prev segPrev, had bool, setSince func(Version), obj any) ([]byte, segPrev, error) {
	setSince(0)
	b0, err := marshalLine(obj)
	if err != nil {
		return nil, segPrev{}, err
	}
	sum0 := sumOf(b0)
	since := v
	if had && prev.sum0 == sum0 {
		since = prev.since
	}
	setSince(since)
	b, err := marshalLine(obj)
	if err != nil {
		return nil, segPrev{}, err
	}
	return b, segPrev{since: since, sum0: sum0, key: SegmentKey(sumOf(b))}, nil
}

// encodeSegmented builds the format 3 version object of s (already
// validated and sorted), every segment it references by key, and how it
// is stored.
func (s *Snapshot) encodeSegmented() ([]byte, map[string][]byte, *segState, error) {
	base := s.base
	if base == nil {
		base = &segState{}
	}
	st := &segState{buckets: map[int]segPrev{}, rows: map[ID]segPrev{}}
	segs := map[string][]byte{}
	rows := map[ID][]Pin{}
	for _, r := range s.Rows {
		rows[r.CheckpointID] = append(rows[r.CheckpointID], r.Pin)
	}
	buckets := make([]indexBucket, numBuckets)
	for i := range buckets {
		buckets[i] = indexBucket{Format: formatSegmented, Kind: kindIndex, Bucket: i,
			Names: []Reservation{}, Checkpoints: []indexHeader{}, Tombstones: []Tombstone{}}
	}
	for _, n := range s.Names {
		b := &buckets[bucketOf(n.Name)]
		b.Names = append(b.Names, n)
	}
	for _, h := range s.Checkpoints {
		ih := indexHeader{Header: h}
		if pins := rows[h.ID]; len(pins) > 0 {
			o := rowsObject{Format: formatSegmented, Kind: kindRows, CheckpointID: h.ID, Pins: pins}
			prev, had := base.rows[h.ID]
			body, sp, err := sealed(s.Version, prev, had, func(v Version) { o.Since = v }, &o)
			if err != nil {
				return nil, nil, nil, err
			}
			segs[sp.key] = body
			st.rows[h.ID] = sp
			ih.Rows = &rowsRef{segRef: segRef{SHA256: sumOf(body), Size: int64(len(body))}, Count: len(pins)}
		}
		b := &buckets[bucketOf(h.Name)]
		b.Checkpoints = append(b.Checkpoints, ih)
	}
	for _, t := range s.Tombstones {
		b := &buckets[bucketOf(t.Name)]
		b.Tombstones = append(b.Tombstones, t)
	}
	v := segmentedVersion{Format: formatSegmented, Version: s.Version, Prev: s.Prev,
		Tables: s.Tables, GCBoundary: s.GCBoundary, Buckets: []bucketRef{}}
	for i := range buckets {
		b := &buckets[i]
		if len(b.Names) == 0 && len(b.Checkpoints) == 0 && len(b.Tombstones) == 0 {
			continue
		}
		prev, had := base.buckets[i]
		body, sp, err := sealed(s.Version, prev, had, func(v Version) { b.Since = v }, b)
		if err != nil {
			return nil, nil, nil, err
		}
		segs[sp.key] = body
		st.buckets[i] = sp
		v.Buckets = append(v.Buckets, bucketRef{Bucket: i, segRef: segRef{SHA256: sumOf(body), Size: int64(len(body))}})
	}
	body, err := marshalLine(&v)
	if err != nil {
		return nil, nil, nil, err
	}
	return body, segs, st, nil
}

// peekFormat reads only the format of a stored version.
func peekFormat(body []byte) int {
	var f struct {
		Format int `json:"format"`
	}
	if json.Unmarshal(body, &f) != nil {
		return 0
	}
	return f.Format
}

// strictDecode parses exactly one JSON value, refusing unknown fields and
// trailing data.
func strictDecode(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("data after the value")
	}
	return nil
}

// decodeSegmentedLink parses a format 3 version object alone: enough to
// follow the chain (format, version, prev) without reading its segments.
func decodeSegmentedLink(key string, body []byte, want Version) (*segmentedVersion, error) {
	var v segmentedVersion
	if err := strictDecode(body, &v); err != nil {
		return nil, corrupt("read", key, err, "registry version %d is not a segmented snapshot this build can read", want)
	}
	switch {
	case v.Format != formatSegmented:
		return nil, corrupt("read", key, nil, "registry version %d has format %d, not %d", want, v.Format, formatSegmented)
	case v.Version != want:
		return nil, corrupt("read", key, nil, "the object of registry version %d says it is version %d", want, v.Version)
	case v.Prev != "" && !validDigest(v.Prev):
		return nil, corrupt("read", key, nil, "registry version %d: prev %q is not sha256:<64 lower-case hex>", want, v.Prev)
	}
	for i, b := range v.Buckets {
		if b.Bucket < 0 || b.Bucket >= numBuckets || (i > 0 && v.Buckets[i-1].Bucket >= b.Bucket) || !validSum(b.SHA256) || b.Size <= 0 {
			return nil, corrupt("read", key, nil, "registry version %d: bucket entry %d is malformed", want, i)
		}
	}
	return &v, nil
}

func validSum(h string) bool { return validDigest("sha256:" + h) }

// badSegment is the refusal of a segment that does not say what its
// version needs: the version cannot be read whole.
func badSegment(key string, cause error, version Version, format string, args ...any) error {
	return corrupt("read", key, cause, "registry version %d: segment %s: %s; run `retain registry verify STORE`, then `retain registry recover STORE`",
		version, key, fmt.Sprintf(format, args...))
}

// decodeSegmented reads the segments of format 3 version want (its object
// already read as body) side by side and assembles the whole snapshot.
func (r *Registry) decodeSegmented(ctx context.Context, key string, body []byte, want Version) (*Snapshot, error) {
	v, err := decodeSegmentedLink(key, body, want)
	if err != nil {
		return nil, err
	}
	// Under a Cache, the segments this Registry has not read are taken
	// from it when still listed: one listing, once a version needs it.
	shared := sharedSegments{c: cacheFrom(ctx), store: r.store.Location().String()}
	if shared.c != nil {
		shared.listed = sync.OnceValue(func() map[string]storage.Info { return r.listedSegments(ctx, shared) })
	}
	buckets, err := fanout.Map(ctx, r.store.Parallelism(), len(v.Buckets), func(ctx context.Context, i int) (indexBucket, error) {
		ref := v.Buckets[i]
		var b indexBucket
		if err := r.readSegment(ctx, want, ref.segRef, &b, shared); err != nil {
			return b, err
		}
		if b.Format != formatSegmented || b.Kind != kindIndex || b.Bucket != ref.Bucket {
			return b, badSegment(SegmentKey(ref.SHA256), nil, want, "the segment named as bucket %d is not that bucket", ref.Bucket)
		}
		return b, nil
	})
	if err != nil {
		return nil, err
	}
	st := &segState{buckets: map[int]segPrev{}, rows: map[ID]segPrev{}}
	s := &Snapshot{Format: formatSegmented, Version: v.Version, Prev: v.Prev, Tables: v.Tables, GCBoundary: v.GCBoundary, stored: st}
	type pending struct {
		id  ID
		ref rowsRef
	}
	var refs []pending
	for i := range buckets {
		b := &buckets[i]
		bkey := SegmentKey(v.Buckets[i].SHA256)
		sp, err := stateOf(want, bkey, b.Since, func(v Version) { b.Since = v }, b)
		if err != nil {
			return nil, err
		}
		st.buckets[b.Bucket] = sp
		for _, n := range b.Names {
			if bucketOf(n.Name) != b.Bucket {
				return nil, badSegment(bkey, nil, want, "the name %q is filed in bucket %d, not its own", n.Name, b.Bucket)
			}
			s.Names = append(s.Names, n)
		}
		for _, h := range b.Checkpoints {
			if bucketOf(h.Name) != b.Bucket {
				return nil, badSegment(bkey, nil, want, "checkpoint %s is filed in bucket %d, not its name's", h.ID, b.Bucket)
			}
			s.Checkpoints = append(s.Checkpoints, h.Header)
			if h.Rows != nil {
				if !validSum(h.Rows.SHA256) || h.Rows.Size <= 0 || h.Rows.Count <= 0 {
					return nil, badSegment(bkey, nil, want, "checkpoint %s names a malformed rows object", h.ID)
				}
				refs = append(refs, pending{h.ID, *h.Rows})
			}
		}
		for _, t := range b.Tombstones {
			if bucketOf(t.Name) != b.Bucket {
				return nil, badSegment(bkey, nil, want, "the tombstone of %s is filed in bucket %d, not its name's", t.CheckpointID, b.Bucket)
			}
			s.Tombstones = append(s.Tombstones, t)
		}
	}
	type readRows struct {
		pins []Pin
		sp   segPrev
	}
	rows, err := fanout.Map(ctx, r.store.Parallelism(), len(refs), func(ctx context.Context, i int) (readRows, error) {
		p := refs[i]
		rkey := SegmentKey(p.ref.SHA256)
		var o rowsObject
		if err := r.readSegment(ctx, want, p.ref.segRef, &o, shared); err != nil {
			return readRows{}, err
		}
		if o.Format != formatSegmented || o.Kind != kindRows || o.CheckpointID != p.id || len(o.Pins) != p.ref.Count {
			return readRows{}, badSegment(rkey, nil, want, "the rows object named by checkpoint %s is not its %d rows", p.id, p.ref.Count)
		}
		sp, err := stateOf(want, rkey, o.Since, func(v Version) { o.Since = v }, &o)
		return readRows{o.Pins, sp}, err
	})
	if err != nil {
		return nil, err
	}
	state := map[ID]State{}
	for _, h := range s.Checkpoints {
		state[h.ID] = h.State
	}
	for i, p := range refs {
		st.rows[p.id] = rows[i].sp
		for _, pin := range rows[i].pins {
			s.Rows = append(s.Rows, Row{CheckpointID: p.id, Pin: pin, State: state[p.id]})
		}
	}
	s.normalize()
	s.sortAll()
	if err := s.Validate(); err != nil {
		return nil, corrupt("read", key, nil, "registry version %d breaks an invariant: %v", want, err)
	}
	s.ref = refOf(want, body)
	return s, nil
}

// stateOf is a read segment's place in the stored state: its since (at
// least 1 and at most the version reading it) and the digest of its
// content with since 0.
func stateOf(version Version, key string, since Version, setSince func(Version), obj any) (segPrev, error) {
	if since == 0 || since > version {
		return segPrev{}, badSegment(key, nil, version, "it says it was written at version %d", since)
	}
	setSince(0)
	b0, err := marshalLine(obj)
	setSince(since)
	if err != nil {
		return segPrev{}, err
	}
	return segPrev{since: since, sum0: sumOf(b0), key: key}, nil
}

// segmentCache keeps segment bodies a Registry has read or written, by
// key, up to a byte budget. Segments are named by the digest of their
// bytes and never rewritten, so a cached body is the stored one: the
// second Head of a command (create reads it, then reads it again under the
// claim) costs the version object and what changed, not every segment.
type segmentCache struct {
	mu     sync.Mutex
	bodies map[string][]byte
	bytes  int
}

// segmentCacheBytes bounds one Registry's cache.
const segmentCacheBytes = 64 << 20

func (c *segmentCache) get(key string) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	b, ok := c.bodies[key]
	return b, ok
}

func (c *segmentCache) put(key string, body []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.bodies[key]; ok || c.bytes+len(body) > segmentCacheBytes {
		return
	}
	if c.bodies == nil {
		c.bodies = map[string][]byte{}
	}
	c.bodies[key] = body
	c.bytes += len(body)
}

// sharedSegments is a long-lived Cache's segments, each taken only while
// the store still lists it at the version token, size and modification
// time it was read at (listed: one listing a version, nil when that
// listing failed: then every segment is read).
type sharedSegments struct {
	c      *Cache
	store  string
	listed func() map[string]storage.Info
}

func (sh sharedSegments) get(key string, size int64) ([]byte, bool) {
	if sh.c == nil {
		return nil, false
	}
	e, ok := sh.c.segment(sh.store, key)
	if !ok || int64(len(e.body)) != size {
		return nil, false
	}
	l, ok := sh.listed()[key]
	if !ok || !sameObject(l, e.info) {
		return nil, false
	}
	return e.body, true
}

// readSegment reads one segment (from the cache when this Registry has
// it, or a long-lived Cache still listing it), checks its size and
// digest, and parses it strictly into v.
func (r *Registry) readSegment(ctx context.Context, version Version, ref segRef, v any, shared sharedSegments) error {
	key := SegmentKey(ref.SHA256)
	body, ok := r.segs.get(key)
	if !ok || int64(len(body)) != ref.Size {
		if body, ok = shared.get(key, ref.Size); ok {
			r.segs.put(key, body)
		}
	}
	if ok && int64(len(body)) == ref.Size {
		if err := strictDecode(body, v); err != nil {
			return badSegment(key, err, version, "does not parse")
		}
		return nil
	}
	body, info, err := r.readObjectInfo(ctx, key)
	if errors.Is(err, storage.ErrNotFound) {
		return badSegment(key, nil, version, "referenced, and missing")
	}
	if err != nil {
		return err
	}
	if int64(len(body)) != ref.Size || sumOf(body) != ref.SHA256 {
		return badSegment(key, nil, version, "referenced by its digest, and its bytes are not those")
	}
	if err := strictDecode(body, v); err != nil {
		return badSegment(key, err, version, "does not parse")
	}
	r.segs.put(key, body)
	shared.c.rememberSegment(shared.store, body, info)
	return nil
}

// writeSegments writes the segments a commit references that its
// predecessor did not, side by side, each create-if-absent: one that
// exists already holds these bytes (its name is their digest, and every
// read checks it).
func (r *Registry) writeSegments(ctx context.Context, segs map[string][]byte, base *segState) error {
	keys := make([]string, 0, len(segs))
	for k := range segs {
		if !base.has(k) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	return fanout.Each(ctx, r.store.Parallelism(), len(keys), func(ctx context.Context, i int) error {
		_, err := r.store.PutBytes(ctx, keys[i], segs[keys[i]], storage.PutOptions{Mode: storage.PutCreateIfAbsent})
		if errors.Is(err, storage.ErrAlreadyExists) {
			return nil // not cached: what is stored is read and checked
		}
		if err == nil {
			r.segs.put(keys[i], segs[keys[i]])
		}
		if err != nil {
			return fmt.Errorf("writing registry segment %s (nothing committed yet; retry the command): %w", keys[i], err)
		}
		return nil
	})
}
