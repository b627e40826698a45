package conformance

import (
	"bytes"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/storage/claim"
)

// testCreateVisibility: readers racing a create-if-absent see the key
// missing or the whole body, never part of it. An adapter that opens the
// final name and writes the body in parts lets a reader read a short body
// without an error; the claim, a create-if-absent whose reader decides who
// holds the store, would read a torn record. Bounded by creates, not time.
func testCreateVisibility(t T, s *storage.Store) {
	skipIfNone(t, s, storage.FeatureCreateIfAbsent)
	const size, creates, readers = 1 << 20, 30, 3
	ctx := ctxT(t)
	var current atomic.Int64 // the key being created
	current.Store(-1)
	stop := readRace(readers, func() (bool, error) {
		i := current.Load()
		if i < 0 {
			return false, nil
		}
		b, _, err := s.ReadAll(ctx, fmt.Sprintf("cv/%03d", i))
		if errors.Is(err, storage.ErrNotFound) || errors.Is(err, storage.ErrTransient) {
			return false, nil // not there yet, or a torn read refused
		}
		if err != nil {
			return false, err
		}
		want := byte('a' + i%26)
		if len(b) != size || bytes.Count(b, []byte{want}) != size {
			return false, fmt.Errorf("cv/%03d while it was created: %d bytes of %d, %d of them %q", i, len(b), size, bytes.Count(b, []byte{want}), want)
		}
		return true, nil
	})
	for i := range creates {
		current.Store(int64(i))
		key := fmt.Sprintf("cv/%03d", i)
		info, err := s.PutBytes(ctx, key, bytes.Repeat([]byte{byte('a' + i%26)}, size), storage.PutOptions{Mode: storage.PutCreateIfAbsent})
		if err == nil && (info.Key != key || info.Size != size || info.Version == "") {
			err = fmt.Errorf("bad info %+v", info)
		}
		if err != nil {
			stop()
			t.Fatalf("create of %s: %v", key, err)
		}
	}
	seen, err := stop()
	if err != nil {
		t.Fatal(err)
	}
	if seen == 0 {
		t.Skipf("no read found a created body during %d creates: the readers never overlapped a create, so nothing was proven", creates)
	}
	// The claim is such a create: readers of the claim while it is taken
	// and given back see no claim or a whole record, never a torn one.
	if err := s.Require(storage.FeatureCreateIfAbsent, storage.ScopeProcess); err != nil {
		t.Logf("the claim is not raced: %v", err)
		return
	}
	const claims = 20
	stopClaims := readRace(readers, func() (bool, error) {
		_, _, err := claim.Read(ctx, s)
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, storage.ErrNotFound) || errors.Is(err, storage.ErrTransient):
			return false, nil
		}
		return false, fmt.Errorf("reading the claim while it was taken: %w", err)
	})
	for range claims {
		h, err := claim.Acquire(ctx, s, claim.Request{Action: "conformance", Scope: storage.ScopeProcess})
		if err == nil {
			err = h.Release(ctx)
		}
		if err != nil {
			stopClaims()
			t.Fatalf("taking and giving back the claim: %v", err)
		}
	}
	claimsSeen, err := stopClaims()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d whole bodies read during %d creates; %d whole claims read during %d acquisitions", seen, creates, claimsSeen, claims)
}
