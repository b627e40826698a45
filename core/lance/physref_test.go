package lance

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/retain-dev/retain/adapters/s3"
	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/internal/emulator"
	"github.com/retain-dev/retain/internal/lancetest"
)

func mustPhysRef(t *testing.T, d *Dataset, n uint64) PhysRef {
	t.Helper()
	v, err := d.VersionAt(bg, n)
	if err != nil {
		t.Fatal(err)
	}
	p, err := d.PhysRef(bg, v)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestPhysRefRoundTrip(t *testing.T) {
	d, _ := openFixture(t, "v2-appends")
	p := mustPhysRef(t, d, 2)
	if p.Version != 2 || p.Size <= 0 || p.ObjectVersion == "" || p.TxnUUID == "" || p.Committed.IsZero() ||
		p.Key != d.Key("_versions/"+ManifestName(2, NamingV2)) {
		t.Fatalf("%+v", p)
	}
	q, err := ParsePhysRef(p.String())
	if err != nil || !q.Equal(p) || q.String() != p.String() {
		t.Fatalf("round trip of %s: %+v, %v", p, q, err)
	}
	if err := d.CheckPhysRef(bg, p); err != nil {
		t.Fatalf("unchanged version: %v", err)
	}
	if p.Format != 2 || !strings.HasPrefix(p.String(), "lance-physref/2 2 ") || strings.Contains(p.String(), p.Key) {
		t.Fatalf("a ref read now is not a format-2 token without its key: %s", p)
	}
	// A format-1 token (older stores) round-trips too, and a manifest
	// without a timestamp.
	z := PhysRef{Version: 1, Key: "k", ObjectVersion: "v", Size: 3, Format: 1}
	if q, err := ParsePhysRef(z.String()); err != nil || !q.Equal(z) {
		t.Errorf("zero timestamp: %+v, %v", q, err)
	}
	for _, bad := range []string{"", "lance-physref/2 1 2 3 \"a\" \"b\" \"c\"", p.String() + " x", "lance-physref/3 1 2",
		strings.Replace(p.String(), p.SHA256, strings.ToUpper(p.SHA256), 1), strings.Replace(p.String(), p.SHA256, p.SHA256[:62], 1),
		strings.Replace(p.String(), " 2 ", " 02 ", 1), "lance-physref/1 1 2 3 a b c"} {
		if _, err := ParsePhysRef(bad); storage.KindOf(err) != storage.ErrInvalidArgument {
			t.Errorf("ParsePhysRef(%q): %v", bad, err)
		}
	}
}

// replaceDataset removes the dataset's folder and puts a fixture's files
// at the same keys, through the store: a dataset deleted and recreated.
func replaceDataset(t *testing.T, d *Dataset, fixture string) {
	t.Helper()
	objs, err := d.Store.List(bg, d.Root+"/", 0)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, o := range objs {
		keys = append(keys, o.Key)
	}
	res, err := d.Store.DeleteMany(bg, keys)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	fillFrom(t, d.Store, filepath.Join("testdata", fixture+".lance"), d.Root)
}

// ABA: the same path, the same version numbers, another commit. Checked on
// localfs and on an S3 emulator, where the version token is an ETag.
func TestPhysRefABA(t *testing.T) {
	stores := map[string]func(t *testing.T) *storage.Store{
		"localfs": func(t *testing.T) *storage.Store { return openStore(t, t.TempDir()) },
		"s3-gofakes3": func(t *testing.T) *storage.Store {
			e := useS3Emulator(t)
			loc, err := storage.ParseLocation("s3://retain-lance/prefix?endpoint=" + e.Endpoint)
			if err != nil {
				t.Fatal(err)
			}
			drv, err := s3.Open(bg, loc)
			if err != nil {
				t.Fatal(err)
			}
			s, err := storage.NewStore(bg, "s3", drv)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		},
	}
	for name, open := range stores {
		t.Run(name, func(t *testing.T) {
			s := open(t)
			d := mustOpen(t, s, "db/t.lance")
			fillFrom(t, s, filepath.Join("testdata", "v2-appends.lance"), d.Root)
			before := map[uint64]PhysRef{}
			for n := uint64(1); n <= 3; n++ {
				before[n] = mustPhysRef(t, d, n)
			}

			// Deleted and restored byte for byte: the same commit, whatever
			// the store's token says now (localfs: a new inode and times).
			replaceDataset(t, d, "v2-appends")
			for n, p := range before {
				got := mustPhysRef(t, d, n)
				if !got.SameCommit(p) || got.String() != p.String() {
					t.Errorf("v%d restored byte for byte is another commit: %s vs %s", n, got, p)
				}
				if err := d.CheckPhysRef(bg, p); err != nil {
					t.Errorf("v%d restored byte for byte: %v", n, err)
				}
			}

			// Recreated: the same steps built again by Lance.
			replaceDataset(t, d, "v2-appends-again")
			for n, p := range before {
				got := mustPhysRef(t, d, n)
				if got.SameCommit(p) || got.Equal(p) || got.String() == p.String() {
					t.Errorf("v%d of a recreated dataset has the old physical ref %s", n, got)
				}
				err := d.CheckPhysRef(bg, p)
				if !errors.Is(err, ErrPhysRefMismatch) || !strings.Contains(err.Error(), "recreated") {
					t.Errorf("v%d recreated: %v", n, err)
				}
			}

			// Gone: not found, with its storage kind.
			replaceDataset(t, d, "optimized") // versions 7..9 only
			if err := d.CheckPhysRef(bg, before[1]); storage.KindOf(err) != storage.ErrNotFound {
				t.Errorf("a removed version: %v", err)
			}
		})
	}
}

// useS3Emulator starts gofakes3 in process and points the AWS environment
// at it, isolated from any configuration on the machine.
func useS3Emulator(t *testing.T) *emulator.S3 {
	t.Helper()
	e := emulator.GoFakeS3(t)
	emulator.IsolateAWS(t, e.Env())
	return e
}

// Real Lance drops and recreates a table at the same path: the physical
// refs of every version change, on localfs and on S3 (Lance writing to
// the emulator itself).
func TestPhysRefLanceRecreates(t *testing.T) {
	if testing.Short() {
		t.Skip("drives real Lance")
	}
	spec := fixtureSpec{Name: "t", Naming: "v2", Steps: []step{
		{"op": "create", "rows": 3}, {"op": "add", "rows": 1}, {"op": "drop"},
		{"op": "create", "rows": 3}, {"op": "add", "rows": 1}}}
	first := fixtureSpec{Name: "t", Naming: "v2", Steps: spec.Steps[:2]}
	recreate := fixtureSpec{Name: "t", Naming: "v2", Steps: spec.Steps[2:]}

	t.Run("localfs", func(t *testing.T) {
		dir := t.TempDir()
		build(t, filepath.Join(dir, "db"), first)
		s := openStore(t, dir)
		d := mustOpen(t, s, "db/t.lance")
		p1, p2 := mustPhysRef(t, d, 1), mustPhysRef(t, d, 2)
		lanceOn(t, filepath.Join(dir, "db"), nil, recreate)
		for _, p := range []PhysRef{p1, p2} {
			if err := d.CheckPhysRef(bg, p); !errors.Is(err, ErrPhysRefMismatch) {
				t.Errorf("v%d after Lance recreated the table: %v", p.Version, err)
			}
		}
	})
	t.Run("s3-gofakes3", func(t *testing.T) {
		e := useS3Emulator(t)
		loc, err := storage.ParseLocation("s3://lance-aba/root?endpoint=" + e.Endpoint)
		if err != nil {
			t.Fatal(err)
		}
		drv, err := s3.Open(bg, loc) // also creates the bucket (auto-bucket)
		if err != nil {
			t.Fatal(err)
		}
		s, err := storage.NewStore(bg, "s3", drv)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		opts := map[string]string{"aws_endpoint": e.Endpoint, "aws_access_key_id": e.AccessKey,
			"aws_secret_access_key": e.SecretKey, "aws_region": e.Region, "allow_http": "true"}
		lanceOn(t, "s3://lance-aba/root/db", opts, first)
		d := mustOpen(t, s, "db/t.lance")
		p1, p2 := mustPhysRef(t, d, 1), mustPhysRef(t, d, 2)
		lanceOn(t, "s3://lance-aba/root/db", opts, recreate)
		for _, p := range []PhysRef{p1, p2} {
			if err := d.CheckPhysRef(bg, p); !errors.Is(err, ErrPhysRefMismatch) {
				t.Errorf("v%d after Lance recreated the table on S3: %v", p.Version, err)
			}
		}
		checkComplete(t, s, d.Root)
	})
}

// lanceOn runs build.cjs against dir (a path or an s3:// URI).
func lanceOn(t *testing.T, dir string, storageOpts map[string]string, spec fixtureSpec) buildResult {
	t.Helper()
	if !strings.Contains(dir, "://") {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	arg := map[string]any{"dir": dir, "table": spec.Name, "naming": spec.Naming, "steps": spec.Steps}
	if storageOpts != nil {
		arg["storageOptions"] = storageOpts
	}
	var out buildResult
	lancetest.Node(t, "build.cjs", arg, &out)
	return out
}

// Test vectors: the format-2 token of each version of a committed fixture,
// and its digest recomputed from the file on disk (not through a store).
func TestPhysRefVectors(t *testing.T) {
	vectors := []struct {
		fixture string
		version uint64
	}{
		{"v2-appends", 1}, {"v2-appends", 3}, {"v1-naming", 2},
	}
	want := map[string]string{}
	b, err := os.ReadFile(filepath.Join("testdata", "physrefs.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatal(err)
	}
	for _, v := range vectors {
		d, dir := openFixture(t, v.fixture)
		vv, err := d.VersionAt(bg, v.version)
		if err != nil {
			t.Fatal(err)
		}
		p, err := d.PhysRef(bg, vv)
		if err != nil {
			t.Fatal(err)
		}
		id := fmt.Sprintf("%s@%d", v.fixture, v.version)
		if p.String() != want[id] {
			t.Errorf("%s: token %s, the vector says %s", id, p, want[id])
		}
		raw, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(vv.Key)))
		if err != nil {
			t.Fatal(err)
		}
		if sum := sha256.Sum256(raw); hex.EncodeToString(sum[:]) != p.SHA256 || int64(len(raw)) != p.Size {
			t.Errorf("%s: the token's digest/size is not the file's", id)
		}
		q, err := ParsePhysRef(want[id])
		if err != nil || !q.Matches(p) {
			t.Errorf("%s: the vector does not parse back to a matching ref: %v", id, err)
		}
	}
}

// cpA copies src to dst with the system's cp -a (a new inode and ctime
// for every file: the localfs version tokens all change).
func cpA(t *testing.T, src, dst string) {
	t.Helper()
	if out, err := exec.Command("cp", "-a", src, dst).CombinedOutput(); err != nil {
		t.Fatalf("cp -a: %v: %s", err, out)
	}
}

// What a store lives through keeps every ref valid, in both token formats:
// cp -a, chmod -R, a hard link made and removed, rsync -a, and renaming
// every manifest to the other naming scheme (Lance's own migration).
func TestPhysRefSurvivesCopiesAndRenames(t *testing.T) {
	for _, fixture := range []string{"v1-naming", "v2-appends"} {
		t.Run(fixture, func(t *testing.T) {
			d, dir := openFixture(t, fixture)
			var refs []PhysRef
			for n := uint64(1); n <= 3; n++ {
				p := mustPhysRef(t, d, n)
				v1 := p
				v1.Format = 1 // what an older retain recorded for the same read
				refs = append(refs, p, v1)
			}
			check := func(what string, d *Dataset) {
				t.Helper()
				for _, p := range refs {
					if err := d.CheckPhysRef(bg, p); err != nil {
						t.Errorf("%s: format-%d ref of v%d: %v", what, p.Format, p.Version, err)
					}
				}
			}
			root := filepath.Join(dir, fixture+".lance")

			cp := t.TempDir()
			cpA(t, dir+"/.", cp)
			check("cp -a", mustOpen(t, openStore(t, cp), fixture+".lance"))

			if out, err := exec.Command("chmod", "-R", "go-rwx", root).CombinedOutput(); err != nil {
				t.Fatalf("chmod: %v %s", err, out)
			}
			check("chmod -R", d)

			vs, err := d.Versions(bg)
			if err != nil {
				t.Fatal(err)
			}
			link := filepath.Join(dir, "link")
			if err := os.Link(filepath.Join(dir, filepath.FromSlash(vs[0].Key)), link); err != nil {
				t.Fatal(err)
			}
			if err := os.Remove(link); err != nil {
				t.Fatal(err)
			}
			check("a hard link made and removed", d)

			if _, err := exec.LookPath("rsync"); err == nil {
				rs := t.TempDir()
				if out, err := exec.Command("rsync", "-a", dir+"/", rs+"/").CombinedOutput(); err != nil {
					t.Fatalf("rsync: %v %s", err, out)
				}
				check("rsync -a", mustOpen(t, openStore(t, rs), fixture+".lance"))
			} else {
				t.Log("rsync is not installed: the rsync -a case is skipped (cp -a covers the same token change)")
			}

			// Every manifest renamed to the other scheme, as Lance's
			// migrateManifestPathsV2 does (V1 -> V2) or a tool in reverse.
			for _, v := range vs {
				other := NamingV1
				if v.Naming == NamingV1 {
					other = NamingV2
				}
				from := filepath.Join(dir, filepath.FromSlash(v.Key))
				to := filepath.Join(root, "_versions", ManifestName(v.N, other))
				if err := os.Rename(from, to); err != nil {
					t.Fatal(err)
				}
			}
			check("manifests renamed to the other naming scheme", d)
		})
	}
}

// A format-1 ref of a manifest with neither timestamp nor transaction has
// only its object to go by: it still fails closed when the object changes.
func TestPhysRefFormat1WithoutCommitIdentityStaysStrict(t *testing.T) {
	p := PhysRef{Version: 3, Size: 10, Key: "t/_versions/3.manifest", ObjectVersion: "a", Format: 1}
	same := PhysRef{Version: 3, Size: 10, Key: "t/_versions/3.manifest", ObjectVersion: "a", SHA256: "x", Format: 2}
	moved := same
	moved.ObjectVersion = "b"
	if !p.Matches(same) || p.Matches(moved) {
		t.Fatalf("identity-less format-1 ref: matches the same object %v, another object %v", p.Matches(same), p.Matches(moved))
	}
}
