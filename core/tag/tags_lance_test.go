package tag

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/retain-dev/retain/adapters/localfs"
	"github.com/retain-dev/retain/core/lance"
	"github.com/retain-dev/retain/core/refs/refmeta"
	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/internal/lancetest"
)

// Real Lance (LanceDB 0.39 / Lance 12, internal/lancetest's refs.cjs) and
// retain on the same table: Lance lists and checks out the tags retain
// creates and updates, keeps their metadata and createdAt through its own
// tags.update (so it parsed them), and retain reads the tags Lance writes.
// LanceDB's JS tags API has no metadata (TagContents is {version,
// manifestSize}; create/update take a name and a version), so Lance-made
// tags carry an empty map, which retain can then fill.

type tagLanceOp map[string]any

func tagLanceRun(t *testing.T, dir string, ops ...tagLanceOp) []json.RawMessage {
	t.Helper()
	var out struct {
		Results []json.RawMessage `json:"results"`
	}
	lancetest.Node(t, "refs.cjs", map[string]any{"dir": dir, "table": "t", "naming": "v2", "ops": ops}, &out)
	if len(out.Results) != len(ops) {
		t.Fatalf("refs.cjs returned %d results for %d ops", len(out.Results), len(ops))
	}
	return out.Results
}

func tagLanceDecode[T any](t *testing.T, raw json.RawMessage) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("decoding %s: %v", raw, err)
	}
	return v
}

type tagLanceTag struct {
	Version      uint64 `json:"version"`
	ManifestSize uint64 `json:"manifestSize"`
}

type tagLanceCount struct {
	Version uint64 `json:"version"`
	Rows    int    `json:"rows"`
	Error   string `json:"error"`
}

func tagLocalTags(t *testing.T, dir string) *Tags {
	t.Helper()
	d, err := localfs.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	s, err := storage.NewStore(tagCtx, "localfs", d)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	ds, err := lance.Open(s, "t.lance")
	if err != nil {
		t.Fatal(err)
	}
	return New(ds, Options{Scope: storage.ScopeHost})
}

func TestTagsWithLance(t *testing.T) {
	dir := t.TempDir()
	tagLanceRun(t, dir,
		tagLanceOp{"op": "create", "rows": 3},
		tagLanceOp{"op": "add", "rows": 2},
		tagLanceOp{"op": "add", "rows": 1},
		tagLanceOp{"op": "branchCreate", "name": "exp", "from": "main", "version": 2},
		tagLanceOp{"op": "add", "rows": 4, "on": "exp"},
		tagLanceOp{"op": "tagCreate", "name": "lance-made", "version": 2},
		tagLanceOp{"op": "tagCreate", "name": "lance-branch", "version": 3, "on": "exp"},
	)
	tags := tagLocalTags(t, dir)

	// retain reads the tags Lance wrote: times set, metadata empty.
	list, err := tags.List(tagCtx, nil)
	if err != nil || len(list) != 2 || list[0].Name != "lance-branch" || list[1].Name != "lance-made" {
		t.Fatalf("List = %+v, %v", list, err)
	}
	for _, l := range list {
		if l.CreatedAt == nil || l.UpdatedAt == nil || !l.CreatedAt.Equal(*l.UpdatedAt) || time.Since(*l.CreatedAt) > 5*time.Minute ||
			len(l.Metadata) != 0 || l.Reserved || l.Deleting {
			t.Fatalf("Lance's tag read as %+v", l)
		}
	}
	if list[0].Branch != "exp" || list[0].Version != 3 || list[1].Branch != "main" || list[1].Version != 2 {
		t.Fatalf("Lance's tags read as %+v", list)
	}

	// retain creates tags with metadata: a version of main, main's head,
	// the head of the branch; fills the metadata of Lance's tag; updates.
	mustCreate := func(name string, o CreateOptions) Ref {
		t.Helper()
		res, err := tags.Create(tagCtx, name, o)
		if err != nil {
			t.Fatal(err)
		}
		return res.Tag
	}
	mainTag := mustCreate("mem-main", CreateOptions{Version: 2, Metadata: map[string]string{"session": "s1", "agent": "a1"}})
	headTag := mustCreate("mem-head", CreateOptions{Metadata: map[string]string{"session": "s2"}})
	expTag := mustCreate("mem-exp", CreateOptions{Branch: "exp", Metadata: map[string]string{"session": "s1", "purpose": "try x"}})
	oneTag := mustCreate("mem-one", CreateOptions{Version: 1, Metadata: map[string]string{"note": "é \"quoted\"\n"}})
	if headTag.Version != 3 || expTag.Version != 3 || expTag.Branch != "exp" || oneTag.Version != 1 {
		t.Fatalf("created %+v %+v %+v", headTag, expTag, oneTag)
	}
	time.Sleep(5 * time.Millisecond)
	up, err := tags.UpdateMeta(tagCtx, "mem-main", MetaUpdate{Set: map[string]string{"purpose": "debug"}, IfToken: mainTag.Token})
	if err != nil {
		t.Fatal(err)
	}
	mainTag = up.Tag
	if !mainTag.UpdatedAt.After(*mainTag.CreatedAt) || len(mainTag.Metadata) != 3 {
		t.Fatalf("updated %+v", mainTag)
	}
	if _, err := tags.UpdateMeta(tagCtx, "lance-made", MetaUpdate{Set: map[string]string{"by": "lance", "session": "s1"}}); err != nil {
		t.Fatal(err)
	}
	sel, err := tags.List(tagCtx, refmeta.Filter{"session": "s1"})
	if err != nil || len(sel) != 3 || sel[0].Name != "lance-made" || sel[1].Name != "mem-exp" || sel[2].Name != "mem-main" {
		t.Fatalf("List(session=s1) = %+v, %v", sel, err)
	}

	// Lance lists every tag with retain's versions and sizes, and checks
	// each out at the right version (by tag = by version).
	res := tagLanceRun(t, dir,
		tagLanceOp{"op": "tags"},
		tagLanceOp{"op": "count", "ref": "mem-main"}, tagLanceOp{"op": "count", "ref": 2},
		tagLanceOp{"op": "count", "ref": "mem-head"}, tagLanceOp{"op": "count", "ref": 3},
		tagLanceOp{"op": "count", "ref": "mem-exp"}, tagLanceOp{"op": "countBranch", "name": "exp", "version": 3},
		tagLanceOp{"op": "count", "ref": "lance-made"}, tagLanceOp{"op": "count", "ref": 2},
		tagLanceOp{"op": "tagGet", "name": "mem-main"},
	)
	lt := tagLanceDecode[map[string]tagLanceTag](t, res[0])
	all, err := tags.List(tagCtx, nil)
	if err != nil || len(lt) != len(all) {
		t.Fatalf("Lance lists %s; retain %+v, %v", res[0], all, err)
	}
	for _, mine := range all {
		if l, ok := lt[mine.Name]; !ok || l.Version != mine.Version || l.ManifestSize != mine.ManifestSize {
			t.Errorf("Lance lists %s as %+v, retain has %+v", mine.Name, l, mine)
		}
	}
	for i := 1; i < 9; i += 2 {
		byTag, byVersion := tagLanceDecode[tagLanceCount](t, res[i]), tagLanceDecode[tagLanceCount](t, res[i+1])
		if byTag != byVersion || byTag.Rows == 0 {
			t.Errorf("Lance checks out by tag %s, by version %s", res[i], res[i+1])
		}
	}
	if v := tagLanceDecode[tagLanceCount](t, res[9]).Version; v != 2 {
		t.Errorf("Lance's getVersion(mem-main) = %d", v)
	}
	for _, r := range []string{"mem-main", "mem-exp"} {
		rs, err := tags.Resolve(tagCtx, r)
		want := map[string]uint64{"mem-main": 2, "mem-exp": 3}[r]
		if err != nil || rs.Version != want || !rs.SizeMatches {
			t.Errorf("Resolve(%s) = %+v, %v", r, rs, err)
		}
	}

	// Lance's own update of tags retain wrote (tags.update moves the
	// version): Lance keeps retain's metadata and createdAt and refreshes
	// updatedAt — it parsed all of them. The file it writes is byte for
	// byte what retain writes for the same tag.
	tagLanceRun(t, dir,
		tagLanceOp{"op": "tagUpdate", "name": "mem-main", "version": 3},
		tagLanceOp{"op": "tagUpdate", "name": "mem-one", "version": 2},
	)
	after, err := tags.Show(tagCtx, "mem-main")
	if err != nil {
		t.Fatal(err)
	}
	if after.Version != 3 || after.Metadata["purpose"] != "debug" || after.Metadata["session"] != "s1" || after.Metadata["agent"] != "a1" ||
		len(after.Metadata) != 3 || !after.CreatedAt.Equal(*mainTag.CreatedAt) || !after.UpdatedAt.After(*mainTag.UpdatedAt) {
		t.Fatalf("after Lance's update: %+v (retain wrote %+v)", after, mainTag)
	}
	one, err := tags.Show(tagCtx, "mem-one")
	if err != nil {
		t.Fatal(err)
	}
	lanceBytes, err := os.ReadFile(filepath.Join(dir, "t.lance", "_refs", "tags", "mem-one.json"))
	if err != nil {
		t.Fatal(err)
	}
	if mine := lance.EncodeTagFile(one.Lance()); string(mine) != string(lanceBytes) {
		t.Fatalf("Lance wrote\n%s\nretain encodes the same tag as\n%s", lanceBytes, mine)
	}
	if one.Metadata["note"] != "é \"quoted\"\n" || !one.CreatedAt.Equal(*oneTag.CreatedAt) || one.Version != 2 {
		t.Fatalf("after Lance's update: %+v", one)
	}
	// retain's CAS sees Lance's rewrite: a token from before it is stale.
	_, err = tags.UpdateMeta(tagCtx, "mem-main", MetaUpdate{Set: map[string]string{"x": "1"}, IfToken: mainTag.Token})
	tagWantIs(t, "update with the token from before Lance's rewrite", err, ErrTagChanged)

	// retain deletes; Lance no longer lists or checks it out. Lance
	// deletes a tag retain wrote; retain no longer finds it.
	if _, err := tags.Delete(tagCtx, "mem-head", headTag.Token); err != nil {
		t.Fatal(err)
	}
	res = tagLanceRun(t, dir,
		tagLanceOp{"op": "tagDelete", "name": "mem-exp"},
		tagLanceOp{"op": "tags"},
		tagLanceOp{"op": "count", "ref": "mem-head", "try": true},
	)
	lt = tagLanceDecode[map[string]tagLanceTag](t, res[1])
	if _, ok := lt["mem-head"]; ok || len(lt) != 4 {
		t.Fatalf("after retain's delete Lance lists %s", res[1])
	}
	if tagLanceDecode[tagLanceCount](t, res[2]).Error == "" {
		t.Fatalf("Lance still checks out the deleted tag: %s", res[2])
	}
	_, err = tags.Show(tagCtx, "mem-exp")
	tagWantIs(t, "Show of the tag Lance deleted", err, ErrTagNotFound)
	_, err = tags.UpdateMeta(tagCtx, "mem-exp", MetaUpdate{Set: map[string]string{"x": "1"}, IfToken: expTag.Token})
	tagWantIs(t, "update of the tag Lance deleted", err, ErrTagNotFound)
	if _, err := os.Stat(filepath.Join(dir, "t.lance", "_refs", "tags", "mem-exp.json")); !os.IsNotExist(err) {
		t.Fatalf("the tag Lance deleted came back: %v", err)
	}
}
