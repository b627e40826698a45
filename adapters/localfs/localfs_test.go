//go:build linux

package localfs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/storage/storagetest"
)

// --- helpers ------------------------------------------------------------

func openT(t *testing.T, root string, o openOptions) *Driver {
	t.Helper()
	d, err := openWith(root, o)
	if err != nil {
		t.Fatalf("open %s: %v", root, err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func newT(t *testing.T) (*Driver, string) {
	t.Helper()
	root := t.TempDir()
	return openT(t, root, openOptions{}), root
}

var bg = context.Background()

func putS(d *Driver, key, body string, mode storage.PutMode, ifv string) (storage.Info, error) {
	return d.Put(bg, key, strings.NewReader(body), storage.PutOptions{Mode: mode, IfVersion: ifv})
}

func readS(t *testing.T, d *Driver, key string) (string, storage.Info, error) {
	t.Helper()
	r, err := d.Get(bg, key)
	if err != nil {
		return "", storage.Info{}, err
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("read %q: %v", key, err)
	}
	return string(b), r.Info, nil
}

func mustRead(t *testing.T, d *Driver, key string) (string, storage.Info) {
	t.Helper()
	s, info, err := readS(t, d, key)
	if err != nil {
		t.Fatalf("get %q: %v", key, err)
	}
	return s, info
}

// tree lists every path under root (relative), except the reserved dir.
func tree(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			t.Fatalf("walk: %v", err)
		}
		rel, _ := filepath.Rel(root, p)
		if rel == "." {
			return nil
		}
		if rel == reservedDir {
			return filepath.SkipDir
		}
		out = append(out, rel)
		return nil
	})
	return out
}

func listAll(t *testing.T, d *Driver, prefix string) []string {
	t.Helper()
	var keys []string
	opts := storage.ListOptions{Prefix: prefix}
	for {
		page, err := d.List(bg, opts)
		if err != nil {
			t.Fatalf("list %q: %v", prefix, err)
		}
		for _, o := range page.Objects {
			keys = append(keys, o.Key)
		}
		if !page.More {
			return keys
		}
		opts.StartAfter = keys[len(keys)-1]
	}
}

// --- open, capabilities -------------------------------------------------

func TestOpen(t *testing.T) {
	_, err := Open("relative/path")
	storagetest.WantKind(t, "relative root", err, storage.ErrInvalidArgument)

	parent := t.TempDir()
	// A missing root is refused and not created: a mistyped path must not
	// become an empty store.
	_, err = Open(filepath.Join(parent, "new"))
	storagetest.WantKind(t, "missing root", err, storage.ErrNotFound)
	if _, serr := os.Stat(filepath.Join(parent, "new")); !os.IsNotExist(serr) {
		t.Fatalf("open created the missing root: %v", serr)
	}
	_, err = Open(filepath.Join(parent, "missing", "root"))
	storagetest.WantKind(t, "missing parent", err, storage.ErrNotFound)

	file := filepath.Join(parent, "file")
	os.WriteFile(file, nil, 0o644)
	_, err = Open(file)
	storagetest.WantKind(t, "root is a file", err, storage.ErrInvalidArgument)

	// Through the storage.Adapter.
	loc, err := storage.ParseLocation("file://" + parent)
	if err != nil {
		t.Fatal(err)
	}
	drv, err := Adapter.Open(bg, loc)
	if err != nil {
		t.Fatalf("Adapter.Open: %v", err)
	}
	drv.Close()
	_, err = Adapter.Open(bg, storage.Location{Scheme: "s3", Bucket: "b"})
	storagetest.WantKind(t, "wrong scheme", err, storage.ErrInvalidArgument)
	loc.Options = map[string]string{"bogus": "1"}
	_, err = Adapter.Open(bg, loc)
	storagetest.WantKind(t, "unknown option", err, storage.ErrInvalidArgument)

	d, _ := newT(t)
	d.Close()
	_, err = d.Stat(bg, "x")
	storagetest.WantKind(t, "stat after close", err, storage.ErrInvalidArgument)
}

func TestCapabilitiesLocal(t *testing.T) {
	d, _ := newT(t)
	c, err := d.Capabilities(bg)
	if err != nil {
		t.Fatal(err)
	}
	if c.CreateIfAbsent.Level != storage.LevelNative || c.CreateIfAbsent.Reach() != storage.ScopeGlobal {
		t.Errorf("create-if-absent = %+v, want native", c.CreateIfAbsent)
	}
	for name, cp := range map[string]storage.Capability{"replace": c.ReplaceIfVersion, "delete": c.DeleteIfVersion} {
		if cp.Level != storage.LevelGated || cp.Scope != storage.ScopeHost || cp.Gate != stripeGate {
			t.Errorf("%s-if-version = %+v, want gated(%s, host)", name, cp, stripeGate)
		}
	}
	if g, ok := c.Gate(MetadataGate); !ok || g.Scope != storage.ScopeHost {
		t.Errorf("gates = %+v, want %q with host scope", c.Gates, MetadataGate)
	}
	if !c.OrderedList || !c.ListAfterWrite || c.Limits.MaxDeleteBatch != 1000 || c.Limits.MaxListPage != 1000 {
		t.Errorf("list/limits = %v %v %+v", c.OrderedList, c.ListAfterWrite, c.Limits)
	}
	if !strings.Contains(strings.Join(c.Notes, "\n"), "statfs magic 0x") {
		t.Errorf("notes do not name the filesystem type: %q", c.Notes)
	}
	if !d.xattr {
		t.Errorf("user xattrs do not work on %s: the version tokens lose their random part", d.fs)
	}
	// The core accepts it and round-trips through the portable Store.
	s, err := storage.NewStore(bg, "localfs", d)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutBytes(bg, "x/y", []byte("hi"), storage.PutOptions{Mode: storage.PutCreateIfAbsent}); err != nil {
		t.Fatal(err)
	}
	b, _, err := s.ReadAll(bg, "x/y")
	if err != nil || string(b) != "hi" {
		t.Fatalf("store read = %q, %v", b, err)
	}
	if err := s.WithGates(bg, storage.ScopeHost, []string{MetadataGate}, func(context.Context) error { return nil }); err != nil {
		t.Fatalf("WithGates: %v", err)
	}
}

// --- keys -----------------------------------------------------------------

func TestInvalidKeys(t *testing.T) {
	d, root := newT(t)
	bad := []string{
		"", "/a", ".", "..", "a/./b", "a/../b", "../escape", "a/..", "a//b", "a/",
		"a\x00b", "a\x01b", "a\x7fb", "a\\b", strings.Repeat("x", storage.MaxKeyBytes+1),
		".retain-localfs", ".retain-localfs/locks/00.lock", ".retain-tmp-1", "a/.retain-tmp-x", "a/.retain-tmp-x/b",
	}
	for _, k := range bad {
		_, err := d.Get(bg, k)
		storagetest.WantKind(t, fmt.Sprintf("get %q", k), err, storage.ErrInvalidArgument)
		_, err = d.Stat(bg, k)
		storagetest.WantKind(t, fmt.Sprintf("stat %q", k), err, storage.ErrInvalidArgument)
		for _, m := range []storage.PutMode{storage.PutOverwrite, storage.PutCreateIfAbsent} {
			_, err = putS(d, k, "x", m, "")
			storagetest.WantKind(t, fmt.Sprintf("put %v %q", m, k), err, storage.ErrInvalidArgument)
		}
		_, err = putS(d, k, "x", storage.PutReplaceIfVersion, "v")
		storagetest.WantKind(t, fmt.Sprintf("replace %q", k), err, storage.ErrInvalidArgument)
		storagetest.WantKind(t, fmt.Sprintf("delete %q", k), d.Delete(bg, k, storage.DeleteOptions{}), storage.ErrInvalidArgument)
		storagetest.WantKind(t, fmt.Sprintf("delete-if %q", k), d.Delete(bg, k, storage.DeleteOptions{IfVersion: "v"}), storage.ErrInvalidArgument)
		res, err := d.DeleteMany(bg, []string{k})
		if err != nil || len(res) != 1 {
			t.Fatalf("delete-many %q: %v %v", k, res, err)
		}
		storagetest.WantKind(t, fmt.Sprintf("delete-many %q", k), res[0].Err, storage.ErrInvalidArgument)
	}
	// The reserved-name errors name the rule.
	_, err := putS(d, ".retain-localfs/x", "x", storage.PutOverwrite, "")
	if !strings.Contains(err.Error(), "reserved") {
		t.Errorf("reserved dir error does not name the rule: %v", err)
	}
	_, err = putS(d, "a/.retain-tmp-x", "x", storage.PutOverwrite, "")
	if !strings.Contains(err.Error(), "reserved") {
		t.Errorf("temp name error does not name the rule: %v", err)
	}
	for _, p := range []string{"/a", "a//", "a\\"} {
		_, err := d.List(bg, storage.ListOptions{Prefix: p})
		storagetest.WantKind(t, fmt.Sprintf("list %q", p), err, storage.ErrInvalidArgument)
	}
	_, err = d.List(bg, storage.ListOptions{PageSize: -1})
	storagetest.WantKind(t, "negative page size", err, storage.ErrInvalidArgument)
	if got := tree(t, root); len(got) != 0 {
		t.Fatalf("invalid keys wrote %v", got)
	}
	// A segment longer than the filesystem allows is a limit, not a crash.
	_, err = putS(d, strings.Repeat("y", 300), "x", storage.PutOverwrite, "")
	storagetest.WantKind(t, "300-byte segment", err, storage.ErrLimitExceeded)
}

// --- symlinks -------------------------------------------------------------

func TestSymlinkDirectoryRefused(t *testing.T) {
	d, root := newT(t)
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "x"), []byte("secret"), 0o644)
	os.MkdirAll(filepath.Join(root, "a"), 0o755)
	for _, link := range []string{"evil", "a/evil"} {
		if err := os.Symlink(outside, filepath.Join(root, link)); err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{link + "/x", link + "/new", link + "/sub/new"} {
			for _, m := range []storage.PutMode{storage.PutOverwrite, storage.PutCreateIfAbsent} {
				_, err := putS(d, k, "pwned", m, "")
				storagetest.WantKind(t, fmt.Sprintf("put %v %q", m, k), err, storage.ErrPermissionDenied)
				if !strings.Contains(err.Error(), "symbolic link") || !strings.Contains(err.Error(), k) {
					t.Errorf("error does not name the key and the symlink: %v", err)
				}
			}
			_, err := putS(d, k, "pwned", storage.PutReplaceIfVersion, "v")
			storagetest.WantKind(t, "replace "+k, err, storage.ErrPermissionDenied)
			_, _, err = readS(t, d, k)
			storagetest.WantKind(t, "get "+k, err, storage.ErrPermissionDenied)
			_, err = d.Stat(bg, k)
			storagetest.WantKind(t, "stat "+k, err, storage.ErrPermissionDenied)
			storagetest.WantKind(t, "delete "+k, d.Delete(bg, k, storage.DeleteOptions{}), storage.ErrPermissionDenied)
			storagetest.WantKind(t, "delete-if "+k, d.Delete(bg, k, storage.DeleteOptions{IfVersion: "v"}), storage.ErrPermissionDenied)
		}
		// Listing any range that holds the link refuses, naming it; so
		// does a prefix through it.
		for _, p := range []string{"", link, link + "/", link + "/x", link + "/sub/"} {
			wantListRefused(t, d, p, link, "symbolic link")
		}
	}
	ents, _ := os.ReadDir(outside)
	if len(ents) != 1 || ents[0].Name() != "x" {
		t.Fatalf("outside directory changed: %v", ents)
	}
	if b, _ := os.ReadFile(filepath.Join(outside, "x")); string(b) != "secret" {
		t.Fatalf("outside file changed: %q", b)
	}
}

func TestSymlinkFileRefused(t *testing.T) {
	d, root := newT(t)
	outside := filepath.Join(t.TempDir(), "target")
	os.WriteFile(outside, []byte("secret"), 0o644)
	os.Symlink(outside, filepath.Join(root, "f"))
	for _, m := range []storage.PutMode{storage.PutOverwrite, storage.PutCreateIfAbsent} {
		_, err := putS(d, "f", "pwned", m, "")
		storagetest.WantKind(t, fmt.Sprintf("put %v", m), err, storage.ErrPermissionDenied)
	}
	_, err := putS(d, "f", "pwned", storage.PutReplaceIfVersion, "v")
	storagetest.WantKind(t, "replace", err, storage.ErrPermissionDenied)
	_, _, err = readS(t, d, "f")
	storagetest.WantKind(t, "get", err, storage.ErrPermissionDenied)
	_, err = d.Stat(bg, "f")
	storagetest.WantKind(t, "stat", err, storage.ErrPermissionDenied)
	storagetest.WantKind(t, "delete", d.Delete(bg, "f", storage.DeleteOptions{}), storage.ErrPermissionDenied)
	res, _ := d.DeleteMany(bg, []string{"f"})
	storagetest.WantKind(t, "delete-many", res[0].Err, storage.ErrPermissionDenied)
	if fi, err := os.Lstat(filepath.Join(root, "f")); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		t.Fatalf("the symlink itself was changed: %v %v", fi, err)
	}
	if b, _ := os.ReadFile(outside); string(b) != "secret" {
		t.Fatalf("symlink target changed: %q", b)
	}
	wantListRefused(t, d, "", "f", "symbolic link")
	wantListRefused(t, d, "f", "f", "symbolic link")
	if b, _ := os.ReadFile(outside); string(b) != "secret" {
		t.Fatalf("symlink target changed: %q", b)
	}
}

// wantListRefused: listing prefix (page by page) refuses with permission
// denied, naming the entry at path and the next step, and returns no keys.
func wantListRefused(t *testing.T, d *Driver, prefix, path, what string) {
	t.Helper()
	opts := storage.ListOptions{Prefix: prefix, PageSize: 1}
	for i := 0; ; i++ {
		page, err := d.List(bg, opts)
		if err != nil {
			storagetest.WantKind(t, fmt.Sprintf("list %q", prefix), err, storage.ErrPermissionDenied)
			var ce *storage.Error
			if !errors.As(err, &ce) || ce.Key != path || !strings.Contains(err.Error(), fmt.Sprintf("%q", path)) ||
				!strings.Contains(err.Error(), what) || !strings.Contains(err.Error(), fmt.Sprintf("listing of %q refuses", prefix)) {
				t.Fatalf("list %q: the error does not name %q as a %s and the listing: %v", prefix, path, what, err)
			}
			if what == "symbolic link" && !strings.Contains(err.Error(), "replace the link with the real folder, or point retain at the real location") {
				t.Fatalf("list %q: the error gives no next step: %v", prefix, err)
			}
			return
		}
		if !page.More {
			t.Fatalf("list %q left out %s %q and succeeded", prefix, what, path)
		}
		opts.StartAfter = page.Objects[len(page.Objects)-1].Key
	}
}

// TestListRefusesSymlinksAndSpecialFiles: a listing never silently leaves
// out part of the tree. A symlink (to a folder or a file, inside the root or
// outside, dangling) or a fifo in the listed range refuses the listing,
// naming it, wherever it sorts (first, between keys, last, on a later
// page); outside the range (another prefix, before StartAfter) it does not
// matter; the adapter's own temp files and reserved folder stay silently
// skipped. Nothing is followed, changed or removed.
func TestListRefusesSymlinksAndSpecialFiles(t *testing.T) {
	d, root := newT(t)
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "x"), []byte("secret"), 0o644)
	for _, k := range []string{"a/1", "a/3", "a/5/x", "b/1", "c/1"} {
		storagetest.MustPut(t, d, k, "v")
	}
	// Own names: skipped, never refused.
	os.WriteFile(filepath.Join(root, "a/.retain-tmp-0123"), []byte("partial"), 0o644)
	os.Symlink(outside, filepath.Join(root, "a/.retain-tmp-link"))
	os.Symlink(outside, filepath.Join(root, ".retain-tmp-toplink"))
	os.MkdirAll(filepath.Join(root, "empty/dir"), 0o755)
	if got := listAll(t, d, ""); strings.Join(got, " ") != "a/1 a/3 a/5/x b/1 c/1" {
		t.Fatalf("list = %v", got)
	}

	for _, c := range []struct {
		name, path string
		make       func(p string) error
		what       string
	}{
		{"dir link outside", "b/2", func(p string) error { return os.Symlink(outside, p) }, "symbolic link"},
		{"file link outside", "b/2", func(p string) error { return os.Symlink(filepath.Join(outside, "x"), p) }, "symbolic link"},
		{"link inside the root", "b/2", func(p string) error { return os.Symlink(filepath.Join(root, "a"), p) }, "symbolic link"},
		{"dangling link", "b/2", func(p string) error { return os.Symlink(filepath.Join(outside, "gone"), p) }, "symbolic link"},
		{"first in its folder", "b/0", func(p string) error { return os.Symlink(outside, p) }, "symbolic link"},
		{"last in its folder", "b/9", func(p string) error { return os.Symlink(outside, p) }, "symbolic link"},
		{"fifo", "b/2", func(p string) error { return syscall.Mkfifo(p, 0o644) }, "not a regular file"},
		{"socket", "b/2", func(p string) error {
			fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
			if err != nil {
				return err
			}
			defer syscall.Close(fd)
			return syscall.Bind(fd, &syscall.SockaddrUnix{Name: p})
		}, "not a regular file"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(root, c.path)
			if err := c.make(p); err != nil {
				t.Fatal(err)
			}
			defer os.Remove(p)
			for _, prefix := range []string{"", "b", "b/", c.path} {
				wantListRefused(t, d, prefix, c.path, c.what)
			}
			// Outside the listed range it does not matter.
			for prefix, want := range map[string]string{"a/": "a/1 a/3 a/5/x", "c": "c/1", "b/1": "b/1", "a": "a/1 a/3 a/5/x"} {
				if got := listAll(t, d, prefix); strings.Join(got, " ") != want {
					t.Fatalf("list %q = %v, want %s", prefix, got, want)
				}
			}
			// StartAfter past it: an earlier page already met it.
			page, err := d.List(bg, storage.ListOptions{Prefix: "b/", StartAfter: "b/90"})
			if err != nil || len(page.Objects) != 0 {
				t.Fatalf("list after the entry: %v %v", page.Objects, err)
			}
			// Reads, writes and deletes of the entry are refused or see no
			// object; nothing was followed or changed.
			if c.what == "symbolic link" {
				storagetest.WantKind(t, "delete", d.Delete(bg, c.path, storage.DeleteOptions{}), storage.ErrPermissionDenied)
				storagetest.WantKind(t, "delete under", d.Delete(bg, c.path+"/x", storage.DeleteOptions{}), storage.ErrPermissionDenied)
				if fi, err := os.Lstat(p); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
					t.Fatalf("the link was changed: %v %v", fi, err)
				}
			}
			if b, _ := os.ReadFile(filepath.Join(outside, "x")); string(b) != "secret" {
				t.Fatalf("outside file changed: %q", b)
			}
			if ents, _ := os.ReadDir(outside); len(ents) != 1 {
				t.Fatalf("outside directory changed: %v", ents)
			}
		})
	}

	// A symlinked directory on the prefix's own path refuses too, naming
	// the link, however deep the prefix goes through it.
	if err := os.Symlink(outside, filepath.Join(root, "a/5/linked")); err != nil {
		t.Fatal(err)
	}
	for _, prefix := range []string{"a/5/linked/", "a/5/linked/sub/", "a/5/linked/sub/x"} {
		wantListRefused(t, d, prefix, "a/5/linked", "symbolic link")
	}
	if got := listAll(t, d, "b/"); strings.Join(got, " ") != "b/1" {
		t.Fatalf("list b/ = %v", got)
	}
	// A page that ends before the link succeeds; the next one refuses.
	page, err := d.List(bg, storage.ListOptions{Prefix: "a/", PageSize: 1})
	if err != nil || len(page.Objects) != 1 || page.Objects[0].Key != "a/1" || !page.More {
		t.Fatalf("first page: %v %v", page, err)
	}
	wantListRefused(t, d, "a/", "a/5/linked", "symbolic link")
	// Opened read-only the listing refuses the same way.
	ro := openT(t, root, openOptions{readOnly: true})
	wantListRefused(t, ro, "", "a/5/linked", "symbolic link")
}

// --- put modes --------------------------------------------------------------

func TestPutModes(t *testing.T) {
	d, root := newT(t)
	const k = "dir/sub/obj"

	// create-if-absent
	i1, err := putS(d, k, "one", storage.PutCreateIfAbsent, "")
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "dir/sub/obj")); string(b) != "one" {
		t.Fatalf("file layout: <root>/%s holds %q", k, b)
	}
	if i1.Key != k || i1.Size != 3 || i1.Version == "" {
		t.Fatalf("info = %+v", i1)
	}
	_, err = putS(d, k, "two", storage.PutCreateIfAbsent, "")
	storagetest.WantKind(t, "create over existing", err, storage.ErrAlreadyExists)
	if s, info := mustRead(t, d, k); s != "one" || info.Version != i1.Version {
		t.Fatalf("losing create changed the object: %q %+v", s, info)
	}

	// replace-if-version
	_, err = putS(d, k, "two", storage.PutReplaceIfVersion, "not-the-version")
	storagetest.WantKind(t, "replace wrong version", err, storage.ErrPreconditionFailed)
	if s, _ := mustRead(t, d, k); s != "one" {
		t.Fatalf("failed replace wrote %q", s)
	}
	i2, err := putS(d, k, "two", storage.PutReplaceIfVersion, i1.Version)
	if err != nil {
		t.Fatal(err)
	}
	if i2.Version == i1.Version {
		t.Fatal("replace kept the version")
	}
	_, err = putS(d, k, "three", storage.PutReplaceIfVersion, i1.Version)
	storagetest.WantKind(t, "replace with the old version", err, storage.ErrPreconditionFailed)
	_, err = putS(d, "dir/missing", "x", storage.PutReplaceIfVersion, i1.Version)
	storagetest.WantKind(t, "replace missing", err, storage.ErrNotFound)
	_, err = putS(d, "nodir/missing", "x", storage.PutReplaceIfVersion, i1.Version)
	storagetest.WantKind(t, "replace missing dir", err, storage.ErrNotFound)
	if _, err := os.Stat(filepath.Join(root, "nodir")); !os.IsNotExist(err) {
		t.Fatalf("replace of a missing key created its directory: %v", err)
	}

	// invalid options
	_, err = putS(d, k, "x", storage.PutOverwrite, "v")
	storagetest.WantKind(t, "overwrite with IfVersion", err, storage.ErrInvalidArgument)
	_, err = putS(d, k, "x", storage.PutCreateIfAbsent, "v")
	storagetest.WantKind(t, "create with IfVersion", err, storage.ErrInvalidArgument)
	_, err = putS(d, k, "x", storage.PutReplaceIfVersion, "")
	storagetest.WantKind(t, "replace without IfVersion", err, storage.ErrInvalidArgument)
	_, err = putS(d, k, "x", storage.PutMode(9), "")
	storagetest.WantKind(t, "unknown mode", err, storage.ErrInvalidArgument)

	// overwrite, then stat and get agree
	i3 := storagetest.MustPut(t, d, k, "three!")
	st, err := d.Stat(bg, k)
	if err != nil || st != i3 {
		t.Fatalf("stat = %+v %v, put returned %+v", st, err, i3)
	}
	if s, info := mustRead(t, d, k); s != "three!" || info != i3 {
		t.Fatalf("get = %q %+v, put returned %+v", s, info, i3)
	}

	// delete-if-version
	storagetest.WantKind(t, "delete wrong version", d.Delete(bg, k, storage.DeleteOptions{IfVersion: i2.Version}), storage.ErrPreconditionFailed)
	if s, _ := mustRead(t, d, k); s != "three!" {
		t.Fatal("failed delete-if-version changed the object")
	}
	if err := d.Delete(bg, k, storage.DeleteOptions{IfVersion: i3.Version}); err != nil {
		t.Fatal(err)
	}
	_, _, err = readS(t, d, k)
	storagetest.WantKind(t, "get deleted", err, storage.ErrNotFound)
	_, err = d.Stat(bg, k)
	storagetest.WantKind(t, "stat deleted", err, storage.ErrNotFound)
	storagetest.WantKind(t, "delete-if missing", d.Delete(bg, k, storage.DeleteOptions{IfVersion: i3.Version}), storage.ErrNotFound)
	if err := d.Delete(bg, k, storage.DeleteOptions{}); err != nil {
		t.Fatalf("unconditional delete of a missing key: %v", err)
	}
	if err := d.Delete(bg, "no/such/dir/k", storage.DeleteOptions{}); err != nil {
		t.Fatalf("unconditional delete under a missing dir: %v", err)
	}
	// the emptied directories were pruned
	if got := tree(t, root); len(got) != 0 {
		t.Fatalf("left behind %v", got)
	}

	// empty body
	ie, err := putS(d, "empty", "", storage.PutCreateIfAbsent, "")
	if err != nil || ie.Size != 0 {
		t.Fatalf("empty object: %+v %v", ie, err)
	}
	if s, _ := mustRead(t, d, "empty"); s != "" {
		t.Fatalf("empty object read %q", s)
	}
}

func TestKeyAndDirectoryConflict(t *testing.T) {
	d, _ := newT(t)
	storagetest.MustPut(t, d, "a", "file")
	for _, m := range []storage.PutMode{storage.PutOverwrite, storage.PutCreateIfAbsent} {
		_, err := putS(d, "a/b", "x", m, "")
		storagetest.WantKind(t, "put under an object", err, storage.ErrInvalidArgument)
	}
	_, _, err := readS(t, d, "a/b")
	storagetest.WantKind(t, "get under an object", err, storage.ErrNotFound)
	if err := d.Delete(bg, "a/b", storage.DeleteOptions{}); err != nil {
		t.Fatalf("delete under an object: %v", err)
	}

	storagetest.MustPut(t, d, "x/y", "deep")
	for _, m := range []storage.PutMode{storage.PutOverwrite, storage.PutCreateIfAbsent} {
		_, err := putS(d, "x", "x", m, "")
		storagetest.WantKind(t, fmt.Sprintf("put %v over a directory", m), err, storage.ErrInvalidArgument)
	}
	_, _, err = readS(t, d, "x")
	storagetest.WantKind(t, "get a directory", err, storage.ErrNotFound)
	// An empty directory is not a key and makes room for the object.
	for i, m := range []storage.PutMode{storage.PutOverwrite, storage.PutCreateIfAbsent} {
		k := fmt.Sprintf("empty%d", i)
		os.MkdirAll(filepath.Join(d.root, k), 0o755)
		if _, err := putS(d, k, "ok", m, ""); err != nil {
			t.Fatalf("put %v over an empty directory: %v", m, err)
		}
	}
	if err := d.Delete(bg, "x", storage.DeleteOptions{}); err != nil {
		t.Fatalf("delete of a directory name: %v", err)
	}
	if s, _ := mustRead(t, d, "x/y"); s != "deep" {
		t.Fatal("x/y changed")
	}
}

func TestVersionChangesOnEveryWrite(t *testing.T) {
	for _, o := range []openOptions{{}, {noXattr: true}} {
		t.Run(fmt.Sprintf("noXattr=%v", o.noXattr), func(t *testing.T) {
			root := t.TempDir()
			d := openT(t, root, o)
			seen := map[string]int{}
			prev := ""
			for i := 0; i < 50; i++ {
				info := storagetest.MustPut(t, d, "v", "same bytes")
				if o.noXattr {
					if !strings.HasPrefix(info.Version, "-.") {
						t.Fatalf("version %q has an xattr part with xattrs off", info.Version)
					}
				} else if strings.HasPrefix(info.Version, "-.") {
					t.Fatalf("version %q has no xattr part", info.Version)
				}
				if info.Version == prev {
					t.Fatalf("write %d kept version %q", i, prev)
				}
				if !o.noXattr {
					if j, ok := seen[info.Version]; ok {
						t.Fatalf("write %d repeated the version of write %d", i, j)
					}
				}
				seen[info.Version] = i
				prev = info.Version
			}
			// A program that rewrites the file in place (same size) also
			// changes the version.
			before, _ := d.Stat(bg, "v")
			time.Sleep(10 * time.Millisecond)
			if err := os.WriteFile(filepath.Join(root, "v"), []byte("SAME BYTES"), 0o644); err != nil {
				t.Fatal(err)
			}
			after, _ := d.Stat(bg, "v")
			if before.Version == after.Version {
				t.Fatalf("in-place rewrite kept version %q", after.Version)
			}
			_, err := putS(d, "v", "x", storage.PutReplaceIfVersion, before.Version)
			storagetest.WantKind(t, "replace after a foreign write", err, storage.ErrPreconditionFailed)
			// Reading does not change it.
			mustRead(t, d, "v")
			if again, _ := d.Stat(bg, "v"); again.Version != after.Version {
				t.Fatal("a read changed the version")
			}
		})
	}
}

// --- list -------------------------------------------------------------------

func TestListOrderAndPaging(t *testing.T) {
	d, root := newT(t)
	keys := []string{"a.b", "a/b/c", "a/b.c", "a/bc", "a0", "a-1", "a~", "b", "a/b/d/e", "a/b-", "c/d", "a/ab"}
	for _, k := range keys {
		storagetest.MustPut(t, d, k, "body of "+k)
	}
	// Things that are not keys: temp files, the reserved dir, empty
	// directories. (Symlinks and special files refuse the listing:
	// TestListRefusesSymlinksAndSpecialFiles.)
	os.WriteFile(filepath.Join(root, "a/.retain-tmp-0123"), []byte("partial"), 0o644)
	os.WriteFile(filepath.Join(root, ".retain-tmp-top"), []byte("partial"), 0o644)
	os.MkdirAll(filepath.Join(root, "empty/dir"), 0o755)

	sorted := append([]string(nil), keys...)
	sort.Strings(sorted)
	if got := listAll(t, d, ""); strings.Join(got, " ") != strings.Join(sorted, " ") {
		t.Fatalf("list order\n got %q\nwant %q", got, sorted)
	}
	syscall.Mkfifo(filepath.Join(root, "fifo"), 0o644)
	_, _, err := readS(t, d, "fifo")
	storagetest.WantKind(t, "get of a fifo", err, storage.ErrNotFound)
	os.Remove(filepath.Join(root, "fifo"))

	// Every prefix, StartAfter and page size against a brute-force answer.
	prefixes := map[string]bool{"": true, "zz": true, "a/b/": true, "a/b/d/": true, "a/q/": true}
	afters := map[string]bool{"": true, "a": true, "a/": true, "a/b": true, "a/b/": true, "a/b/c0": true, "zzz": true, "0": true}
	for _, k := range keys {
		for i := 1; i <= len(k); i++ {
			prefixes[k[:i]] = true
			afters[k[:i]] = true
		}
	}
	for p := range prefixes {
		if strings.Contains(p, "//") || strings.HasPrefix(p, "/") {
			continue
		}
		for a := range afters {
			var want []string
			for _, k := range sorted {
				if strings.HasPrefix(k, p) && k > a {
					want = append(want, k)
				}
			}
			for _, size := range []int{1, 2, 3, 1000} {
				var got []string
				opts := storage.ListOptions{Prefix: p, StartAfter: a, PageSize: size}
				for {
					page, err := d.List(bg, opts)
					if err != nil {
						t.Fatalf("list %+v: %v", opts, err)
					}
					if len(page.Objects) > size {
						t.Fatalf("list %+v: %d objects on a page of %d", opts, len(page.Objects), size)
					}
					for _, o := range page.Objects {
						got = append(got, o.Key)
						if o.Size != int64(len("body of "+o.Key)) || o.Version == "" {
							t.Fatalf("list info %+v", o)
						}
					}
					if !page.More {
						break
					}
					if len(page.Objects) == 0 {
						t.Fatalf("list %+v: empty page with More", opts)
					}
					opts.StartAfter = got[len(got)-1]
				}
				if strings.Join(got, " ") != strings.Join(want, " ") {
					t.Fatalf("list prefix %q after %q size %d\n got %q\nwant %q", p, a, size, got, want)
				}
			}
		}
	}
	// More is exact when the page is filled to the last key.
	page, _ := d.List(bg, storage.ListOptions{Prefix: "a/b/", PageSize: 2})
	if len(page.Objects) != 2 || page.More {
		t.Fatalf("exactly-full page: %d objects, More=%v", len(page.Objects), page.More)
	}
	// Listed info matches Stat.
	page, _ = d.List(bg, storage.ListOptions{Prefix: "a/b/c"})
	st, _ := d.Stat(bg, "a/b/c")
	if len(page.Objects) != 1 || page.Objects[0] != st {
		t.Fatalf("list info %+v, stat %+v", page.Objects, st)
	}
	// Listing the reserved dir by prefix shows nothing.
	if got := listAll(t, d, ".retain-localfs/"); len(got) != 0 {
		t.Fatalf("reserved dir listed: %v", got)
	}
	if got := listAll(t, d, ".ret"); len(got) != 0 {
		t.Fatalf("reserved names listed: %v", got)
	}
}

func TestListManyPages(t *testing.T) {
	d, _ := newT(t)
	var want []string
	for i := 0; i < 2500; i++ {
		k := fmt.Sprintf("m/%02d/%04d", i%7, i)
		want = append(want, k)
		if err := os.MkdirAll(filepath.Join(d.root, filepath.Dir(k)), 0o755); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(d.root, k), nil, 0o644) // written directly: fast
	}
	sort.Strings(want)
	page, err := d.List(bg, storage.ListOptions{PageSize: 5000})
	if err != nil || len(page.Objects) != 1000 || !page.More {
		t.Fatalf("page size is not clamped to 1000: %d %v %v", len(page.Objects), page.More, err)
	}
	page, _ = d.List(bg, storage.ListOptions{})
	if len(page.Objects) != 1000 {
		t.Fatalf("default page size %d", len(page.Objects))
	}
	if got := listAll(t, d, "m/"); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("paged listing of %d keys differs (got %d)", len(want), len(got))
	}
}

// --- delete -----------------------------------------------------------------

func TestDeleteManyAndPruning(t *testing.T) {
	d, root := newT(t)
	storagetest.MustPut(t, d, "p/q/r/s", "1")
	storagetest.MustPut(t, d, "p/q/x", "2")
	storagetest.MustPut(t, d, "p/y", "3")
	storagetest.MustPut(t, d, "z", "4")
	res, err := d.DeleteMany(bg, []string{"p/q/r/s", "missing", "../bad", "p/q/x", "z"})
	if err != nil {
		t.Fatal(err)
	}
	wantKeys := []string{"p/q/r/s", "missing", "../bad", "p/q/x", "z"}
	for i, r := range res {
		if r.Key != wantKeys[i] {
			t.Fatalf("result %d is for %q", i, r.Key)
		}
		if i == 2 {
			storagetest.WantKind(t, "bad key in batch", r.Err, storage.ErrInvalidArgument)
		} else if r.Err != nil {
			t.Fatalf("result %d: %v", i, r.Err)
		}
	}
	if got := tree(t, root); strings.Join(got, " ") != "p p/y" {
		t.Fatalf("after delete-many the tree is %v, want [p p/y]", got)
	}
	if got := listAll(t, d, ""); strings.Join(got, " ") != "p/y" {
		t.Fatalf("list = %v", got)
	}
	_, err = d.DeleteMany(bg, make([]string, 1001))
	storagetest.WantKind(t, "batch over the limit", err, storage.ErrLimitExceeded)
}

// A create racing with the pruning of its directory must not fail.
func TestCreateRacesPruning(t *testing.T) {
	d, _ := newT(t)
	var wg sync.WaitGroup
	errs := make(chan error, 1000)
	for g := 0; g < 2; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 300; i++ {
				k := fmt.Sprintf("prune/deep/dir/%d", g)
				if _, err := putS(d, k, "x", storage.PutCreateIfAbsent, ""); err != nil {
					errs <- fmt.Errorf("create %s #%d: %w", k, i, err)
					return
				}
				if err := d.Delete(bg, k, storage.DeleteOptions{}); err != nil {
					errs <- fmt.Errorf("delete %s #%d: %w", k, i, err)
					return
				}
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// --- gates ------------------------------------------------------------------

func TestGates(t *testing.T) {
	d, root := newT(t)
	other := openT(t, root, openOptions{}) // a second driver: another open file description

	l1, err := d.AcquireGate(bg, MetadataGate)
	if err != nil {
		t.Fatal(err)
	}
	for _, dd := range []*Driver{d, other} {
		ctx, cancel := context.WithTimeout(bg, 50*time.Millisecond)
		_, err = dd.AcquireGate(ctx, MetadataGate)
		cancel()
		storagetest.WantKind(t, "acquire of a held gate", err, storage.ErrTransient)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("timeout error does not wrap DeadlineExceeded: %v", err)
		}
	}
	storagetest.WantKind(t, "release with a wrong token", d.ReleaseGate(bg, storage.GateLease{Name: MetadataGate, Token: "nope"}), storage.ErrPreconditionFailed)
	storagetest.WantKind(t, "release from another driver", other.ReleaseGate(bg, l1), storage.ErrPreconditionFailed)

	got := make(chan storage.GateLease)
	go func() {
		l, err := other.AcquireGate(bg, MetadataGate)
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	select {
	case <-got:
		t.Fatal("a second holder took the gate while it was held")
	case <-time.After(50 * time.Millisecond):
	}
	if err := d.ReleaseGate(bg, l1); err != nil {
		t.Fatal(err)
	}
	l2 := <-got
	storagetest.WantKind(t, "double release", d.ReleaseGate(bg, l1), storage.ErrPreconditionFailed)
	if err := other.ReleaseGate(bg, l2); err != nil {
		t.Fatal(err)
	}

	_, err = d.AcquireGate(bg, "nope")
	storagetest.WantKind(t, "undeclared gate", err, storage.ErrUnsupported)
	storagetest.WantKind(t, "release undeclared gate", d.ReleaseGate(bg, storage.GateLease{Name: "nope", Token: "x"}), storage.ErrUnsupported)

	// Close releases a held gate.
	if _, err := other.AcquireGate(bg, MetadataGate); err != nil {
		t.Fatal(err)
	}
	other.Close()
	ctx, cancel := context.WithTimeout(bg, 2*time.Second)
	defer cancel()
	l3, err := d.AcquireGate(ctx, MetadataGate)
	if err != nil {
		t.Fatalf("gate still held after Close: %v", err)
	}
	d.ReleaseGate(bg, l3)
}

// --- untrusted filesystems ----------------------------------------------------

func TestUntrustedFilesystems(t *testing.T) {
	magics := map[string]uint32{"nfs": 0x6969, "cifs": 0xFF534D42, "smb2": 0xFE534D42, "smb": 0x517B, "fuse": 0x65735546, "9p": 0x01021997}
	for name, magic := range magics {
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			d := openT(t, root, openOptions{fsType: &magic})
			c, _ := d.Capabilities(bg)
			for f, cp := range map[string]storage.Capability{"create": c.CreateIfAbsent, "replace": c.ReplaceIfVersion, "delete": c.DeleteIfVersion} {
				if cp.Level != storage.LevelNone || !strings.Contains(cp.Reason, name) {
					t.Errorf("%s = %+v, want none with a reason naming %s", f, cp, name)
				}
			}
			if len(c.Gates) != 0 {
				t.Errorf("gates declared: %+v", c.Gates)
			}
			_, err := putS(d, "k/new", "x", storage.PutCreateIfAbsent, "")
			storagetest.WantKind(t, "create-if-absent", err, storage.ErrUnsupported)
			if got := tree(t, root); len(got) != 0 {
				t.Fatalf("unsupported create wrote %v", got)
			}
			storagetest.MustPut(t, d, "k/old", "x") // overwrite still works
			info, _ := d.Stat(bg, "k/old")
			_, err = putS(d, "k/old", "y", storage.PutReplaceIfVersion, info.Version)
			storagetest.WantKind(t, "replace-if-version", err, storage.ErrUnsupported)
			storagetest.WantKind(t, "delete-if-version", d.Delete(bg, "k/old", storage.DeleteOptions{IfVersion: info.Version}), storage.ErrUnsupported)
			if s, _ := mustRead(t, d, "k/old"); s != "x" {
				t.Fatalf("unsupported replace wrote %q", s)
			}
			if got := tree(t, root); strings.Join(got, " ") != "k k/old" {
				t.Fatalf("tree %v", got)
			}
			_, err = d.AcquireGate(bg, MetadataGate)
			storagetest.WantKind(t, "gate", err, storage.ErrUnsupported)
			// The core refuses too.
			s, _ := storage.NewStore(bg, "localfs", d)
			_, err = s.PutBytes(bg, "k/new", []byte("x"), storage.PutOptions{Mode: storage.PutCreateIfAbsent})
			storagetest.WantKind(t, "store create", err, storage.ErrUnsupported)
		})
	}
	t.Run("fat", func(t *testing.T) {
		for _, magic := range []uint32{0x4D44, 0x2011BAB0} {
			d := openT(t, t.TempDir(), openOptions{fsType: &magic, noXattr: true})
			c, _ := d.Capabilities(bg)
			if c.CreateIfAbsent.Level != storage.LevelNone || !strings.Contains(c.CreateIfAbsent.Reason, "hard links") {
				t.Errorf("create = %+v", c.CreateIfAbsent)
			}
			if c.ReplaceIfVersion.Level != storage.LevelNone || c.DeleteIfVersion.Level != storage.LevelNone {
				t.Errorf("replace/delete = %+v %+v", c.ReplaceIfVersion, c.DeleteIfVersion)
			}
			_, err := putS(d, "x", "x", storage.PutCreateIfAbsent, "")
			storagetest.WantKind(t, "create on fat", err, storage.ErrUnsupported)
		}
	})
	t.Run("probes", func(t *testing.T) {
		root := t.TempDir()
		d := openT(t, root, openOptions{noLink: true})
		c, _ := d.Capabilities(bg)
		if c.CreateIfAbsent.Level != storage.LevelNone || !strings.Contains(c.CreateIfAbsent.Reason, "link(2)") {
			t.Errorf("create after a failed link probe = %+v", c.CreateIfAbsent)
		}
		_, err := putS(d, "x", "x", storage.PutCreateIfAbsent, "")
		storagetest.WantKind(t, "create after a failed link probe", err, storage.ErrUnsupported)
		if got := tree(t, root); len(got) != 0 {
			t.Fatalf("wrote %v", got)
		}
		d = openT(t, t.TempDir(), openOptions{noFlock: true})
		c, _ = d.Capabilities(bg)
		if c.ReplaceIfVersion.Level != storage.LevelNone || c.DeleteIfVersion.Level != storage.LevelNone || len(c.Gates) != 0 {
			t.Errorf("caps after a failed flock probe = %+v", c)
		}
		if c.CreateIfAbsent.Level != storage.LevelNative {
			t.Errorf("create after a failed flock probe = %+v", c.CreateIfAbsent)
		}
	})
	t.Run("no-xattr note", func(t *testing.T) {
		d := openT(t, t.TempDir(), openOptions{noXattr: true})
		c, _ := d.Capabilities(bg)
		if !strings.Contains(strings.Join(c.Notes, "\n"), "xattr") {
			t.Errorf("notes do not say xattrs are refused: %q", c.Notes)
		}
	})
}

// --- context ----------------------------------------------------------------

func TestContext(t *testing.T) {
	d, _ := newT(t)
	storagetest.MustPut(t, d, "k", "v")
	ctx, cancel := context.WithCancel(bg)
	cancel()
	check := func(what string, err error, cause error) {
		t.Helper()
		storagetest.WantKind(t, what, err, storage.ErrTransient)
		if !errors.Is(err, cause) {
			t.Fatalf("%s: %v does not wrap %v", what, err, cause)
		}
	}
	_, err := d.Get(ctx, "k")
	check("get", err, context.Canceled)
	_, err = d.Put(ctx, "k2", strings.NewReader("x"), storage.PutOptions{})
	check("put", err, context.Canceled)
	check("delete", d.Delete(ctx, "k", storage.DeleteOptions{}), context.Canceled)
	_, err = d.List(ctx, storage.ListOptions{})
	check("list", err, context.Canceled)

	dctx, dcancel := context.WithDeadline(bg, time.Now().Add(-time.Second))
	defer dcancel()
	_, err = d.Stat(dctx, "k")
	check("stat", err, context.DeadlineExceeded)
	if s, _ := mustRead(t, d, "k"); s != "v" {
		t.Fatal("cancelled ops changed the object")
	}
	// A body that outlives its context: nothing is written, no temp file left.
	ctx2, cancel2 := context.WithCancel(bg)
	body := io.MultiReader(strings.NewReader("partial"), readerFunc(func(p []byte) (int, error) {
		cancel2()
		return copy(p, "more"), nil
	}), strings.NewReader(strings.Repeat("z", 1<<20)))
	_, err = d.Put(ctx2, "k3", body, storage.PutOptions{})
	check("put cancelled mid-body", err, context.Canceled)
	if got := tree(t, d.root); strings.Join(got, " ") != "k" {
		t.Fatalf("tree after a cancelled put: %v", got)
	}
}

type readerFunc func([]byte) (int, error)

func (f readerFunc) Read(p []byte) (int, error) { return f(p) }

// --- concurrency within one process -------------------------------------------

// Goroutines (on one driver and on two drivers) incrementing a counter with
// replace-if-version lose no update.
func TestLostUpdateGoroutines(t *testing.T) {
	d, root := newT(t)
	d2 := openT(t, root, openOptions{})
	storagetest.MustPut(t, d, "ctr", "0")
	const workers, incs = 4, 40
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(dd *Driver) {
			defer wg.Done()
			for i := 0; i < incs; i++ {
				if err := increment(dd, "ctr"); err != nil {
					t.Error(err)
					return
				}
			}
		}([]*Driver{d, d2}[w%2])
	}
	wg.Wait()
	if s, _ := mustRead(t, d, "ctr"); s != fmt.Sprint(workers*incs) {
		t.Fatalf("counter = %s, want %d", s, workers*incs)
	}
}

// increment adds one to the decimal counter at key with Get +
// replace-if-version, retrying on a precondition failure.
func increment(d *Driver, key string) error {
	for {
		r, err := d.Get(bg, key)
		if err != nil {
			return err
		}
		b, err := io.ReadAll(r)
		r.Close()
		if err != nil {
			return err
		}
		var n int
		if _, err := fmt.Sscan(string(b), &n); err != nil {
			return fmt.Errorf("counter body %q: %v", b, err)
		}
		_, err = d.Put(bg, key, strings.NewReader(fmt.Sprint(n+1)), storage.PutOptions{Mode: storage.PutReplaceIfVersion, IfVersion: r.Info.Version})
		if err == nil {
			return nil
		}
		if !errors.Is(err, storage.ErrPreconditionFailed) {
			return err
		}
	}
}

// Readers racing a writer of 4 MiB bodies only ever see one whole body.
func TestAtomicVisibility(t *testing.T) {
	d, _ := newT(t)
	const size = 4 << 20
	const writes = 200
	body := func(i int) []byte { return bytes.Repeat([]byte{byte('A' + i%26)}, size) }
	if _, err := d.Put(bg, "big", bytes.NewReader(body(0)), storage.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	var reads [2]int
	for r := range reads {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			buf := make([]byte, size+1)
			for {
				select {
				case <-done:
					return
				default:
				}
				rd, err := d.Get(bg, "big")
				if err != nil {
					t.Errorf("get: %v", err)
					return
				}
				n, err := io.ReadFull(rd, buf)
				rd.Close()
				if err != io.ErrUnexpectedEOF || n != size || rd.Info.Size != size {
					t.Errorf("read %d bytes (%v), info size %d, want exactly %d", n, err, rd.Info.Size, size)
					return
				}
				c := buf[0]
				if bytes.Count(buf[:n], []byte{c}) != n {
					t.Errorf("body starting with %q is not uniform: a mix of two writes", c)
					return
				}
				reads[r]++
			}
		}(r)
	}
	for i := 1; i <= writes; i++ {
		if _, err := d.Put(bg, "big", bytes.NewReader(body(i)), storage.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	close(done)
	wg.Wait()
	t.Logf("%d writes, reads per reader %v", writes, reads)
}

// A reader holding the old file while a writer replaces it must still see
// the version that write produced: unlink and rename change ctime without a
// write, so the token must not depend on it (the conformance suite's
// linearizability check found this).
func TestVersionStableAcrossReplaceAndLink(t *testing.T) {
	root := t.TempDir()
	d := openT(t, root, openOptions{})
	ctx := context.Background()
	v1, err := d.Put(ctx, "k", strings.NewReader("one"), storage.PutOptions{Mode: storage.PutCreateIfAbsent})
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(root, "k"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	time.Sleep(20 * time.Millisecond) // past the timestamp tick
	if _, err := d.Put(ctx, "k", strings.NewReader("two"), storage.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	old, _, err := infoFd("k", int(f.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	if old.Version != v1.Version {
		t.Fatalf("the replaced file's token changed without a write: %s, written as %s", old.Version, v1.Version)
	}
}
