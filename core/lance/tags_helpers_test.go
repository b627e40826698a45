package lance

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/retain-dev/retain/adapters/localfs"
	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/storage/memstore"
	"github.com/retain-dev/retain/internal/lancetest"
)

// Helpers of the tag and branch tests: real Lance through refs.cjs, stores
// over a directory or memory.

var refCtx = context.Background()

// refOp is one operation of refs.cjs.
type refOp map[string]any

// refsRun runs refs.cjs on dir/table.lance and returns one raw result per
// op (an op with "try" reports {"error": ...} instead of failing).
func refsRun(t testing.TB, dir string, ops ...refOp) []json.RawMessage {
	t.Helper()
	return refsRunNaming(t, dir, "v2", ops...)
}

// refsRunNaming is refsRun with the manifest naming of a table it creates.
func refsRunNaming(t testing.TB, dir, naming string, ops ...refOp) []json.RawMessage {
	t.Helper()
	var out struct {
		Table   string            `json:"table"`
		Results []json.RawMessage `json:"results"`
	}
	lancetest.Node(t, "refs.cjs", map[string]any{"dir": dir, "table": "t", "naming": naming, "ops": ops}, &out)
	if len(out.Results) != len(ops) {
		t.Fatalf("refs.cjs returned %d results for %d ops", len(out.Results), len(ops))
	}
	return out.Results
}

func refDecode[T any](t testing.TB, raw json.RawMessage) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("decoding %s: %v", raw, err)
	}
	return v
}

// refLanceError returns the error a "try" op reported, or "".
func refLanceError(t testing.TB, raw json.RawMessage) string {
	t.Helper()
	var e struct {
		Error string `json:"error"`
	}
	_ = json.Unmarshal(raw, &e)
	return e.Error
}

type refLanceTag struct {
	Version      uint64 `json:"version"`
	ManifestSize uint64 `json:"manifestSize"`
}

type refLanceBranch struct {
	ParentBranch  *string `json:"parentBranch"`
	ParentVersion uint64  `json:"parentVersion"`
	ManifestSize  uint64  `json:"manifestSize"`
}

type refLanceCount struct {
	Version uint64 `json:"version"`
	Rows    int    `json:"rows"`
}

// refDirStore is a localfs store over dir, which real Lance also reads.
func refDirStore(t testing.TB, dir string) *storage.Store {
	t.Helper()
	d, err := localfs.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	s, err := storage.NewStore(refCtx, "localfs", d)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// refLanceDataset opens the table "t" that refs.cjs built in dir.
func refLanceDataset(t testing.TB, dir string) *Dataset {
	t.Helper()
	d, err := Open(refDirStore(t, dir), "t.lance")
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func refMemStore(t testing.TB) *storage.Store {
	t.Helper()
	s, err := storage.NewStore(refCtx, "memory", memstore.New())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// refFakeDataset writes manifests of the given sizes (V2 names) under root,
// version i+1 of size sizes[i]: tags only need their existence and size.
func refFakeDataset(t testing.TB, s *storage.Store, root string, sizes ...int) *Dataset {
	t.Helper()
	d, err := Open(s, root)
	if err != nil {
		t.Fatal(err)
	}
	for i, n := range sizes {
		if _, err := s.PutBytes(refCtx, d.Key(versionsDir+"/"+ManifestName(uint64(i+1), NamingV2)), make([]byte, n), storage.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

func refPut(t testing.TB, s *storage.Store, key, body string) storage.Info {
	t.Helper()
	info, err := s.PutBytes(refCtx, key, []byte(body), storage.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return info
}

func refWantIs(t testing.TB, what string, err error, targets ...error) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: no error, want %v", what, targets)
	}
	for _, target := range targets {
		if !errors.Is(err, target) {
			t.Fatalf("%s: %v does not match %v", what, err, target)
		}
	}
}

// refCopyDir copies a directory tree (a Lance table) for variant tests.
func refCopyDir(t testing.TB, src, dst string) {
	t.Helper()
	err := filepath.Walk(src, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if fi.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func refReadFile(t testing.TB, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func refWriteFile(t testing.TB, p, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

func refRemove(t testing.TB, p string) {
	t.Helper()
	if err := os.RemoveAll(p); err != nil {
		t.Fatal(err)
	}
}

func refTagNames(tags []Tag) string {
	var s []string
	for _, t := range tags {
		s = append(s, t.Name)
	}
	return strings.Join(s, ",")
}
