package registry

import (
	"errors"
	"fmt"
	"testing"

	"github.com/retain-dev/retain/core/storage"
)

// Registry recover builds on the newest version it trusts (k) and
// publishes above every stored one with NextAt, leaving the versions in
// doubt (k+1..top) in the history. A bucket unchanged since k then keeps
// k's since, so the recovered head references k's segment again after
// versions that do not: the segment's referencing versions are no longer
// one unbroken run. Removing k (and the versions in doubt) must still
// never name a segment the head references.
func TestSegmentGarbageKeepsWhatARecoveredHeadReferences(t *testing.T) {
	withSpill(t, 0)
	s, _, d := meteredStore(t)
	reg := Open(s, Options{Scope: storage.ScopeHost})

	// Two names in one bucket, one elsewhere.
	same := ""
	for i := 0; i < 1000 && same == ""; i++ {
		if n := fmt.Sprintf("c/%d", i); bucketOf(n) == bucketOf("a") {
			same = n
		}
	}
	v1 := newDraft(t)
	a := reserveT(t, v1, "a")
	c := reserveT(t, v1, same)
	reserveT(t, v1, "seed")
	if _, err := reg.Commit(bg, 0, v1); err != nil {
		t.Fatal(err)
	}
	tomb := func(expected Version, id ID) {
		t.Helper()
		_, head, err := reg.Head(bg)
		if err != nil {
			t.Fatal(err)
		}
		n := head.Next()
		if _, err := n.Tombstone(id, Deletion{OperationID: fmt.Sprintf("op-%d", expected), At: t0, Actor: "bob"}); err != nil {
			t.Fatal(err)
		}
		if _, err := reg.Commit(bg, expected, n); err != nil {
			t.Fatal(err)
		}
	}
	tomb(1, a.ID) // v2: bucket of "a" rewritten (X, since 2); a delete, pinned by nothing
	tomb(2, c.ID) // v3: the same bucket rewritten again (Y): the version in doubt

	// recover: v3 in doubt, build on v2, publish v4 above it.
	base, err := reg.Read(bg, 2)
	if err != nil {
		t.Fatal(err)
	}
	draft := base.NextAt(4, DigestOf(readRaw(t, d, VersionKey(3))))
	if _, err := reg.Commit(bg, 3, draft); err != nil {
		t.Fatal(err)
	}
	head := segmentKeys(t, reg, 4)

	got, err := reg.SegmentGarbage(bg, []Version{1, 2, 3, 4}, []Version{2, 3})
	if err != nil {
		t.Fatal(err)
	}
	for k := range got {
		if head[k] {
			t.Errorf("%s is named garbage once versions 2 and 3 go, and the head (version 4) references it", k)
		}
	}
	// What cleanup would then do: the head no longer reads.
	for _, v := range []Version{2, 3} {
		if err := d.Delete(bg, VersionKey(v), storage.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for k := range got {
		if err := d.Delete(bg, k, storage.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := Open(s, Options{Scope: storage.ScopeHost}).Read(bg, 4); err != nil {
		t.Errorf("after cleanup the recovered head does not read: %v (corrupt: %v)", err, errors.Is(err, ErrCorruptRegistry))
	}
}
