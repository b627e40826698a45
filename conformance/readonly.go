package conformance

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"path/filepath"
	"sort"
	"strings"

	"github.com/retain-dev/retain/core/storage"
)

// caseReadOnly: an adapter opened read-only (storage.Location.ReadOnly, how
// inspect, claim status and checkpoint list|show open a store) writes
// nothing, at open included: the store is the same before the open and
// after the close. It declares itself read-only (every conditional
// capability none, no gates); it reads, stats and lists as a read-write
// open does; and the driver itself refuses every write-class call with
// permission denied, so a host that trusted the declaration alone would
// still be safe.
func caseReadOnly(t T, e *Env) {
	if !e.Shared() {
		t.Skipf("store %s lives inside one process: a second open of it is a new, empty store, with nothing to read", e.Loc)
	}
	s, ctx := e.Store, e.Ctx
	a := mustPut(t, s, "ro/a", []byte("alpha"), storage.PutOptions{})
	mustPut(t, s, "ro/b/c", []byte("beta"), storage.PutOptions{})
	before := storeState(t, e)
	loc := e.Loc
	loc.ReadOnly = true
	d, err := e.Config.Open(ctx, loc)
	if err != nil {
		t.Fatalf("opening %s read-only: %v", loc, err)
	}
	closed := false
	defer func() {
		if !closed {
			d.Close()
		}
	}()
	caps, err := d.Capabilities(ctx)
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case !caps.ReadOnly:
		t.Fatalf("opened with Location.ReadOnly, the adapter does not declare Capabilities.ReadOnly")
	case caps.CreateIfAbsent.Level != storage.LevelNone || caps.ReplaceIfVersion.Level != storage.LevelNone || caps.DeleteIfVersion.Level != storage.LevelNone:
		t.Fatalf("opened read-only, the adapter declares conditional writes: create %s, replace %s, delete %s", caps.CreateIfAbsent, caps.ReplaceIfVersion, caps.DeleteIfVersion)
	case len(caps.Gates) > 0:
		t.Fatalf("opened read-only, the adapter declares gates %v", caps.Gates)
	}
	sub, err := storage.Sub(d, e.Prefix)
	if err != nil {
		t.Fatal(err)
	}
	// Reads work and agree with the read-write open.
	r, err := sub.Get(ctx, "ro/a")
	if err != nil {
		t.Fatalf("read-only get: %v", err)
	}
	var body bytes.Buffer
	_, err = body.ReadFrom(r)
	r.Close()
	if err != nil || body.String() != "alpha" || r.Info.Version != a.Version {
		t.Fatalf("read-only get of ro/a: %q version %q (%v), want %q version %q", body.String(), r.Info.Version, err, "alpha", a.Version)
	}
	if st, err := sub.Stat(ctx, "ro/b/c"); err != nil || st.Size != 4 {
		t.Fatalf("read-only stat of ro/b/c: %+v, %v", st, err)
	}
	if page, err := sub.List(ctx, storage.ListOptions{Prefix: "ro/"}); err != nil || keysOf(page.Objects) != "ro/a,ro/b/c" {
		t.Fatalf("read-only list of ro/: %s, %v", keysOf(page.Objects), err)
	}
	// Every write is refused by the driver itself.
	denied := func(what string, err error) {
		t.Helper()
		wantKind(t, err, storage.ErrPermissionDenied, "opened read-only, "+what)
	}
	put := func(key string, opts storage.PutOptions) error {
		_, err := sub.Put(ctx, key, bytes.NewReader([]byte("written")), opts)
		return err
	}
	denied("an overwrite", put("ro/a", storage.PutOptions{}))
	denied("a put of a new key", put("ro/new", storage.PutOptions{}))
	denied("a create-if-absent", put("ro/new", storage.PutOptions{Mode: storage.PutCreateIfAbsent}))
	denied("a replace-if-version", put("ro/a", storage.PutOptions{Mode: storage.PutReplaceIfVersion, IfVersion: a.Version}))
	denied("a delete", sub.Delete(ctx, "ro/a", storage.DeleteOptions{}))
	denied("a delete-if-version", sub.Delete(ctx, "ro/a", storage.DeleteOptions{IfVersion: a.Version}))
	res, err := sub.DeleteMany(ctx, []string{"ro/a", "ro/b/c"})
	if err == nil {
		for _, r := range res {
			if r.Err == nil {
				t.Fatalf("opened read-only, a batch delete deleted %s", r.Key)
			}
			err = r.Err
		}
	}
	denied("a batch delete", err)
	gate := "metadata"
	if g := e.s.caps.Gates; len(g) > 0 {
		gate = g[0].Name
	}
	if l, err := d.AcquireGate(ctx, gate); err == nil {
		d.ReleaseGate(context.WithoutCancel(ctx), l)
		t.Fatalf("opened read-only, gate %s was acquired", gate)
	}
	closed = true
	if err := d.Close(); err != nil {
		t.Fatalf("closing the read-only open: %v", err)
	}
	after := storeState(t, e)
	if diff := diffStates(before, after); diff != "" {
		t.Fatalf("the read-only open changed the store:\n%s", diff)
	}
	wantBody(t, s, "ro/a", []byte("alpha"))
}

// storeState is what a read-only open must leave as it was: every object
// under the case's prefix (key, size, version), the first page of the
// store's top level (where an adapter would put reserved folders, lock
// files or probe objects) and, for a store on a filesystem, every file and
// directory under its root (an empty folder made at open lists as
// nothing).
func storeState(t T, e *Env) map[string]string {
	t.Helper()
	out := map[string]string{}
	objs, err := e.Store.List(e.Ctx, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		out["object "+o.Key] = fmt.Sprintf("%d bytes, version %s", o.Size, o.Version)
	}
	root, err := storage.NewStore(e.Ctx, e.Config.Adapter, e.s.root)
	if err != nil {
		t.Fatal(err)
	}
	page, err := root.ListPage(e.Ctx, storage.ListOptions{Delimiter: storage.Delimiter})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range page.Objects {
		out["top-level object "+o.Key] = fmt.Sprintf("%d bytes, version %s", o.Size, o.Version)
	}
	for _, f := range page.Folders {
		// Runs of the suite (this one and others sharing the store) come
		// and go at the top level; anything else is the adapter's.
		if !strings.HasPrefix(f, "conformance-") {
			out["top-level folder "+f] = ""
		}
	}
	if e.Loc.Scheme == "file" && e.Loc.Path != "" {
		filepath.WalkDir(e.Loc.Path, func(p string, de fs.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			rel, _ := filepath.Rel(e.Loc.Path, p)
			if strings.HasPrefix(filepath.ToSlash(rel), e.s.runPrefix+"/") && !strings.HasPrefix(filepath.ToSlash(rel), e.Prefix) {
				return nil // other cases' files
			}
			info, err := de.Info()
			if err != nil {
				return nil
			}
			out["file "+filepath.ToSlash(rel)] = fmt.Sprintf("%s %d bytes, modified %s", info.Mode(), info.Size(), info.ModTime().UTC().Format("15:04:05.000000000"))
			return nil
		})
	}
	return out
}

func diffStates(before, after map[string]string) string {
	var lines []string
	for k, v := range before {
		if w, ok := after[k]; !ok {
			lines = append(lines, "removed: "+k)
		} else if w != v {
			lines = append(lines, fmt.Sprintf("changed: %s (%s, now %s)", k, v, w))
		}
	}
	for k := range after {
		if _, ok := before[k]; !ok {
			lines = append(lines, "added: "+k)
		}
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}
