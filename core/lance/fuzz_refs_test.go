package lance

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/retain-dev/retain/core/storage"
)

// Fuzz targets for tag and branch files and names. Seeds: files real Lance
// wrote (the constants in tags_test.go and branches_test.go, copied from
// real datasets, and every _refs/ file of the committed fixtures), the
// variant tables judged against real Lance, and the tricky names.
//
//	go test -run '^$' -fuzz FuzzTagJSON -fuzztime 30s ./core/lance/

// refSeedFiles returns the bodies of the committed fixtures' ref files of
// one kind ("tags" or "branches").
func refSeedFiles(f *testing.F, kind string) [][]byte {
	var out [][]byte
	_ = filepath.WalkDir("testdata", func(p string, e fs.DirEntry, err error) error {
		if err == nil && !e.IsDir() && strings.Contains(filepath.ToSlash(p), "/_refs/"+kind+"/") {
			if b, err := os.ReadFile(p); err == nil {
				out = append(out, b)
			}
		}
		return nil
	})
	return out
}

// FuzzTagJSON: any bytes as a tag file give either a Tag or a typed
// ErrMalformedTag naming the key, never a panic; an accepted tag re-encodes
// (as Lance writes it) to a file that reads back the same.
func FuzzTagJSON(f *testing.F) {
	f.Add([]byte(lanceTagFile))
	for _, v := range tagVariants {
		f.Add([]byte(v.body))
	}
	for _, b := range refSeedFiles(f, "tags") {
		f.Add(b)
	}
	s := refMemStore(f)
	d := refFakeDataset(f, s, "t.lance", 10)
	const key = "t.lance/_refs/tags/fz.json"
	f.Fuzz(func(t *testing.T, body []byte) {
		if _, err := s.PutBytes(refCtx, key, body, storage.PutOptions{}); err != nil {
			t.Fatal(err)
		}
		tag, err := d.ReadTag(refCtx, "fz")
		if err != nil {
			var me *MalformedRefError
			if !errors.Is(err, ErrMalformedTag) || !errors.As(err, &me) || me.Key != key || !strings.Contains(err.Error(), key) {
				t.Fatalf("untyped error %T: %v", err, err)
			}
			return
		}
		if tag.Name != "fz" || tag.Info.Key != key {
			t.Fatalf("tag %+v", tag)
		}
		if tag.Branch != "" && ValidateBranchName(tag.Branch) != nil {
			t.Fatalf("accepted branch %q", tag.Branch)
		}
		again, err := parseTag(encodeTag(tag))
		if err != nil {
			t.Fatalf("re-encoded tag does not parse: %v\n%s", err, encodeTag(tag))
		}
		if again.Branch != tag.Branch || again.Version != tag.Version || again.ManifestSize != tag.ManifestSize ||
			!again.CreatedAt.Equal(tag.CreatedAt) || !again.UpdatedAt.Equal(tag.UpdatedAt) || len(again.Metadata) != len(tag.Metadata) {
			t.Fatalf("round trip: %+v became %+v", tag, again)
		}
		for k, v := range tag.Metadata {
			if again.Metadata[k] != v {
				t.Fatalf("metadata %q: %q became %q", k, v, again.Metadata[k])
			}
		}
		// A listing sees the same tag.
		tags, err := d.ListTags(refCtx)
		if err != nil || len(tags) != 1 || tags[0].Version != tag.Version {
			t.Fatalf("ListTags = %+v, %v", tags, err)
		}
	})
}

// FuzzBranchJSON: any bytes as a branch file give either a Branch or a
// typed ErrMalformedBranch naming the key, never a panic.
func FuzzBranchJSON(f *testing.F) {
	f.Add([]byte(lanceBranchFile))
	f.Add([]byte(lanceBranchFileMain))
	for _, v := range branchVariants {
		f.Add([]byte(v.body))
	}
	for _, b := range refSeedFiles(f, "branches") {
		f.Add(b)
	}
	s := refMemStore(f)
	d := refFakeDataset(f, s, "t.lance", 10)
	const key = "t.lance/_refs/branches/a%2Fb.json"
	f.Fuzz(func(t *testing.T, body []byte) {
		if _, err := s.PutBytes(refCtx, key, body, storage.PutOptions{}); err != nil {
			t.Fatal(err)
		}
		b, err := d.ReadBranch(refCtx, "a/b")
		if err != nil {
			var me *MalformedRefError
			if !errors.Is(err, ErrMalformedBranch) || !errors.As(err, &me) || me.Key != key {
				t.Fatalf("untyped error %T: %v", err, err)
			}
			bs, lerr := d.ListBranches(refCtx)
			var mes *MalformedRefsError
			if len(bs) != 0 || !errors.As(lerr, &mes) || len(mes.Files) != 1 || mes.Files[0].Key != key {
				t.Fatalf("ListBranches of a malformed file = %+v, %v", bs, lerr)
			}
			return
		}
		if b.Name != "a/b" || b.Info.Key != key || (b.ParentBranch != "" && ValidateBranchName(b.ParentBranch) != nil) {
			t.Fatalf("branch %+v", b)
		}
		if y := b.CreatedAt.Year(); y < 1970 || y > 40000 {
			t.Fatalf("createAt %v", b.CreatedAt)
		}
	})
}

// FuzzTagName: the validator never panics; a refusal is a typed
// *NameError; an accepted name is one path segment (no '/', '\', "..",
// never "." or "..") so its file can never leave _refs/tags/, and a name
// retain writes reads back from its file name.
func FuzzTagName(f *testing.F) {
	for _, n := range trickyRefNames {
		f.Add(n)
	}
	for _, n := range []string{"v2-tag", "exp-tag", "lance-main", "ref.lock.x", "a\x00", "\xff"} {
		f.Add(n)
	}
	d := &Dataset{Root: "db/t.lance"}
	f.Fuzz(func(t *testing.T, name string) {
		err := ValidateTagName(name)
		if err != nil {
			var ne *NameError
			if !errors.As(err, &ne) || !errors.Is(err, ErrInvalidName) || !errors.Is(err, storage.ErrInvalidArgument) || ne.Ref != "tag" {
				t.Fatalf("untyped refusal %T: %v", err, err)
			}
			if _, ferr := tagFileName(name); ferr == nil {
				t.Fatalf("tagFileName accepts %q, which the validator refuses", name)
			}
			return
		}
		if name == "" || name == "." || name == ".." || strings.ContainsAny(name, `/\`) || strings.Contains(name, "..") ||
			!utf8.ValidString(name) || strings.HasSuffix(name, ".lock") {
			t.Fatalf("accepted %q", name)
		}
		if len(name) > 512 {
			return // the store's key limit, not Lance's rules, bounds these
		}
		file, err := tagFileName(name)
		if err != nil {
			if pathPartEncode(name) == name {
				t.Fatalf("tagFileName refuses %q: %v", name, err)
			}
			return // non-ASCII: Lance accepts it but cannot list it back
		}
		key := d.Key(tagsDir + "/" + file)
		rest, under := strings.CutPrefix(key, "db/t.lance/_refs/tags/")
		if storage.ValidateKey("put", key) != nil || !under || strings.Contains(rest, "/") {
			t.Fatalf("tag %q has key %q", name, key)
		}
		if back, reason := tagNameFromFile(file); back != name || reason != "" {
			t.Fatalf("tag %q read back from %q as %q (%s)", name, file, back, reason)
		}
	})
}

// FuzzBranchName: the validator never panics; an accepted name's segments
// are valid key segments, its tree/ root stays under the dataset, and its
// ref file name is one segment that decodes back to the name.
func FuzzBranchName(f *testing.F) {
	for _, n := range trickyRefNames {
		f.Add(n)
	}
	for _, n := range []string{"exp", "team/x", "feat/x", "deep/a/b", "a/%2F", "a%2Fb"} {
		f.Add(n)
	}
	d := &Dataset{Root: "db/t.lance"}
	f.Fuzz(func(t *testing.T, name string) {
		err := ValidateBranchName(name)
		if err != nil {
			var ne *NameError
			if !errors.As(err, &ne) || !errors.Is(err, ErrInvalidName) || ne.Ref != "branch" {
				t.Fatalf("untyped refusal %T: %v", err, err)
			}
			if _, derr := d.Branch(name); derr == nil {
				t.Fatalf("Branch accepts %q, which the validator refuses", name)
			}
			return
		}
		for _, seg := range strings.Split(name, "/") {
			if seg == "" || seg == "." || seg == ".." || strings.Contains(seg, `\`) {
				t.Fatalf("accepted %q with segment %q", name, seg)
			}
		}
		if name == "main" || strings.HasSuffix(name, ".lock") || !utf8.ValidString(name) {
			t.Fatalf("accepted %q", name)
		}
		if len(name) > 512 {
			return // the store's key limit, not Lance's rules, bounds these
		}
		b, err := d.Branch(name)
		if err != nil || b.Root != "db/t.lance/tree/"+name || storage.ValidateKey("put", b.Key("_versions/1.manifest")) != nil {
			t.Fatalf("Branch(%q) = %+v, %v", name, b, err)
		}
		file, err := branchFileName(name)
		if err != nil || strings.Contains(file, "/") || storage.ValidateKey("put", d.Key(branchesDir+"/"+file)) != nil {
			t.Fatalf("branch %q has file %q, %v", name, file, err)
		}
		if back, reason := branchNameFromFile(file); back != name || reason != "" {
			t.Fatalf("branch %q read back from %q as %q (%s)", name, file, back, reason)
		}
	})
}
