package localfs

// Symlinks, special files, write modes and listing order.

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/storage/storagetest"
)

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
