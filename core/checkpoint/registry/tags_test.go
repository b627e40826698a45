package registry

import (
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/retain-dev/retain/core/lance"
	"github.com/retain-dev/retain/core/storage"
)

type tagVector struct {
	Comment      string `json:"comment"`
	Kind         string `json:"kind"`
	CheckpointID ID     `json:"checkpoint_id"`
	TableID      ID     `json:"table_id"`
	Incarnation  uint64 `json:"incarnation"`
	Path         string `json:"path"`
	Branch       string `json:"branch"`
	Version      uint64 `json:"version"`
	PhysicalRef  string `json:"physical_ref"`
	Tag          string `json:"tag"`
}

// testdata/tagnames.json was written by an independent implementation
// (testdata/tagnames_gen.py); every vector must recompute to the same name.
func TestTagNameVectors(t *testing.T) {
	b, err := os.ReadFile("testdata/tagnames.json")
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Vectors []tagVector `json:"vectors"`
	}
	if err := json.Unmarshal(b, &file); err != nil {
		t.Fatal(err)
	}
	if len(file.Vectors) < 10 {
		t.Fatalf("only %d vectors", len(file.Vectors))
	}
	seen := map[string]string{}
	for _, v := range file.Vectors {
		target := Target{Path: v.Path, Branch: v.Branch, Version: v.Version, PhysicalRef: v.PhysicalRef}
		var got string
		var err error
		switch v.Kind {
		case "registry":
			got, err = RegistryPinTag(v.CheckpointID, target)
		case "table":
			got, err = TablePinTag(v.CheckpointID, Pin{TableID: v.TableID, Incarnation: v.Incarnation, Target: target})
		default:
			t.Fatalf("vector kind %q", v.Kind)
		}
		if err != nil {
			t.Fatalf("%s: %v", v.Comment, err)
		}
		if got != v.Tag {
			t.Errorf("%s:\n got %s\nwant %s", v.Comment, got, v.Tag)
		}
		if other, dup := seen[got]; dup {
			t.Errorf("%q and %q give the same tag %s", other, v.Comment, got)
		}
		seen[got] = v.Comment
		checkTagName(t, got, v.CheckpointID, v.Kind)
	}
}

func checkTagName(t *testing.T, name string, id ID, kind string) {
	t.Helper()
	if err := lance.ValidateTagName(name); err != nil {
		t.Errorf("%s is not a valid Lance tag name: %v", name, err)
	}
	if len(name) != TagNameLen || TagNameLen != 101 {
		t.Errorf("%s: %d bytes, TagNameLen %d, want 101", name, len(name), TagNameLen)
	}
	for i := 0; i < len(name); i++ {
		if name[i] >= 0x80 {
			t.Errorf("%s is not ASCII", name)
		}
	}
	if !IsReservedTag(name) {
		t.Errorf("%s is not reserved", name)
	}
	p, err := ParsePinTag(name)
	if err != nil || p.CheckpointID != id || p.Kind.String() != kind || len(p.Digest) != 64 {
		t.Errorf("ParsePinTag(%s) = %+v, %v", name, p, err)
	}
}

func TestRegistryPinOfARef(t *testing.T) {
	s, _ := memStore(t)
	reg := Open(s, Options{})
	d := newDraft(t)
	c := reserveT(t, d, "nightly")
	_, ref, err := d.Encode()
	if err != nil {
		t.Fatal(err)
	}
	before, err := RegistryPinTag(c.ID, RegistryTarget(ref))
	if err != nil {
		t.Fatal(err)
	}
	got, err := reg.Commit(bg, 0, d)
	if err != nil {
		t.Fatal(err)
	}
	if got != ref {
		t.Fatalf("commit ref %v, encode ref %v", got, ref)
	}
	_, head, err := reg.Head(bg)
	if err != nil {
		t.Fatal(err)
	}
	after, _ := RegistryPinTag(c.ID, RegistryTarget(head.Ref()))
	if before != after {
		t.Fatalf("registry pin named %s before the commit, %s after", before, after)
	}
	checkTagName(t, after, c.ID, "registry")
	if back, err := ParseRef(ref.String()); err != nil || back != ref {
		t.Fatalf("ParseRef(%q) = %v, %v", ref, back, err)
	}
	cp, _ := head.ByID(c.ID)
	names, err := cp.TablePinTags()
	if err != nil || len(names) != 2 {
		t.Fatalf("table pin tags %v %v", names, err)
	}
	for _, name := range append(names, after) {
		checkTagName(t, name, c.ID, map[bool]string{true: "registry", false: "table"}[name == after])
		if !strings.HasPrefix(name, PinTagPrefix(c.ID)) {
			t.Fatalf("%s does not begin with %s", name, PinTagPrefix(c.ID))
		}
	}
	if !strings.HasPrefix(after, PinTagPrefix(c.ID)+"m_") || !strings.HasPrefix(names[0], PinTagPrefix(c.ID)+"t_") {
		t.Fatalf("kinds: %s %s", after, names[0])
	}
}

func TestParseRef(t *testing.T) {
	good := "retain-registry/1 3 120 " + strings.Repeat("ab", 32)
	if r, err := ParseRef(good); err != nil || r.Version != 3 || r.Size != 120 || r.String() != good {
		t.Fatalf("ParseRef(%q) = %+v, %v", good, r, err)
	}
	for _, bad := range []string{"", "retain-registry/1", "retain-registry/2 3 120 " + strings.Repeat("ab", 32),
		"retain-registry/1 0 120 " + strings.Repeat("ab", 32), "retain-registry/1 3 0 " + strings.Repeat("ab", 32),
		"retain-registry/1 3 120 " + strings.Repeat("AB", 32), "retain-registry/1 3 120 " + strings.Repeat("ab", 31),
		"retain-registry/1 03 120 " + strings.Repeat("ab", 32), "retain-registry/1  3 120 " + strings.Repeat("ab", 32),
		good + " ", "retain-registry/1 3 120 " + strings.Repeat("zz", 32)} {
		if _, err := ParseRef(bad); !errors.Is(err, storage.ErrInvalidArgument) {
			t.Errorf("ParseRef(%q) = %v", bad, err)
		}
	}
}

func TestPinTagRefusals(t *testing.T) {
	id := testID(1)
	good := Target{Path: "db/a.lance", Branch: MainBranch, Version: 1, PhysicalRef: "x"}
	for name, tc := range map[string]struct {
		id  ID
		pin Pin
	}{
		"bad checkpoint id":  {"NOTANID", Pin{TableID: testID(2), Incarnation: 1, Target: good}},
		"upper-case id":      {ID(strings.ToUpper(string(id))), Pin{TableID: testID(2), Incarnation: 1, Target: good}},
		"bad table id":       {id, Pin{TableID: "x", Incarnation: 1, Target: good}},
		"incarnation 0":      {id, Pin{TableID: testID(2), Target: good}},
		"empty branch":       {id, Pin{TableID: testID(2), Incarnation: 1, Target: Target{Path: "a", Version: 1, PhysicalRef: "x"}}},
		"invalid branch":     {id, Pin{TableID: testID(2), Incarnation: 1, Target: Target{Path: "a", Branch: "a..b", Version: 1, PhysicalRef: "x"}}},
		"empty path":         {id, Pin{TableID: testID(2), Incarnation: 1, Target: Target{Branch: MainBranch, PhysicalRef: "x"}}},
		"path with ..":       {id, Pin{TableID: testID(2), Incarnation: 1, Target: Target{Path: "a/../b", Branch: MainBranch, PhysicalRef: "x"}}},
		"empty physical ref": {id, Pin{TableID: testID(2), Incarnation: 1, Target: Target{Path: "a", Branch: MainBranch}}},
	} {
		if _, err := TablePinTag(tc.id, tc.pin); !errors.Is(err, storage.ErrInvalidArgument) {
			t.Errorf("%s: %v, want invalid argument", name, err)
		}
	}
	if _, err := RegistryPinTag(id, Target{Path: RegistryPath, Branch: "", Version: 1, PhysicalRef: "x"}); !errors.Is(err, ErrInvalidSnapshot) {
		t.Errorf("registry pin with empty branch: %v", err)
	}
}

func TestIsReservedTagAndParse(t *testing.T) {
	for name, want := range map[string]bool{
		"ogcp_": true, "ogcp_v1_x": true, "ogcp_user_made": true,
		"ogcp": false, "OGCP_v1": false, "v1": false, "my-ogcp_x": false, "": false,
	} {
		if IsReservedTag(name) != want {
			t.Errorf("IsReservedTag(%q) != %v", name, want)
		}
	}
	good, _ := TablePinTag(testID(1), Pin{TableID: testID(2), Incarnation: 1, Target: Target{Path: "a", Branch: MainBranch, Version: 1, PhysicalRef: "x"}})
	for _, bad := range []string{
		"ogcp_user_made", "ogcp_v1_", good[:len(good)-1], good + "0",
		strings.Replace(good, "_t_", "_x_", 1), strings.Replace(good, "_t_", "-t-", 1),
		good[:len(good)-64] + strings.ToUpper(good[len(good)-64:]),
		good[:len(good)-64] + strings.Repeat("g", 64),
		"ogcp_v1_" + strings.Repeat("A", IDLen) + good[8+IDLen:],
	} {
		if _, err := ParsePinTag(bad); err == nil {
			t.Errorf("ParsePinTag(%q) accepted", bad)
		}
	}
}

func TestIDs(t *testing.T) {
	seen := map[ID]bool{}
	for i := 0; i < 1000; i++ {
		id := NewID()
		if _, err := ParseID(string(id)); err != nil {
			t.Fatalf("NewID gave %q: %v", id, err)
		}
		if seen[id] {
			t.Fatalf("NewID repeated %q", id)
		}
		seen[id] = true
		if strings.ToLower(string(id)) != string(id) || len(id) != IDLen {
			t.Fatalf("id %q", id)
		}
	}
	for _, bad := range []string{"", "a", strings.Repeat("a", 25), strings.Repeat("a", 27),
		strings.Repeat("a", 25) + "b", // non-canonical: the last character carries bits beyond 128
		strings.Repeat("a", 25) + "1", strings.Repeat("A", 26), strings.Repeat("a", 24) + "=="} {
		if _, err := ParseID(bad); !errors.Is(err, storage.ErrInvalidArgument) {
			t.Errorf("ParseID(%q) = %v", bad, err)
		}
	}
	if _, err := ParseID(strings.Repeat("a", 25) + "e"); err != nil {
		t.Errorf("canonical id refused: %v", err)
	}
}
