package registry

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/retain-dev/retain/adapters/localfs"
	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/storage/memstore"
	"github.com/retain-dev/retain/core/storage/storagetest"
)

// The history-flat gate: list, show and lookup cost the same requests and
// bytes whether the registry has 10, 1,000 or 10,000 versions, because
// Head never lists the history. Every registry below has the same head
// content (6 live checkpoints x 4 tables, 2 tombstoned), built in version
// 1; later versions are no-op commits, so only the history depth differs.

const (
	costLive, costTables, costDead = 6, 4, 2
)

// costBase is the draft of version 1 every deep registry starts from. Its
// ids are fixed so every registry's head has the same bytes.
func costBase(t testing.TB) (*Snapshot, ID, string) {
	t.Helper()
	d := Empty().Next()
	for i := 0; i < costTables; i++ {
		if _, err := d.AddTable(testID(5000+i), fmt.Sprintf("db/t%d.lance", i), t0); err != nil {
			t.Fatal(err)
		}
	}
	var id ID
	for i := 0; i < costLive+costDead; i++ {
		c := NewCheckpoint{ID: testID(6000 + i), Name: fmt.Sprintf("team/cp-%02d", i), SourceBranch: MainBranch,
			CreatedAt: t0.Add(time.Duration(i) * time.Minute), Actor: "alice@host", Pins: pinsOf(d, uint64(10+i))}
		if _, err := d.Reserve(c); err != nil {
			t.Fatal(err)
		}
		if i >= costLive {
			if _, err := d.Tombstone(c.ID, Deletion{OperationID: fmt.Sprintf("op-del-%d", i), At: t0.Add(time.Hour), Actor: "bob"}); err != nil {
				t.Fatal(err)
			}
		} else {
			id = c.ID
		}
	}
	return d, id, "team/cp-03"
}

// buildByCommits commits version 1 and then no-op versions up to depth,
// through Head and Commit.
func buildByCommits(t testing.TB, s *storage.Store, depth int) {
	t.Helper()
	reg := Open(s, Options{Scope: storage.ScopeHost})
	base, _, _ := costBase(t)
	if _, err := reg.Commit(bg, 0, base); err != nil {
		t.Fatal(err)
	}
	commitNoop(t, reg, depth-1)
}

// versionBodies yields the bytes of versions 1..depth of the same content:
// the version field is fixed-width, so each is version 1's bytes with the
// top-level version rewritten (Head's decode checks the result).
func versionBodies(t testing.TB, depth int, put func(v Version, body []byte)) {
	t.Helper()
	base, _, _ := costBase(t)
	body := encodeT(t, base)
	old := []byte(`"version":"00000000000000000001"`)
	if bytes.Count(body, old) != 1 {
		t.Fatal("the version field is not where the test expects it")
	}
	for v := 1; v <= depth; v++ {
		field := fmt.Sprintf(`"version":"%020d"`, v)
		if v > 1 { // as a commit writes it: the predecessor's digest (never checked by Head)
			field += `,"prev":"sha256:` + strings.Repeat("0", 64) + `"`
		}
		put(Version(v), bytes.Replace(body, old, []byte(field), 1))
	}
}

type opCosts struct{ list, show, lookup cost }

// measureOps measures list, show (lookup by name plus its rows) and lookup
// by id, each through a fresh Registry.
func measureOps(t *testing.T, m *meter, depth int) opCosts {
	t.Helper()
	_, id, name := costBase(t)
	var oc opCosts
	oc.list = m.measure(t, func() error {
		v, live, err := Open(m.store, Options{}).List(bg)
		if err == nil && (int(v) != depth || len(live) != costLive) {
			err = fmt.Errorf("list at depth %d: head %d, %d live", depth, v, len(live))
		}
		return err
	})
	oc.show = m.measure(t, func() error {
		_, c, err := Open(m.store, Options{}).Lookup(bg, name)
		if err == nil && len(c.Rows) != costTables {
			err = fmt.Errorf("show: %d rows", len(c.Rows))
		}
		return err
	})
	oc.lookup = m.measure(t, func() error {
		_, c, err := Open(m.store, Options{}).Lookup(bg, string(id))
		if err == nil && c.ID != id {
			err = fmt.Errorf("lookup: got %s", c.ID)
		}
		return err
	})
	return oc
}

func checkFlat(t *testing.T, what string, depths []int, got []opCosts, headSize int64, wantList, wantGet, wantStat int64) {
	t.Helper()
	for i, d := range depths {
		for _, oc := range []struct {
			op string
			c  cost
		}{{"list", got[i].list}, {"show", got[i].show}, {"lookup", got[i].lookup}} {
			op, c := oc.op, oc.c
			t.Logf("%s depth %5d %-6s %v", what, d, op, c)
			if c != got[0].list {
				t.Errorf("%s depth %d %s costs %v, depth %d list costs %v: not history-flat", what, d, op, c, depths[0], got[0].list)
			}
		}
	}
	c := got[0].list
	if c.List != wantList || c.Get != wantGet || c.Stat != wantStat || c.Put+c.Delete+c.DeleteMany+c.Gate != 0 || c.BytesRead != headSize {
		t.Errorf("%s: %v, want %d list, %d get, %d stat and %d bytes (the head)", what, c, wantList, wantGet, wantStat, headSize)
	}
}

// headSize is the size of the head at depth > 1: the base's bytes plus the
// predecessor's digest every commit after the first names.
func headSize(t testing.TB) int64 {
	base, _, _ := costBase(t)
	return int64(len(encodeT(t, base)) + len(`,"prev":"sha256:`+strings.Repeat("0", 64)+`"`))
}

// putHint writes the head record a commit of head leaves (its version and
// the SHA-256 of its bytes), as the commits versionBodies stands in for
// would have.
func putHint(t testing.TB, s *storage.Store, v int) {
	t.Helper()
	b, _, err := s.ReadAll(bg, VersionKey(Version(v)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutBytes(bg, HintKey, []byte(hintBody(v, b)), storage.PutOptions{}); err != nil {
		t.Fatal(err)
	}
}

// hintBody is the head record a commit of version v with these bytes writes.
func hintBody(v int, body []byte) string {
	sum := sha256.Sum256(body)
	return fmt.Sprintf(`{"format":1,"version":"%020d","sha256":"%s"}`, v, hex.EncodeToString(sum[:]))
}

func TestHistoryFlatCostMemstore(t *testing.T) {
	depths := []int{10, 1000, 10000}
	var got []opCosts
	for _, depth := range depths {
		mem := memstore.New()
		m := newMeter(t, mem)
		if depth <= 1000 {
			buildByCommits(t, m.store, depth)
		} else {
			versionBodies(t, depth, func(v Version, body []byte) {
				if _, err := m.store.PutBytes(bg, VersionKey(v), body, storage.PutOptions{Mode: storage.PutCreateIfAbsent}); err != nil {
					t.Fatal(err)
				}
			})
			putHint(t, m.store, depth)
		}
		got = append(got, measureOps(t, m, depth))
	}
	// The head record's bytes are read too (CheckHead), the same at every depth.
	checkFlat(t, "memstore", depths, got, headSize(t)+int64(len(hintBody(1, nil))), 1, 2, 0)
	if l := got[0].list.Listed; l < 1 || l > headPageSize {
		t.Errorf("the head listing returned %d keys, want 1 to %d", l, headPageSize)
	}
}

// The same gate on a store without ordered listing: the hint, one probe.
func TestHistoryFlatCostUnorderedStore(t *testing.T) {
	depths := []int{10, 1000, 10000}
	var got []opCosts
	for _, depth := range depths {
		m := newMeter(t, &storagetest.Caps{Driver: memstore.New(), Edit: func(c *storage.Capabilities) { c.OrderedList = false }})
		if depth <= 1000 {
			buildByCommits(t, m.store, depth)
		} else {
			versionBodies(t, depth, func(v Version, body []byte) {
				if _, err := m.store.PutBytes(bg, VersionKey(v), body, storage.PutOptions{Mode: storage.PutCreateIfAbsent}); err != nil {
					t.Fatal(err)
				}
			})
			putHint(t, m.store, depth)
		}
		got = append(got, measureOps(t, m, depth))
	}
	// The hint's bytes are read too, the same at every depth.
	hint := int64(len(hintBody(1, nil)))
	checkFlat(t, "unordered", depths, got, headSize(t)+hint, 0, 2, 1)
}

func TestHistoryFlatCostLocalfs(t *testing.T) {
	depths := []int{10, 1000}
	var got []opCosts
	for _, depth := range depths {
		root := t.TempDir()
		fs, err := localfs.Open(root)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { fs.Close() })
		m := newMeter(t, fs)
		if depth <= 10 {
			buildByCommits(t, m.store, depth)
		} else {
			// Plain files, as another writer of the directory would leave
			// them; committing 1,000 fsynced versions is slow on a shared
			// machine and proves nothing more.
			dir := filepath.Join(root, filepath.FromSlash(VersionsPrefix))
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			versionBodies(t, depth, func(v Version, body []byte) {
				if err := os.WriteFile(filepath.Join(root, filepath.FromSlash(VersionKey(v))), body, 0o644); err != nil {
					t.Fatal(err)
				}
			})
			putHint(t, m.store, depth)
		}
		got = append(got, measureOps(t, m, depth))
	}
	checkFlat(t, "localfs", depths, got, headSize(t)+int64(len(hintBody(1, nil))), 1, 2, 0)
}
