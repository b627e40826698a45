package registry

import (
	"context"
	"errors"
	"sort"

	"github.com/retain-dev/retain/core/internal/fanout"
	"github.com/retain-dev/retain/core/storage"
)

// SegmentGarbage finds the segments that only the versions gone reference,
// reading those versions (before they are deleted), the stored versions
// next to them and their buckets: a cost that follows what is removed, not
// the history or the live checkpoints. stored is every version the store
// holds, gone the ones the registry's cleanup deletes (a subset).
//
// Every segment is referenced by one unbroken run of versions (its since
// makes content written again a new object), so a segment is garbage when
// its run lies wholly inside gone: the versions in it all reference it and
// are all gone, and the stored versions on either side of the run were
// read and do not reference it. Anything else — a neighbour that is not
// format 3, cannot be read, or references it — keeps it. The answer maps
// each key to the gone versions whose deletion makes it garbage: delete it
// only once they are all deleted.
func (r *Registry) SegmentGarbage(ctx context.Context, stored, gone []Version) (map[string][]Version, error) {
	stored = append([]Version(nil), stored...)
	sort.Slice(stored, func(i, j int) bool { return stored[i] < stored[j] })
	isGone := map[Version]bool{}
	for _, v := range gone {
		isGone[v] = true
	}
	g := &gcReader{r: r, versions: map[Version]*gcVersion{}, buckets: map[string]*indexBucket{}}
	// Read every gone version and its neighbours side by side.
	var toRead []Version
	for i, v := range stored {
		if isGone[v] || (i > 0 && isGone[stored[i-1]]) || (i+1 < len(stored) && isGone[stored[i+1]]) {
			toRead = append(toRead, v)
		}
	}
	if err := g.readVersions(ctx, toRead); err != nil {
		return nil, err
	}
	if err := g.readBuckets(ctx); err != nil {
		return nil, err
	}
	out := map[string][]Version{}
	pos := map[Version]int{}
	for i, v := range stored {
		pos[v] = i
	}
	// run returns the gone versions of the unbroken run of stored versions
	// around stored[i] for which refs holds, or ok false when the run is not
	// wholly gone or its ends are not proven.
	run := func(i int, refs func(*gcVersion) (bool, error)) ([]Version, bool, error) {
		lo, hi := i, i
		for lo > 0 {
			pv := g.versions[stored[lo-1]]
			if pv == nil {
				return nil, false, nil
			}
			ok, err := refs(pv)
			if err != nil || !ok {
				if err != nil {
					return nil, false, err
				}
				break
			}
			if !isGone[stored[lo-1]] {
				return nil, false, nil
			}
			lo--
		}
		// lo == 0: the oldest stored version is in the run, and no older
		// version exists to reference the segment.
		for hi+1 < len(stored) {
			nv := g.versions[stored[hi+1]]
			if nv == nil {
				return nil, false, nil
			}
			ok, err := refs(nv)
			if err != nil {
				return nil, false, err
			}
			if !ok {
				break
			}
			if !isGone[stored[hi+1]] {
				return nil, false, nil
			}
			hi++
		}
		if hi+1 >= len(stored) {
			return nil, false, nil // the head is never gone: no proven end
		}
		return stored[lo : hi+1], true, nil
	}
	for _, v := range gone {
		gv := g.versions[v]
		if gv == nil || gv.link == nil {
			continue // not format 3: it references no segment
		}
		i, ok := pos[v]
		if !ok {
			continue
		}
		for _, b := range gv.link.Buckets {
			key := SegmentKey(b.SHA256)
			if _, done := out[key]; done {
				continue
			}
			vs, ok, err := run(i, func(o *gcVersion) (bool, error) { return o.bucketKey(b.Bucket) == key, nil })
			if err != nil {
				return nil, err
			}
			if ok {
				out[key] = vs
			}
			// The rows objects this bucket names: garbage when every
			// version whose bucket names them is gone.
			bk := g.buckets[key]
			if bk == nil {
				continue // unreadable: what it names stays
			}
			for _, h := range bk.Checkpoints {
				if h.Rows == nil {
					continue
				}
				rkey := SegmentKey(h.Rows.SHA256)
				if _, done := out[rkey]; done {
					continue
				}
				vs, ok, err := run(i, func(o *gcVersion) (bool, error) {
					ref, ok := o.bucketRef(b.Bucket)
					if !ok {
						return false, nil
					}
					ob := g.buckets[SegmentKey(ref.SHA256)]
					if ob == nil {
						return true, nil // unreadable: proves nothing, so it keeps
					}
					for _, oh := range ob.Checkpoints {
						if oh.Rows != nil && oh.Rows.SHA256 == h.Rows.SHA256 {
							return true, nil
						}
					}
					return false, nil
				})
				if err != nil {
					return nil, err
				}
				if ok {
					out[rkey] = vs
				}
			}
		}
	}
	return out, nil
}

// gcVersion is one stored version as the segment cleanup reads it: its
// version object when it is format 3 (link nil: it names no segment).
type gcVersion struct {
	v    Version
	link *segmentedVersion
}

func (o *gcVersion) bucketRef(b int) (segRef, bool) {
	if o.link == nil {
		return segRef{}, false
	}
	for _, r := range o.link.Buckets {
		if r.Bucket == b {
			return r.segRef, true
		}
	}
	return segRef{}, false
}

func (o *gcVersion) bucketKey(b int) string {
	if r, ok := o.bucketRef(b); ok {
		return SegmentKey(r.SHA256)
	}
	return ""
}

type gcReader struct {
	r        *Registry
	versions map[Version]*gcVersion // nil entry: unreadable, proves nothing
	buckets  map[string]*indexBucket
}

func (g *gcReader) readVersions(ctx context.Context, vs []Version) error {
	type res struct {
		o   *gcVersion
		err error
	}
	got := make([]res, len(vs))
	err := eachVersion(ctx, g.r, vs, func(i int, body []byte, err error) {
		switch {
		case errors.Is(err, storage.ErrNotFound):
			got[i] = res{} // gone since the listing: proves nothing
		case err != nil:
			got[i] = res{err: err}
		case peekFormat(body) != formatSegmented:
			if _, _, lerr := link(VersionKey(vs[i]), body, vs[i]); lerr == nil {
				got[i] = res{o: &gcVersion{v: vs[i]}}
			}
		default:
			if l, lerr := decodeSegmentedLink(VersionKey(vs[i]), body, vs[i]); lerr == nil {
				got[i] = res{o: &gcVersion{v: vs[i], link: l}}
			}
		}
	})
	if err != nil {
		return err
	}
	for i, r := range got {
		if r.err != nil {
			return r.err
		}
		g.versions[vs[i]] = r.o
	}
	return nil
}

// readBuckets reads, side by side, every distinct bucket the versions read
// name. One that cannot be read is left out (nil): it proves nothing, so
// what it might name is kept.
func (g *gcReader) readBuckets(ctx context.Context) error {
	type want struct {
		v   Version
		ref segRef
	}
	seen := map[string]bool{}
	var ws []want
	for _, o := range g.versions {
		if o == nil || o.link == nil {
			continue
		}
		for _, b := range o.link.Buckets {
			if k := SegmentKey(b.SHA256); !seen[k] {
				seen[k] = true
				ws = append(ws, want{o.v, b.segRef})
			}
		}
	}
	sort.Slice(ws, func(i, j int) bool { return ws[i].ref.SHA256 < ws[j].ref.SHA256 })
	got, err := fanout.Map(ctx, g.r.store.Parallelism(), len(ws), func(ctx context.Context, i int) (*indexBucket, error) {
		var b indexBucket
		if err := g.r.readSegment(ctx, ws[i].v, ws[i].ref, &b, sharedSegments{}); err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, nil
		}
		return &b, nil
	})
	if err != nil {
		return err
	}
	for i, b := range got {
		if b != nil {
			g.buckets[SegmentKey(ws[i].ref.SHA256)] = b
		}
	}
	return nil
}

// eachVersion reads the version objects vs side by side and hands each
// body (or its error) to fn.
func eachVersion(ctx context.Context, r *Registry, vs []Version, fn func(i int, body []byte, err error)) error {
	return fanout.Each(ctx, r.store.Parallelism(), len(vs), func(ctx context.Context, i int) error {
		body, err := r.readObject(ctx, VersionKey(vs[i]))
		if ctx.Err() != nil {
			return ctx.Err()
		}
		fn(i, body, err)
		return nil
	})
}
