package lance

import (
	"errors"
	"maps"
	"strings"
	"testing"

	"github.com/retain-dev/retain/core/storage"
)

// encodeBranch writes back Lance 12's own files byte for byte, and a file
// with metadata in the same layout (serde_json's pretty printer).
func TestEncodeBranchIsLanceExact(t *testing.T) {
	for _, body := range []string{lanceBranchFile, lanceBranchFileMain} {
		b, err := parseBranch([]byte(body))
		if err != nil {
			t.Fatal(err)
		}
		if got := string(encodeBranch(b)); got != body {
			t.Fatalf("encodeBranch:\n%s\nLance wrote:\n%s", got, body)
		}
	}
	b, _ := parseBranch([]byte(lanceBranchFileMain))
	b.Metadata = map[string]string{"session": "s-1", "retain.state": "ready", "quote\"": "a\\b\n/é"}
	want := strings.Replace(lanceBranchFileMain, `"metadata": {}`,
		"\"metadata\": {\n    \"quote\\\"\": \"a\\\\b\\n/é\",\n    \"retain.state\": \"ready\",\n    \"session\": \"s-1\"\n  }", 1)
	if got := string(encodeBranch(b)); got != want {
		t.Fatalf("with metadata:\n%s\nwant:\n%s", got, want)
	}
	back, err := parseBranch([]byte(want))
	if err != nil || !maps.Equal(back.Metadata, b.Metadata) {
		t.Fatalf("read back: %+v %v", back, err)
	}
	// Files of older Lance without an identifier keep having none; an
	// empty mapping stays empty.
	for body, want := range map[string]string{
		`{"parentBranch":null,"parentVersion":1,"createAt":5,"manifestSize":9}`:                                       "{\n  \"parentBranch\": null,\n  \"parentVersion\": 1,\n  \"createAt\": 5,\n  \"manifestSize\": 9,\n  \"metadata\": {}\n}",
		`{"identifier":{"version_mapping":[]},"parentBranch":"main","parentVersion":1,"createAt":5,"manifestSize":9}`: "{\n  \"parentBranch\": null,\n  \"identifier\": {\n    \"version_mapping\": []\n  },\n  \"parentVersion\": 1,\n  \"createAt\": 5,\n  \"manifestSize\": 9,\n  \"metadata\": {}\n}",
	} {
		b, err := parseBranch([]byte(body))
		if err != nil {
			t.Fatal(err)
		}
		if got := string(encodeBranch(b)); got != want {
			t.Fatalf("%s:\n%s\nwant\n%s", body, got, want)
		}
	}
}

// ReplaceBranchMetadata is a compare-and-swap on the file's version token
// and keeps everything but the metadata; it refuses what it would drop.
func TestReplaceBranchMetadata(t *testing.T) {
	s := refMemStore(t)
	d, _ := Open(s, "t.lance")
	key := "t.lance/_refs/branches/feat%2Fx.json"
	info := refPut(t, s, key, lanceBranchFile)

	nb, err := d.ReplaceBranchMetadata(refCtx, "feat/x", info.Version, map[string]string{"agent": "a1"})
	if err != nil {
		t.Fatal(err)
	}
	got, err := d.ReadBranch(refCtx, "feat/x")
	if err != nil || got.Info.Version != nb.Info.Version || !maps.Equal(got.Metadata, map[string]string{"agent": "a1"}) ||
		got.ParentBranch != "feat/x" || got.ParentVersion != 3 || got.ManifestSize != 550 || len(got.Lineage) != 2 || got.CreatedAt.Unix() != 1796054797 {
		t.Fatalf("after replace: %+v %v", got, err)
	}
	// The stale token loses, and the file stays as the winner wrote it.
	_, err = d.ReplaceBranchMetadata(refCtx, "feat/x", info.Version, map[string]string{"agent": "a2"})
	refWantIs(t, "stale token", err, ErrBranchChanged, storage.ErrPreconditionFailed)
	if again, _ := d.ReadBranch(refCtx, "feat/x"); again.Metadata["agent"] != "a1" {
		t.Fatalf("a stale replace wrote: %+v", again.Metadata)
	}
	// Back to Lance's exact bytes with empty metadata.
	if _, err := d.ReplaceBranchMetadata(refCtx, "feat/x", nb.Info.Version, nil); err != nil {
		t.Fatal(err)
	}
	if body, _, _ := s.ReadAll(refCtx, key); string(body) != lanceBranchFile {
		t.Fatalf("round trip:\n%s", body)
	}

	_, err = d.ReplaceBranchMetadata(refCtx, "nope", "v1", nil)
	refWantIs(t, "missing", err, ErrBranchNotFound, storage.ErrNotFound)

	info = refPut(t, s, "t.lance/_refs/branches/new.json", `{"parentVersion":1,"createAt":5,"manifestSize":9,"future":[1]}`)
	_, err = d.ReplaceBranchMetadata(refCtx, "new", info.Version, map[string]string{"a": "b"})
	refWantIs(t, "unknown field", err, ErrBranchNotRewritable, storage.ErrUnsupported)
	info = refPut(t, s, "t.lance/_refs/branches/new2.json", `{"identifier":{"version_mapping":[],"zz":1},"parentVersion":1,"createAt":5,"manifestSize":9}`)
	_, err = d.ReplaceBranchMetadata(refCtx, "new2", info.Version, nil)
	refWantIs(t, "unknown identifier field", err, ErrBranchNotRewritable)
	info = refPut(t, s, "t.lance/_refs/branches/bad.json", `{"parentVersion":1}`)
	_, err = d.ReplaceBranchMetadata(refCtx, "bad", info.Version, nil)
	if !errors.Is(err, ErrMalformedBranch) {
		t.Fatalf("malformed: %v", err)
	}
	_, err = d.ReplaceBranchMetadata(refCtx, "feat/x", "", nil)
	refWantIs(t, "no token", err, storage.ErrInvalidArgument)
	_, err = d.ReplaceBranchMetadata(refCtx, "feat/x", "x", map[string]string{"k": "\xff"})
	refWantIs(t, "not UTF-8", err, storage.ErrInvalidArgument)
}
