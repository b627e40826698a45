package branch

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retain-dev/retain/core/lance"
	"github.com/retain-dev/retain/core/refs/lifecycle"
	"github.com/retain-dev/retain/core/refs/refmeta"
	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/storage/memstore"
	"github.com/retain-dev/retain/core/storage/storagetest"
)

var branchCtx = context.Background()

// branchFile is a branch file as Lance 12 writes it, with metadata.
func branchFile(parent string, version uint64, meta map[string]string) string {
	p := "null"
	if parent != "" {
		p = fmt.Sprintf("%q", parent)
	}
	m := "{}"
	if len(meta) > 0 {
		var parts []string
		for k, v := range meta {
			parts = append(parts, fmt.Sprintf("    %q: %q", k, v))
		}
		m = "{\n" + strings.Join(parts, ",\n") + "\n  }"
	}
	return fmt.Sprintf("{\n  \"parentBranch\": %s,\n  \"identifier\": {\n    \"version_mapping\": []\n  },\n  \"parentVersion\": %d,\n  \"createAt\": 1796054797,\n  \"manifestSize\": 550,\n  \"metadata\": %s\n}", p, version, m)
}

// reads records the key (or listing prefix) of every read a Hook sees.
type reads struct {
	mu   sync.Mutex
	keys []string
}

func (r *reads) note(c storagetest.Call) error {
	if c.Op == storagetest.OpGet || c.Op == storagetest.OpStat || c.Op == storagetest.OpList {
		r.mu.Lock()
		r.keys = append(r.keys, string(c.Op)+" "+c.Key)
		r.mu.Unlock()
	}
	return nil
}

func put(t testing.TB, s *storage.Store, key, body string) {
	t.Helper()
	if _, err := s.PutBytes(branchCtx, key, []byte(body), storage.PutOptions{}); err != nil {
		t.Fatal(err)
	}
}

// A --filter lookup over 1,000 branches reads only the branch files: one
// listing of _refs/branches/ (one page per 1,000 names) and one read of
// each file — never a manifest, data file or branch folder, though the
// table has them — and finds exactly the branches of the session asked
// for. The same holds with --all.
func TestListBranchesFilterReadsOnlyBranchFiles(t *testing.T) {
	mem := memstore.New()
	rec := &reads{}
	counting := storagetest.NewCounting(storagetest.NewHook(mem).Before(rec.note))
	s, err := storage.NewStore(branchCtx, "memory", counting)
	if err != nil {
		t.Fatal(err)
	}
	// Data a reader could be tempted to touch.
	for _, k := range []string{"t.lance/_versions/18446744073709551613.manifest", "t.lance/data/a.lance",
		"t.lance/tree/b0007/_versions/18446744073709551612.manifest", "t.lance/tree/b0007/data/x.lance", "t.lance/_refs/tags/t1.json"} {
		put(t, s, k, "x")
	}
	want := []string{}
	for i := range 1000 {
		name := fmt.Sprintf("b%04d", i)
		meta := map[string]string{"session": fmt.Sprintf("s%d", i%100), "agent": fmt.Sprintf("a%d", i%7)}
		switch {
		case i%500 == 7: // session s7, ready, adopted by retain
			meta[lifecycle.StateKey], meta[lifecycle.OpKey], meta[lifecycle.SourceKey] = "ready", "op-1", "main@2"
		case i%500 == 107: // session s7, creating: hidden by default
			meta[lifecycle.StateKey], meta[lifecycle.OpKey], meta[lifecycle.SourceKey] = "creating", "op-2", "main@2"
			meta[lifecycle.OwnerKey] = "h/12/boot/99"
		}
		if i%100 == 7 && i%500 != 107 {
			want = append(want, name) // session s7 and ready (adopted, or a plain Lance file)
		}
		put(t, s, "t.lance/_refs/branches/"+name+".json", branchFile("", 2, meta))
	}
	ds, _ := lance.Open(s, "t.lance")
	before := counting.Counts()
	rec.keys = nil

	got, err := List(branchCtx, ds, ListOptions{Filter: refmeta.Filter{"session": "s7"}})
	if err != nil {
		t.Fatal(err)
	}
	c := counting.Counts()
	c.Get -= before.Get
	c.List -= before.List
	c.Put -= before.Put
	c.Stat -= before.Stat
	if c.Get != 1000 || c.List != 1 || c.Put != 0 || c.Stat != 0 || c.Delete != 0 || c.DeleteMany != 0 || c.Gate != 0 {
		t.Fatalf("requests: %+v (want 1 listing and 1,000 reads)", c)
	}
	for _, k := range rec.keys {
		if k != "list t.lance/_refs/branches/" && !(strings.HasPrefix(k, "get t.lance/_refs/branches/") && strings.HasSuffix(k, ".json")) {
			t.Fatalf("read outside the branch files: %s", k)
		}
	}
	var names []string
	for _, b := range got.Branches {
		names = append(names, b.Name)
		if b.Metadata["session"] != "s7" || b.State != lifecycle.Ready {
			t.Fatalf("%s: %+v", b.Name, b)
		}
	}
	if !reflect.DeepEqual(names, want) || got.Hidden != 2 || got.Total != 1000 || len(want) != 8 {
		t.Fatalf("found %v (hidden %d), want %v", names, got.Hidden, want)
	}

	rec.keys = nil
	all, err := List(branchCtx, ds, ListOptions{Filter: refmeta.Filter{"session": "s7", lifecycle.StateKey: "creating"}, All: true})
	if err != nil || len(all.Branches) != 2 || all.Hidden != 0 || all.Branches[0].Name != "b0107" || all.Branches[0].Lifecycle.Owner.PID != 12 {
		t.Fatalf("--all creating: %+v %v", all, err)
	}
	for _, k := range rec.keys {
		if !strings.Contains(k, "t.lance/_refs/branches/") {
			t.Fatalf("--all read outside the branch files: %s", k)
		}
	}
}

// Lifecycle, lineage, states and show on a small table.
func TestListAndShowBranches(t *testing.T) {
	s, err := storage.NewStore(branchCtx, "memory", memstore.New())
	if err != nil {
		t.Fatal(err)
	}
	ready := map[string]string{"session": "s1", lifecycle.StateKey: "ready", lifecycle.OpKey: "op-a", lifecycle.SourceKey: "main@2", lifecycle.AtKey: "2026-11-30T10:00:00Z"}
	put(t, s, "t.lance/_refs/branches/exp.json", branchFile("", 2, ready))
	put(t, s, "t.lance/_refs/branches/exp%2Fdeep.json", branchFile("exp", 3, map[string]string{"agent": "a1"}))
	put(t, s, "t.lance/_refs/branches/leaf.json", branchFile("exp/deep", 4, nil))
	put(t, s, "t.lance/_refs/branches/gone.json", branchFile("", 1, map[string]string{lifecycle.StateKey: "deleting", lifecycle.OpKey: "op-d", lifecycle.OwnerKey: "host/a/9/boot/1", lifecycle.SourceKey: "main@1"}))
	put(t, s, "t.lance/_refs/branches/orphan.json", branchFile("vanished", 5, nil))
	put(t, s, "t.lance/_refs/branches/odd.json", branchFile("", 1, map[string]string{lifecycle.StateKey: "half"}))
	put(t, s, "t.lance/tree/exp/_versions/18446744073709551612.manifest", "m") // v3
	put(t, s, "t.lance/tree/exp/_versions/18446744073709551610.manifest", "m") // v5
	ds, _ := lance.Open(s, "t.lance")

	l, err := List(branchCtx, ds, ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, b := range l.Branches {
		names = append(names, b.Name)
	}
	if !reflect.DeepEqual(names, []string{"exp", "exp/deep", "leaf", "orphan"}) || l.Hidden != 2 || l.Total != 6 {
		t.Fatalf("default listing: %v hidden %d", names, l.Hidden)
	}
	leaf := l.Branches[2]
	if !reflect.DeepEqual(leaf.Lineage, []LineageStep{{"main", 2, false}, {"exp", 3, false}, {"exp/deep", 4, false}}) || leaf.Lifecycle.Managed {
		t.Fatalf("leaf: %+v", leaf)
	}
	if o := l.Branches[3]; !reflect.DeepEqual(o.Lineage, []LineageStep{{"vanished", 5, true}}) {
		t.Fatalf("orphan: %+v", o.Lineage)
	}
	exp := l.Branches[0]
	if !maps.Equal(exp.Metadata, map[string]string{"session": "s1"}) || exp.Lifecycle.Source != "main@2" || exp.Lifecycle.Op != "op-a" ||
		!exp.Lifecycle.At.Equal(time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)) || exp.ParentBranch != "main" || exp.CreatedAt.Unix() != 1796054797 {
		t.Fatalf("exp: %+v", exp)
	}

	all, _ := List(branchCtx, ds, ListOptions{All: true})
	states := map[string]lifecycle.State{}
	for _, b := range all.Branches {
		states[b.Name] = b.State
	}
	if states["gone"] != lifecycle.Deleting || states["odd"] != lifecycle.Invalid || len(all.Branches) != 6 || all.Hidden != 0 {
		t.Fatalf("--all: %v", states)
	}
	if f, _ := List(branchCtx, ds, ListOptions{Filter: refmeta.Filter{lifecycle.StateKey: "ready"}}); len(f.Branches) != 4 {
		t.Fatalf("unmanaged branches match retain.state=ready: %+v", f.Branches)
	}

	d, err := Show(branchCtx, ds, "exp")
	if err != nil || d.Head == nil || *d.Head != 5 || !reflect.DeepEqual(d.Children, []lance.BranchRef{{Name: "exp/deep", Version: 3}}) {
		t.Fatalf("show exp: %+v %v", d, err)
	}
	d, err = Show(branchCtx, ds, "gone")
	if err != nil || d.State != lifecycle.Deleting || d.Head != nil || d.HeadError == "" || d.Lifecycle.Owner.Host != "host/a" {
		t.Fatalf("show gone: %+v %v", d, err)
	}
	if _, err := Show(branchCtx, ds, "nope"); !errors.Is(err, lance.ErrBranchNotFound) {
		t.Fatalf("show missing: %v", err)
	}
}

func TestBranchLifecycleKeys(t *testing.T) {
	o := lifecycle.Owner{Host: "h", PID: 42, BootID: "b-1", ProcessStart: "777"}
	if back, err := lifecycle.ParseOwner(o.String()); err != nil || back != o {
		t.Fatalf("owner round trip: %+v %v", back, err)
	}
	for _, bad := range []string{"", "h/1/b", "h/x/b/1", "/1/b/1", "h/0/b/1"} {
		if _, err := lifecycle.ParseOwner(bad); err == nil {
			t.Fatalf("owner %q accepted", bad)
		}
	}
	for in, want := range map[string]string{"main": "main", "main@3": "main@3", "exp/a@10": "exp/a@10"} {
		src, has, err := lifecycle.ParseFrom(in)
		if err != nil || (has && src.String() != want) || (!has && strings.Contains(in, "@")) {
			t.Fatalf("%s: %+v %v %v", in, src, has, err)
		}
	}
	for _, bad := range []string{"main@", "main@x", "a//b@1", "exp@-1", "@3"} {
		if _, _, err := lifecycle.ParseFrom(bad); !errors.Is(err, storage.ErrInvalidArgument) {
			t.Fatalf("from %q: %v", bad, err)
		}
	}
	at := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	m := lifecycle.Meta(map[string]string{"k": "v", "retain.old": "x"}, lifecycle.Creating, "op-1", &o, lifecycle.Source{Version: 3}, at)
	l, err := lifecycle.Parse(m)
	if err != nil || l.State != lifecycle.Creating || !l.Managed || l.Op != "op-1" || *l.Owner != o || l.Source != "main@3" || !l.At.Equal(at) || m["k"] != "v" || m["retain.old"] != "" {
		t.Fatalf("lifecycle: %+v %v %v", l, err, m)
	}
	if l, err := lifecycle.Parse(map[string]string{"k": "v"}); err != nil || l.State != lifecycle.Ready || l.Managed {
		t.Fatalf("unmanaged: %+v %v", l, err)
	}
	for _, bad := range []map[string]string{
		{lifecycle.StateKey: "half"},
		{lifecycle.OpKey: "x"},
		{lifecycle.StateKey: "deleting", lifecycle.OpKey: "x"},
		{lifecycle.StateKey: "creating", lifecycle.OwnerKey: o.String()},
		{lifecycle.StateKey: "ready", lifecycle.SourceKey: "main"},
		{lifecycle.StateKey: "ready", lifecycle.AtKey: "yesterday"},
		{lifecycle.StateKey: "ready", "retain.other": "1"},
	} {
		if _, err := lifecycle.Parse(bad); !errors.Is(err, lifecycle.ErrMalformed) {
			t.Fatalf("%v: %v", bad, err)
		}
	}
}
