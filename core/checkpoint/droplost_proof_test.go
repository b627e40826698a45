package checkpoint

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/retain-dev/retain/core/checkpoint/registry"
	"github.com/retain-dev/retain/core/lance"
)

// A format-1 pin of a manifest that carries neither timestamp nor
// transaction has only the object (key, object version) to go by. A copy
// of the store (rsync writes a new inode) changes that object version
// while the commit is intact: cleanup is right to refuse it, but it is no
// proof the version is gone, so drop-lost must not call it recreated and
// give the pin up. Before, lostEvidence reported incarnation-changed.
func TestDropLostEvidenceNeedsACommitThatDiffers(t *testing.T) {
	s, _, dir := localStore(t, "deletes")
	ds, err := lance.Open(s, "deletes.lance")
	if err != nil {
		t.Fatal(err)
	}
	v, err := ds.Latest(bg)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := ds.PhysRef(bg, v)
	if err != nil {
		t.Fatal(err)
	}
	old := lance.PhysRef{Version: ref.Version, Size: ref.Size, Key: ref.Key, ObjectVersion: ref.ObjectVersion, Format: 1}
	row := registry.Row{Pin: registry.Pin{Target: registry.Target{Path: "deletes.lance", Branch: registry.MainBranch, Version: ref.Version, PhysicalRef: old.String()}}}
	if l, err := lostEvidence(bg, s, row); err != nil || l.kind != "" {
		t.Fatalf("the pinned object as it was: %+v %v", l, err)
	}
	// rsync: same bytes, a new file.
	p := filepath.Join(dir, filepath.FromSlash(ref.Key))
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p+".tmp", b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(p+".tmp", p); err != nil {
		t.Fatal(err)
	}
	l, err := lostEvidence(bg, s, row)
	if err == nil || l.kind != "" {
		t.Fatalf("identity-less format-1 pin after a copy: lost %+v, err %v; want an error (not provably gone)", l, err)
	}

	// The same commit (version, timestamp, transaction) in other bytes is
	// a rewritten manifest, not a recreated table; another timestamp is.
	pinned := lance.PhysRef{Version: 3, Size: 10, SHA256: "a", Committed: time.Unix(5, 0), TxnUUID: "u", Format: 2}
	rewritten := pinned
	rewritten.SHA256 = "b"
	recreated := rewritten
	recreated.Committed, recreated.TxnUUID = time.Unix(6, 0), "w"
	if ProvesOtherCommit(pinned, rewritten) || !ProvesOtherCommit(pinned, recreated) {
		t.Fatalf("rewritten proves another commit: %v; recreated: %v", ProvesOtherCommit(pinned, rewritten), ProvesOtherCommit(pinned, recreated))
	}
}
