package lance

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/retain-dev/retain/adapters/s3"
	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/internal/emulator"
)

// refS3Store opens the s3 adapter on gofakes3 (in this process), with the
// machine's AWS configuration kept out.
func refS3Store(t *testing.T, uri string) *storage.Store {
	t.Helper()
	e := emulator.GoFakeS3(t)
	emulator.IsolateAWS(t, e.Env())
	loc, err := storage.ParseLocation(uri)
	if err != nil {
		t.Fatal(err)
	}
	d, err := s3.Open(refCtx, loc)
	if err != nil {
		t.Fatalf("open %s on %s: %v", uri, e.Name, err)
	}
	s, err := storage.NewStore(refCtx, "s3", d)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// refCopyPrefix copies every object under prefix from one store to another
// through the Store API.
func refCopyPrefix(t *testing.T, from, to *storage.Store, prefix string) int {
	t.Helper()
	objs, err := from.List(refCtx, prefix, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		b, _, err := from.ReadAll(refCtx, o.Key)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := to.PutBytes(refCtx, o.Key, b, storage.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return len(objs)
}

// Tags on S3 (gofakes3 through the s3 adapter): a dataset real Lance wrote
// is copied into the bucket; retain lists Lance's tag there, creates one
// with native create-if-absent (a second create is refused), and a tag it
// wrote on S3 is a tag real Lance checks out. gofakes3 ignores If-Match on
// DELETE, so the adapter declares delete-if-version none: a conditional
// delete is refused with the tag kept, an unconditional one works.
func TestTagsOnS3GoFakeS3(t *testing.T) {
	dir := t.TempDir()
	refsRun(t, dir,
		refOp{"op": "create", "rows": 2},
		refOp{"op": "add", "rows": 2},
		refOp{"op": "add", "rows": 1},
		refOp{"op": "tagCreate", "name": "lance-tag", "version": 2},
	)
	local := refDirStore(t, dir)
	st := refS3Store(t, "s3://retain-lance/db?conditional-delete=auto")
	if n := refCopyPrefix(t, local, st, "t.lance/"); n < 8 {
		t.Fatalf("copied only %d objects", n)
	}
	if c := st.Capabilities(); c.CreateIfAbsent.Level != storage.LevelNative || c.DeleteIfVersion.Level != storage.LevelNone {
		t.Fatalf("gofakes3 capabilities: %+v", c)
	}
	d, err := Open(st, "t.lance")
	if err != nil {
		t.Fatal(err)
	}
	tags, err := d.ListTags(refCtx)
	if err != nil || refTagNames(tags) != "lance-tag" || tags[0].Version != 2 {
		t.Fatalf("ListTags on S3 = %+v, %v", tags, err)
	}
	v3, err := d.VersionAt(refCtx, 3)
	if err != nil {
		t.Fatal(err)
	}
	tag, err := d.CreateTag(refCtx, "on-s3", 3, map[string]string{"store": "s3"})
	if err != nil || tag.ManifestSize != uint64(v3.Info.Size) || tag.Info.Version == "" {
		t.Fatalf("CreateTag on S3 = %+v, %v", tag, err)
	}
	_, err = d.CreateTag(refCtx, "on-s3", 1, nil)
	refWantIs(t, "second create on S3", err, ErrTagExists, storage.ErrAlreadyExists)
	got, err := d.ReadTag(refCtx, "on-s3")
	if err != nil || got.Version != 3 || got.Info.Version != tag.Info.Version {
		t.Fatalf("ReadTag on S3 = %+v, %v", got, err)
	}
	tags, err = d.ListTags(refCtx)
	if err != nil || refTagNames(tags) != "lance-tag,on-s3" {
		t.Fatalf("ListTags on S3 = %q, %v", refTagNames(tags), err)
	}

	// The tag file retain wrote to S3 is one real Lance checks out.
	body, _, err := st.ReadAll(refCtx, tag.Info.Key)
	if err != nil {
		t.Fatal(err)
	}
	refWriteFile(t, filepath.Join(dir, "t.lance/_refs/tags/on-s3.json"), string(body))
	res := refsRun(t, dir, refOp{"op": "tags"}, refOp{"op": "count", "ref": "on-s3"}, refOp{"op": "count", "ref": 3})
	if l := refLanceTagsOf(t, res[0])["on-s3"]; l.Version != 3 || l.ManifestSize != tag.ManifestSize {
		t.Fatalf("Lance lists the S3 tag as %+v", l)
	}
	if a, b := refDecode[refLanceCount](t, res[1]), refDecode[refLanceCount](t, res[2]); a != b || a.Rows != 5 {
		t.Fatalf("by tag %+v, by version %+v", a, b)
	}

	err = d.DeleteTag(refCtx, "on-s3", tag.Info.Version)
	refWantIs(t, "delete-if-version on gofakes3", err, storage.ErrUnsupported)
	if !strings.Contains(err.Error(), "kept") {
		t.Errorf("the refusal does not say the tag was kept: %v", err)
	}
	if _, err := d.ReadTag(refCtx, "on-s3"); err != nil {
		t.Fatalf("the tag did not stay: %v", err)
	}
	if err := d.DeleteTag(refCtx, "on-s3", ""); err != nil {
		t.Fatal(err)
	}
	tags, err = d.ListTags(refCtx)
	if err != nil || refTagNames(tags) != "lance-tag" {
		t.Fatalf("ListTags after delete = %q, %v", refTagNames(tags), err)
	}
	refWantIs(t, "delete a deleted tag", d.DeleteTag(refCtx, "on-s3", ""), ErrTagNotFound, storage.ErrNotFound)
}
