package registry

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"testing"
	"time"

	"github.com/retain-dev/retain/core/lance"
	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/storage/memstore"
)

var (
	bg = context.Background()
	t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
)

// physRef is a canonical lance.PhysRef token of version v of the table at
// path.
func physRef(path string, v uint64) string {
	sum := sha256.Sum256([]byte(fmt.Sprintf("%s@%d", path, v)))
	return lance.PhysRef{Version: v, SHA256: hex.EncodeToString(sum[:]), Size: 1000 + int64(v),
		Committed: t0.Add(time.Duration(v) * time.Second), TxnUUID: fmt.Sprintf("00000000-0000-4000-8000-%012d", v), Format: 2}.String()
}

// physRefV1 is the same version's format-1 token (older stores).
func physRefV1(path string, v uint64) string {
	return lance.PhysRef{Version: v, Key: path + "/_versions/" + lance.ManifestName(v, lance.NamingV2),
		ObjectVersion: fmt.Sprintf("ov-%d", v), Size: 1000 + int64(v), Committed: t0.Add(time.Duration(v) * time.Second),
		TxnUUID: fmt.Sprintf("00000000-0000-4000-8000-%012d", v), Format: 1}.String()
}

// testIDs are fixed, valid ids so encodings are reproducible.
func testID(n int) ID {
	var b [16]byte
	b[0] = byte(n >> 8)
	b[1] = byte(n)
	b[15] = 0xa5
	return ID(idEncoding.EncodeToString(b[:]))
}

// newDraft is a draft of version 1 with two catalogued tables.
func newDraft(t testing.TB) *Snapshot {
	t.Helper()
	s := Empty().Next()
	for i, p := range []string{"db/a.lance", "db/b.lance"} {
		if _, err := s.AddTable(testID(1000+i), p, t0); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

func pinsOf(s *Snapshot, version uint64) []Pin {
	var out []Pin
	for _, tb := range s.Tables {
		out = append(out, Pin{TableID: tb.ID, Incarnation: tb.Incarnation,
			Target: Target{Path: tb.Path, Branch: MainBranch, Version: version, PhysicalRef: physRef(tb.Path, version)}})
	}
	return out
}

var idSeq = 1

func newCheckpoint(s *Snapshot, name string) NewCheckpoint {
	idSeq++
	return NewCheckpoint{ID: testID(idSeq), Name: name, SourceBranch: MainBranch, CreatedAt: t0, Actor: "alice@host", Pins: pinsOf(s, 7)}
}

func reserveT(t testing.TB, s *Snapshot, name string) Checkpoint {
	t.Helper()
	c, err := s.Reserve(newCheckpoint(s, name))
	if err != nil {
		t.Fatalf("reserve %q: %v", name, err)
	}
	return c
}

func memStore(t testing.TB) (*storage.Store, *memstore.Driver) {
	t.Helper()
	d := memstore.New()
	s, err := storage.NewStore(bg, "memory", d)
	if err != nil {
		t.Fatal(err)
	}
	return s, d
}
