package conformance

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/retain-dev/retain/core/storage"
)

// testBatchReads: a driver's batch reads (storage.BatchReader) answer exactly
// what its single calls answer: the same keys in the same order, the same
// info and bodies, the same error kinds, and GetMany stops at its byte
// bound as the contract says. The driver is asked directly, with no
// portable-store help. A driver without batch reads (or a plugin that
// predates them) is checked through the Store's fallback only.
func testBatchReads(t T, s *storage.Store) {
	ctx := ctxT(t)
	var keys []string
	for i := range 5 {
		k := fmt.Sprintf("br/%02d", i)
		mustPut(t, s, k, bytes.Repeat([]byte{byte('a' + i)}, 1000*i), storage.PutOptions{})
		keys = append(keys, k)
	}
	keys = append(keys, "br/missing", keys[2]) // a key twice is two answers

	// The store, with or without the driver's batches, answers as single
	// calls do.
	stats, err := s.StatMany(ctx, keys)
	if err != nil {
		t.Fatalf("Store.StatMany: %v", err)
	}
	gets, err := s.GetMany(ctx, keys)
	if err != nil {
		t.Fatalf("Store.GetMany: %v", err)
	}
	wantStatsMatch(t, s, keys, stats, "Store.StatMany")
	wantGetsMatch(t, s, keys, gets, "Store.GetMany")

	br, ok := s.Driver().(storage.BatchReader)
	if !ok {
		t.Logf("the driver has no batch reads: checked the store's key-by-key fallback")
		return
	}
	stats, err = br.StatMany(ctx, keys)
	if errors.Is(err, storage.ErrUnsupported) {
		t.Logf("the driver declines batch reads (%v): checked the store's key-by-key fallback", err)
		return
	}
	if err != nil {
		t.Fatalf("StatMany: %v", err)
	}
	wantStatsMatch(t, s, keys, stats, "StatMany")
	gets, err = br.GetMany(ctx, keys, storage.MaxBatchBytes)
	if err != nil {
		t.Fatalf("GetMany: %v", err)
	}
	wantGetsMatch(t, s, keys, gets, "GetMany")

	// Bodies of 0, 1000, 2000, 3000 and 4000 bytes within 3500: the first
	// three fit (3000), the fourth would take the total past the bound.
	gets, err = br.GetMany(ctx, keys[:5], 3500)
	if err != nil {
		t.Fatalf("GetMany within 3500 bytes: %v", err)
	}
	if len(gets) != 3 {
		t.Fatalf("GetMany of bodies of 0, 1000, 2000, 3000 and 4000 bytes within 3500 bytes: %d results, want the first 3", len(gets))
	}
	wantGetsMatch(t, s, keys[:3], gets, "GetMany within 3500 bytes")
	// A first body larger than the bound alone: limit exceeded, no data.
	gets, err = br.GetMany(ctx, keys[4:5], 3999)
	if err != nil {
		t.Fatalf("GetMany of 4000 bytes within 3999: %v", err)
	}
	if len(gets) != 1 || gets[0].Data != nil {
		t.Fatalf("GetMany of one 4000-byte body within 3999 bytes: %d results, want 1 without data", len(gets))
	}
	wantKind(t, gets[0].Err, storage.ErrLimitExceeded, "GetMany of one 4000-byte body within 3999 bytes")
	t.Logf("batch reads checked against single calls")
}

func wantStatsMatch(t T, s *storage.Store, keys []string, got []storage.StatResult, what string) {
	t.Helper()
	if len(got) != len(keys) {
		t.Fatalf("%s: %d results for %d keys", what, len(got), len(keys))
	}
	for i, k := range keys {
		info, err := s.Stat(ctxT(t), k)
		r := got[i]
		switch {
		case r.Key != k:
			t.Fatalf("%s: result %d names %q, want %q", what, i, r.Key, k)
		case (err == nil) != (r.Err == nil) || storage.KindOf(err) != storage.KindOf(r.Err):
			t.Fatalf("%s of %q: error %v (kind %s), Stat says %v (kind %s)", what, k, r.Err, storage.KindOf(r.Err), err, storage.KindOf(err))
		case err == nil && (r.Info.Key != info.Key || r.Info.Size != info.Size || r.Info.Version != info.Version):
			t.Fatalf("%s of %q: %+v, Stat says %+v", what, k, r.Info, info)
		}
	}
}

func wantGetsMatch(t T, s *storage.Store, keys []string, got []storage.GetResult, what string) {
	t.Helper()
	if len(got) != len(keys) {
		t.Fatalf("%s: %d results for %d keys", what, len(got), len(keys))
	}
	for i, k := range keys {
		data, info, err := s.ReadAll(ctxT(t), k)
		r := got[i]
		switch {
		case r.Key != k:
			t.Fatalf("%s: result %d names %q, want %q", what, i, r.Key, k)
		case (err == nil) != (r.Err == nil) || storage.KindOf(err) != storage.KindOf(r.Err):
			t.Fatalf("%s of %q: error %v (kind %s), Get says %v (kind %s)", what, k, r.Err, storage.KindOf(r.Err), err, storage.KindOf(err))
		case err == nil && (r.Info.Key != info.Key || r.Info.Size != info.Size || r.Info.Version != info.Version):
			t.Fatalf("%s of %q: %+v, Get says %+v", what, k, r.Info, info)
		case err == nil && !bytes.Equal(r.Data, data):
			t.Fatalf("%s of %q: a body of %d bytes unlike Get's %d", what, k, len(r.Data), len(data))
		}
	}
}
