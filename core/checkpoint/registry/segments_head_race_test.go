package registry

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/retain-dev/retain/core/storage"
)

// afterGet runs hook once, right after the first Get of key is answered.
type afterGet struct {
	storage.Driver
	key  string
	once sync.Once
	hook func()
}

func (a *afterGet) Get(ctx context.Context, key string) (*storage.Reader, error) {
	rd, err := a.Driver.Get(ctx, key)
	if key == a.key && err == nil {
		a.once.Do(a.hook)
	}
	return rd, err
}

// A reader outside the claim (list, show) that has read the head's version
// object while a commit and the registry's cleanup land (the cleanup
// removing that version and the segments only it referenced) finds a
// segment missing. For a whole version the same race is storage.ErrNotFound,
// which Head reads again; a segmented one must not turn it into
// ErrCorruptRegistry ("run verify, then recover") when a second read finds
// the new head whole.
func TestHeadReadsAgainWhenCleanupRemovesTheSegmentsOfTheHeadItRead(t *testing.T) {
	withSpill(t, 0)
	s, d := memStore(t)
	writer := Open(s, Options{Scope: storage.ScopeHost})
	same := ""
	for i := 0; i < 1000 && same == ""; i++ {
		if n := fmt.Sprintf("c/%d", i); bucketOf(n) == bucketOf("a") {
			same = n
		}
	}
	v1 := newDraft(t)
	a := reserveT(t, v1, "a")
	c := reserveT(t, v1, same)
	if _, err := writer.Commit(bg, 0, v1); err != nil {
		t.Fatal(err)
	}
	tomb := func(expected Version, id ID) {
		t.Helper()
		_, head, err := writer.Head(bg)
		if err != nil {
			t.Fatal(err)
		}
		n := head.Next()
		if _, err := n.Tombstone(id, Deletion{OperationID: fmt.Sprintf("op-%d", expected), At: t0, Actor: "bob"}); err != nil {
			t.Fatal(err)
		}
		if _, err := writer.Commit(bg, expected, n); err != nil {
			t.Fatal(err)
		}
	}
	tomb(1, a.ID) // v2, the head the reader finds: a delete, pinned by nothing

	var hookErr error
	ag := &afterGet{Driver: d, key: VersionKey(2)}
	ag.hook = func() {
		// Between the reader's get of v2 and its segment reads: a delete
		// rewrites the same bucket (v3), and a cleanup removes v2 and
		// what only it referenced.
		tomb(2, c.ID)
		garbage, err := writer.SegmentGarbage(bg, []Version{1, 2, 3}, []Version{2})
		if err != nil {
			hookErr = err
			return
		}
		for _, k := range append([]string{VersionKey(2)}, keysOf(garbage)...) {
			if err := d.Delete(bg, k, storage.DeleteOptions{}); err != nil {
				hookErr = err
			}
		}
	}
	rs, err := storage.NewStore(bg, "memory", ag)
	if err != nil {
		t.Fatal(err)
	}
	v, _, err := Open(rs, Options{}).Head(bg)
	if hookErr != nil {
		t.Fatal(hookErr)
	}
	if err != nil {
		t.Fatalf("Head while a commit and a cleanup landed: %v", err)
	}
	if v != 3 {
		t.Fatalf("Head = %d, want 3", v)
	}
}

func keysOf(m map[string][]Version) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
