package lance

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/retain-dev/retain/core/storage"
)

// pb builds protobuf messages for synthetic manifests.
type pb []byte

func (b pb) varint(num int, v uint64) pb {
	b = protowire.AppendTag(b, protowire.Number(num), protowire.VarintType)
	return protowire.AppendVarint(b, v)
}

func (b pb) bytes(num int, v []byte) pb {
	b = protowire.AppendTag(b, protowire.Number(num), protowire.BytesType)
	return protowire.AppendBytes(b, v)
}

func (b pb) str(num int, s string) pb { return b.bytes(num, []byte(s)) }

// manifestFile lays out sections, then the Manifest message build returns
// given the sections' offsets, then the footer.
func manifestFile(sections [][]byte, build func(offsets []uint64) []byte) []byte {
	var out []byte
	var offs []uint64
	for _, s := range sections {
		offs = append(offs, uint64(len(out)))
		out = binary.LittleEndian.AppendUint32(out, uint32(len(s)))
		out = append(out, s...)
	}
	pos := len(out)
	m := build(offs)
	out = binary.LittleEndian.AppendUint32(out, uint32(len(m)))
	out = append(out, m...)
	out = binary.LittleEndian.AppendUint64(out, uint64(pos))
	out = binary.LittleEndian.AppendUint16(out, manifestMajor)
	out = binary.LittleEndian.AppendUint16(out, manifestMinor)
	return append(out, manifestMagic...)
}

// readFixtureManifest returns the bytes of one fixture manifest.
func readFixtureManifest(t *testing.T, fixture, rel string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", fixture+".lance", rel))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func readAt(t *testing.T, d *Dataset, n uint64) *Manifest {
	t.Helper()
	v, err := d.VersionAt(bg, n)
	if err != nil {
		t.Fatal(err)
	}
	m, err := d.ReadManifest(bg, v)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func filesOf(m *Manifest, kind FileKind) []FileRef {
	var out []FileRef
	for _, f := range m.Files() {
		if f.Kind == kind {
			out = append(out, f)
		}
	}
	return out
}

func TestManifestDeletes(t *testing.T) {
	d, _ := openFixture(t, "deletes")
	m := readAt(t, d, 5)
	if m.ReaderFlags&FeatureDeletionFiles == 0 || m.WriterFlags&FeatureDeletionFiles == 0 {
		t.Errorf("flags %#x/%#x lack deletion files", m.ReaderFlags, m.WriterFlags)
	}
	dels := filesOf(m, KindDeletion)
	if len(dels) != 2 {
		t.Fatalf("v5 deletion files: %+v", dels)
	}
	big := false
	for _, f := range dels {
		// Lance writes random 64-bit ids: names must be exact, above 2^53 too.
		var frag, rv, id uint64
		name := strings.TrimPrefix(f.Key, d.Root+"/_deletions/")
		if _, err := fmtSscan(name, &frag, &rv, &id); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if id > 1<<53 {
			big = true
		}
		if f.Owner != d.Root || f.Outside || f.Prefix || f.Size != -1 {
			t.Errorf("%+v", f)
		}
	}
	if !big {
		t.Log("no deletion id above 2^53 in this fixture (exactness is still checked by existence)")
	}
	// Every version after the first references one manifest, one
	// transaction file, and its data files with sizes.
	if got := filesOf(m, KindManifest); len(got) != 1 || got[0].Key != m.Key || got[0].Size != m.Size {
		t.Errorf("manifest ref %+v", got)
	}
	txn := filesOf(m, KindTransaction)
	if len(txn) != 1 || !strings.HasPrefix(txn[0].Key, d.Root+"/_transactions/4-") || m.TransactionUUID == "" ||
		!strings.Contains(txn[0].Key, m.TransactionUUID) {
		t.Errorf("transaction %+v uuid %q", txn, m.TransactionUUID)
	}
	for _, f := range filesOf(m, KindData) {
		if f.Size <= 0 || !strings.HasPrefix(f.Key, d.Root+"/data/") {
			t.Errorf("data ref %+v", f)
		}
	}
}

func fmtSscan(name string, frag, rv, id *uint64) (int, error) {
	name = strings.TrimSuffix(strings.TrimSuffix(name, ".arrow"), ".bin")
	parts := strings.Split(name, "-")
	if len(parts) != 3 {
		return 0, errors.New("not frag-rv-id")
	}
	var err error
	for i, p := range []*uint64{frag, rv, id} {
		var v uint64
		for _, c := range parts[i] {
			if c < '0' || c > '9' {
				err = errors.New("not digits")
			}
			v = v*10 + uint64(c-'0')
		}
		*p = v
	}
	return 3, err
}

func TestManifestIndex(t *testing.T) {
	d, dir := openFixture(t, "index")
	m2, m4 := readAt(t, d, 2), readAt(t, d, 4)
	if len(m2.Indexes) != 1 || len(m4.Indexes) != 1 || m2.Indexes[0].UUID == m4.Indexes[0].UUID {
		t.Fatalf("indexes v2 %+v v4 %+v: the second createIndex should replace the first", m2.Indexes, m4.Indexes)
	}
	for _, m := range []*Manifest{m2, m4} {
		ix := m.Indexes[0]
		if ix.Name != "id_idx" || len(ix.Files) == 0 {
			t.Errorf("index %+v", ix)
		}
		if _, err := os.Stat(filepath.Join(dir, d.Root, "_indices", ix.UUID)); err != nil {
			t.Errorf("index folder for uuid %s: %v", ix.UUID, err)
		}
		var folder, files int
		for _, f := range filesOf(m, KindIndex) {
			if f.Prefix {
				folder++
				if f.Key != d.Root+"/_indices/"+ix.UUID+"/" {
					t.Errorf("folder ref %s", f.Key)
				}
			} else {
				files++
				if f.Size <= 0 {
					t.Errorf("index file without size %+v", f)
				}
			}
		}
		if folder != 1 || files != len(ix.Files) {
			t.Errorf("index refs: %d folders, %d files for %+v", folder, files, ix)
		}
	}
}

// A branch's inherited files resolve to the keys of the dataset that holds
// them: main's for exp, exp's deletion for team/x.
func TestManifestBranchBasePaths(t *testing.T) {
	d, _ := openFixture(t, "branch-tag")
	main := d.Root
	exp := mustOpen(t, d.Store, main+"/tree/exp")
	mExp := readAt(t, exp, 4)
	if mExp.Branch != "exp" || mExp.ReaderFlags&FeatureBasePaths == 0 || len(mExp.BasePaths) != 1 ||
		!mExp.BasePaths[0].IsDatasetRoot || !strings.HasSuffix(mExp.BasePaths[0].Path, "/branch-tag.lance") {
		t.Fatalf("exp v4: branch %q flags %#x bases %+v", mExp.Branch, mExp.ReaderFlags, mExp.BasePaths)
	}
	owners := map[string]int{}
	for _, f := range mExp.Files() {
		owners[f.Owner]++
		if f.Outside {
			t.Errorf("outside: %+v", f)
		}
		if f.Owner == main && !strings.HasPrefix(f.Key, main+"/data/") {
			t.Errorf("inherited non-data file %+v", f)
		}
		if f.Owner == exp.Root && !strings.HasPrefix(f.Key, exp.Root+"/") {
			t.Errorf("own file outside the branch folder %+v", f)
		}
	}
	if owners[main] != 2 || owners[exp.Root] == 0 {
		t.Errorf("exp v4 owners %v: want 2 inherited data files from main", owners)
	}
	tx := mustOpen(t, d.Store, main+"/tree/team/x")
	mX := readAt(t, tx, 5)
	if mX.Branch != "team/x" || len(mX.BasePaths) != 2 {
		t.Fatalf("team/x v5: %q %+v", mX.Branch, mX.BasePaths)
	}
	var fromExp []string
	for _, f := range mX.Files() {
		if f.Owner == exp.Root {
			fromExp = append(fromExp, f.Key)
		}
	}
	if len(fromExp) != 2 { // exp's data file and exp's deletion file
		t.Errorf("team/x v5 files from exp: %v", fromExp)
	}
}

func TestManifestV1AndUpdate(t *testing.T) {
	d, _ := openFixture(t, "v1-naming")
	m := readAt(t, d, 3)
	if !strings.HasSuffix(m.Key, "/_versions/3.manifest") || len(filesOf(m, KindDeletion)) != 1 {
		t.Errorf("v1-naming v3: %s %+v", m.Key, m.Files())
	}
	d, _ = openFixture(t, "update")
	m = readAt(t, d, 2)
	// An update rewrites the row into a new fragment and deletes it from
	// the old one.
	if len(m.Fragments) != 2 || len(filesOf(m, KindDeletion)) != 1 || len(filesOf(m, KindData)) != 2 {
		t.Errorf("update v2: %+v", m.Files())
	}
}

// corruptions of a real manifest, each refused with its sentinel.
func TestCorruptManifestsRefused(t *testing.T) {
	good := readFixtureManifest(t, "deletes", "_versions/"+ManifestName(5, NamingV2))
	if _, err := ParseManifest(good); err != nil {
		t.Fatal(err)
	}
	pos := int(binary.LittleEndian.Uint64(good[len(good)-16:]))
	mlen := int(binary.LittleEndian.Uint32(good[pos:]))
	mutate := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	// withManifestField appends a field to the Manifest message (proto3:
	// the last value of a scalar wins) and fixes its length prefix.
	withManifestField := func(extra pb) []byte {
		b := append([]byte(nil), good[:pos]...)
		b = binary.LittleEndian.AppendUint32(b, uint32(mlen+len(extra)))
		b = append(b, good[pos+4:pos+4+mlen]...)
		b = append(b, extra...)
		return append(b, good[len(good)-16:]...)
	}
	cases := []struct {
		name string
		b    []byte
		want error
	}{
		{"empty", nil, ErrCorruptManifest},
		{"truncated to 19 bytes", good[:19], ErrCorruptManifest},
		{"truncated by one byte", good[:len(good)-1], ErrCorruptManifest},
		{"truncated footer kept", append(append([]byte(nil), good[:pos+10]...), good[len(good)-16:]...), ErrCorruptManifest},
		{"half", good[:len(good)/2], ErrCorruptManifest},
		{"bad magic", mutate(func(b []byte) []byte { b[len(b)-1] = 'D'; return b }), ErrCorruptManifest},
		{"offset past the end", mutate(func(b []byte) []byte {
			binary.LittleEndian.PutUint64(b[len(b)-16:], uint64(len(b)))
			return b
		}), ErrCorruptManifest},
		{"negative offset", mutate(func(b []byte) []byte {
			binary.LittleEndian.PutUint64(b[len(b)-16:], 1<<63)
			return b
		}), ErrCorruptManifest},
		{"section longer than the file", mutate(func(b []byte) []byte {
			binary.LittleEndian.PutUint32(b[pos:], uint32(mlen+1))
			return b
		}), ErrCorruptManifest},
		{"section shorter than the file", mutate(func(b []byte) []byte {
			binary.LittleEndian.PutUint32(b[pos:], uint32(mlen-1))
			return b
		}), ErrCorruptManifest},
		{"garbage body", mutate(func(b []byte) []byte {
			for i := pos + 4; i < pos+4+mlen; i++ {
				b[i] = 0xff
			}
			return b
		}), ErrCorruptManifest},
		{"unknown reader flag", withManifestField(pb{}.varint(9, 1<<20|1)), ErrUnknownFeature},
		{"unknown writer flag bit 9", withManifestField(pb{}.varint(10, 1<<9|1)), ErrUnknownFeature},
		{"half-set mixed data file versions", withManifestField(pb{}.varint(9, 1|1<<8)), ErrCorruptManifest},
		{"version as bytes", withManifestField(pb{}.str(3, "five")), ErrCorruptManifest},
		{"fragment as varint", withManifestField(pb{}.varint(2, 7)), ErrCorruptManifest},
		{"index section inside the manifest", withManifestField(pb{}.varint(6, uint64(pos+2))), ErrCorruptManifest},
		{"transaction section out of range", withManifestField(pb{}.varint(21, 1<<40)), ErrCorruptManifest},
	}
	for _, c := range cases {
		m, err := ParseManifest(c.b)
		if !errors.Is(err, c.want) {
			t.Errorf("%s: ParseManifest = %v, %v; want %v", c.name, m != nil, err, c.want)
		}
	}
	// Known bits all set are accepted (paired where Lance pairs them).
	if _, err := ParseManifest(withManifestField(pb{}.varint(9, uint64(KnownFeatures)).varint(10, uint64(KnownFeatures)))); err != nil {
		t.Errorf("all known feature bits: %v", err)
	}

	// Through the store, the refusal names the manifest's key.
	d, dir := openFixture(t, "deletes")
	v, err := d.VersionAt(bg, 5)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases[:1] {
		_ = c
	}
	for _, c := range []struct {
		b    []byte
		want error
	}{{good[:len(good)-3], ErrCorruptManifest}, {withManifestField(pb{}.varint(9, 1<<30)), ErrUnknownFeature}} {
		if err := os.WriteFile(filepath.Join(dir, v.Key), c.b, 0o644); err != nil {
			t.Fatal(err)
		}
		v, _ = d.VersionAt(bg, 5)
		_, err := d.ReadManifest(bg, v)
		if !errors.Is(err, c.want) || !strings.Contains(err.Error(), v.Key) {
			t.Errorf("ReadManifest: %v; want %v naming %s", err, c.want, v.Key)
		}
		if _, err := d.PhysRef(bg, v); !errors.Is(err, c.want) {
			t.Errorf("PhysRef: %v", err)
		}
	}
	// A manifest whose content names another version than its file name.
	if err := os.WriteFile(filepath.Join(dir, v.Key), readFixtureManifest(t, "deletes", "_versions/"+ManifestName(4, NamingV2)), 0o644); err != nil {
		t.Fatal(err)
	}
	v, _ = d.VersionAt(bg, 5)
	if _, err := d.ReadManifest(bg, v); !errors.Is(err, ErrCorruptManifest) {
		t.Errorf("version 4 stored as 5: %v", err)
	}
	// A missing manifest keeps its storage kind.
	if _, err := d.ReadManifest(bg, Version{N: 9, Key: d.Key("_versions/" + ManifestName(9, NamingV2))}); storage.KindOf(err) != storage.ErrNotFound {
		t.Errorf("missing manifest: %v", err)
	}
}

// synthetic builds a one-fragment manifest of version 1 around frag and
// extra Manifest fields, with an optional index section.
func synthetic(frag pb, extra pb, index pb) []byte {
	var secs [][]byte
	if index != nil {
		secs = append(secs, pb{}.bytes(1, index))
	}
	return manifestFile(secs, func(offs []uint64) []byte {
		m := pb{}.varint(3, 1)
		if frag != nil {
			m = m.bytes(2, frag)
		}
		if index != nil {
			m = m.varint(6, offs[0])
		}
		return append(m, extra...)
	})
}

func dataFile(path string, size uint64) pb { return pb{}.str(1, path).varint(6, size) }

func TestSyntheticManifests(t *testing.T) {
	s := openStore(t, t.TempDir())
	d := mustOpen(t, s, "db/t.lance/tree/feature/a")
	uuid := []byte{0xde, 0xad, 0xbe, 0xef, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 0xff}
	resolve := func(b []byte) ([]FileRef, error) {
		m, err := ParseManifest(b)
		if err != nil {
			return nil, err
		}
		m.Key, m.Size = d.Key("_versions/1.manifest"), int64(len(b))
		return d.resolveFiles(m)
	}
	byKey := func(refs []FileRef) map[string]FileRef {
		out := map[string]FileRef{}
		for _, r := range refs {
			out[r.Key] = r
		}
		return out
	}

	// Every kind of reference, with bases of the family and a foreign one.
	frag := pb{}.varint(1, 3).
		bytes(2, dataFile("own.lance", 10)).
		bytes(2, dataFile("main.lance", 11).varint(7, 0)).
		bytes(2, dataFile("sib.lance", 0).varint(7, 1)).
		bytes(2, dataFile("far.lance", 12).varint(7, 2)).
		bytes(2, dataFile("imp.lance", 13).varint(7, 3)).
		bytes(3, pb{}.varint(1, 1).varint(2, 7).varint(3, 18446744073709551557).varint(7, 0)).
		bytes(6, pb{}.str(1, "data/rowids/3.bin").varint(3, 9)).
		bytes(10, pb{}.str(1, "data/created.bin")).
		bytes(11, pb{}.bytes(1, dataFile("ovl.lance", 14)).bytes(2, []byte{1}).varint(3, 1))
	bases := pb{}.
		bytes(18, pb{}.varint(1, 0).varint(3, 1).str(4, "s3://bucket/prefix/db/t.lance")).
		bytes(18, pb{}.varint(1, 1).str(2, "b").varint(3, 1).str(4, "file:///mnt/x/db/t.lance/tree/b")).
		bytes(18, pb{}.varint(1, 2).varint(3, 1).str(4, "gs://other/elsewhere/u.lance")).
		bytes(18, pb{}.varint(1, 3).varint(3, 0).str(4, "/data/import/dir"))
	extra := bases.str(12, "0-abc.txn").str(20, "feature/a").varint(9, 1|16|64).varint(10, 1|16|64)
	index := pb{}.bytes(1, pb{}.bytes(1, uuid)).str(3, "ix").varint(9, 0).
		bytes(10, pb{}.str(1, "page_data.lance").varint(2, 100))
	refs, err := resolve(synthetic(frag, extra, index))
	if err != nil {
		t.Fatal(err)
	}
	got := byKey(refs)
	want := map[string]FileRef{
		"db/t.lance/tree/feature/a/_versions/1.manifest":                           {Kind: KindManifest, Owner: d.Root},
		"db/t.lance/tree/feature/a/data/own.lance":                                 {Kind: KindData, Size: 10, Owner: d.Root},
		"db/t.lance/data/main.lance":                                               {Kind: KindData, Size: 11, Owner: "db/t.lance"},
		"db/t.lance/tree/b/data/sib.lance":                                         {Kind: KindData, Size: -1, Owner: "db/t.lance/tree/b"},
		"gs://other/elsewhere/u.lance/data/far.lance":                              {Kind: KindData, Size: 12, Outside: true},
		"/data/import/dir/imp.lance":                                               {Kind: KindData, Size: 13, Outside: true},
		"db/t.lance/_deletions/3-7-18446744073709551557.bin":                       {Kind: KindDeletion, Size: -1, Owner: "db/t.lance"},
		"db/t.lance/tree/feature/a/data/rowids/3.bin":                              {Kind: KindExternal, Size: -1, Owner: d.Root},
		"db/t.lance/tree/feature/a/data/created.bin":                               {Kind: KindExternal, Size: -1, Owner: d.Root},
		"db/t.lance/tree/feature/a/data/ovl.lance":                                 {Kind: KindOverlay, Size: 14, Owner: d.Root},
		"db/t.lance/_indices/deadbeef-0001-0203-0405-060708090aff/":                {Kind: KindIndex, Size: -1, Prefix: true, Owner: "db/t.lance"},
		"db/t.lance/_indices/deadbeef-0001-0203-0405-060708090aff/page_data.lance": {Kind: KindIndex, Size: 100, Owner: "db/t.lance"},
		"db/t.lance/tree/feature/a/_transactions/0-abc.txn":                        {Kind: KindTransaction, Size: -1, Owner: d.Root},
	}
	for k, w := range want {
		g, ok := got[k]
		if w.Kind == KindManifest {
			w.Size = g.Size
		}
		w.Key = k
		if !ok || g != w {
			t.Errorf("ref %s: got %+v (present %v), want %+v", k, g, ok, w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d refs, want %d: %+v", len(got), len(want), refs)
	}

	// Refusals of paths and references that do not hold together.
	bad := []struct {
		name string
		b    []byte
	}{
		{"climbing data path", synthetic(pb{}.bytes(2, dataFile("../../other.lance/data/x.lance", 1)), nil, nil)},
		{"absolute data path", synthetic(pb{}.bytes(2, dataFile("/etc/passwd", 1)), nil, nil)},
		{"empty segment", synthetic(pb{}.bytes(2, dataFile("a//b.lance", 1)), nil, nil)},
		{"empty data path", synthetic(pb{}.bytes(2, dataFile("", 1)), nil, nil)},
		{"climbing external path", synthetic(pb{}.bytes(6, pb{}.str(1, "../x")), nil, nil)},
		{"NUL in an external path (found by the fuzzer)", synthetic(pb{}.bytes(6, pb{}.str(1, "0\x0000000")), nil, nil)},
		{"NUL in a data path", synthetic(pb{}.bytes(2, dataFile("a\x00.lance", 1)), nil, nil)},
		{"NUL in a deletion's base", synthetic(pb{}.bytes(3, pb{}.varint(2, 1).varint(7, 0)), pb{}.bytes(18, pb{}.varint(3, 1).str(4, "/x/db/t.lance/tree/\x00")), nil)},
		{"climbing index file", synthetic(nil, nil, pb{}.bytes(1, pb{}.bytes(1, uuid)).bytes(10, pb{}.str(1, "../../data/x.lance")))},
		{"climbing transaction file", synthetic(nil, pb{}.str(12, "../_versions/1.manifest"), nil)},
		{"undefined base id", synthetic(pb{}.bytes(2, dataFile("x.lance", 1).varint(7, 4)), nil, nil)},
		{"undefined deletion base id", synthetic(pb{}.bytes(3, pb{}.varint(2, 1).varint(7, 9)), nil, nil)},
		{"duplicate base id", synthetic(nil, pb{}.bytes(18, pb{}.str(4, "/a")).bytes(18, pb{}.str(4, "/b")), nil)},
		{"base without path", synthetic(nil, pb{}.bytes(18, pb{}.varint(1, 0)), nil)},
		{"deletion type 2", synthetic(pb{}.bytes(3, pb{}.varint(1, 2)), nil, nil)},
		{"short uuid", synthetic(nil, nil, pb{}.bytes(1, pb{}.bytes(1, uuid[:15])))},
		{"index without uuid", synthetic(nil, nil, pb{}.str(3, "ix"))},
		{"overlay without data file", synthetic(pb{}.bytes(11, pb{}.varint(3, 1)), nil, nil)},
		{"base id overflow", synthetic(pb{}.bytes(2, dataFile("x.lance", 1).varint(7, 1<<33)), nil, nil)},
		{"bad timestamp nanos", synthetic(nil, pb{}.bytes(7, pb{}.varint(1, 5).varint(2, 2_000_000_000)), nil)},
		{"no version", manifestFile(nil, func([]uint64) []byte { return pb{}.varint(9, 1) })},
		{"truncated varint", manifestFile(nil, func([]uint64) []byte { return []byte{0x18, 0x80} })},
		{"bad tag", manifestFile(nil, func([]uint64) []byte { return []byte{0x00} })},
	}
	for _, c := range bad {
		if _, err := resolve(c.b); !errors.Is(err, ErrCorruptManifest) {
			t.Errorf("%s: %v, want a corrupt-manifest refusal", c.name, err)
		}
	}
	// Unknown fields and groups are skipped.
	if _, err := resolve(synthetic(nil, pb{}.varint(99, 1).bytes(98, []byte("x")), nil)); err != nil {
		t.Errorf("unknown fields: %v", err)
	}
}

func TestResolveBase(t *testing.T) {
	for _, c := range []struct {
		root, base string
		key        string
		outside    bool
	}{
		{"db/t.lance/tree/b", "/tmp/x/db/t.lance", "db/t.lance", false},
		{"db/t.lance/tree/b", "s3://bucket/p/db/t.lance/", "db/t.lance", false},
		{"db/t.lance/tree/b", "s3://bucket/p/db/t.lance/tree/a/c", "db/t.lance/tree/a/c", false},
		{"db/t.lance/tree/b", "s3://bucket/p/db/u.lance", "", true},
		{"db/t.lance/tree/b", "s3://bucket/p/t.lance", "", true}, // only the last segment matches
		{"db/t.lance", "/else/db/t.lance", "db/t.lance", false},  // a base naming the dataset itself
		{"db/t.lance", "/else/db/s.lance", "", true},             // a shallow-clone source
		{"t.lance/tree/x/tree/y", "/a/t.lance/tree/x", "t.lance/tree/x", false},
		{"tree/b", "/srv/data", "", false}, // main at the store root
		{"tree/b", "/srv/data/tree/a", "tree/a", false},
		{"tree.lance/tree/b", "/r/tree.lance", "tree.lance", false},
	} {
		d := &Dataset{Root: c.root}
		r := d.resolveBase(BasePath{Path: c.base, IsDatasetRoot: true})
		if r.outside != c.outside || (!c.outside && r.key != c.key) {
			t.Errorf("root %s base %s: key %q outside %v; want %q %v", c.root, c.base, r.key, r.outside, c.key, c.outside)
		}
	}
}

func TestRefSet(t *testing.T) {
	s := NewRefSet()
	s.Add(FileRef{Key: "t.lance/data/a.lance"}, FileRef{Key: "t.lance/_indices/u1/", Prefix: true},
		FileRef{Key: "s3://x/y.lance", Outside: true})
	for key, want := range map[string]bool{
		"t.lance/data/a.lance":          true,
		"t.lance/data/a/0001.blob":      true, // blob sidecar of a referenced data file
		"t.lance/data/b/0001.blob":      false,
		"t.lance/data/a/x/0001.blob":    false,
		"t.lance/_indices/u1/index.idx": true,
		"t.lance/_indices/u1/sub/f":     true,
		"t.lance/_indices/u10/f":        false,
		"t.lance/_indices/u1":           false,
		"s3://x/y.lance":                false,
		"t.lance/data/b.lance":          false,
	} {
		if got := s.Contains(key); got != want {
			t.Errorf("Contains(%s) = %v", key, got)
		}
	}
	if s.Len() != 2 {
		t.Errorf("Len %d", s.Len())
	}
}
