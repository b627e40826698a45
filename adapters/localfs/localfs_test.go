//go:build linux

package localfs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
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
