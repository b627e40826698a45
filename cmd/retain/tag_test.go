package main

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/retain-dev/retain/adapters/s3"
	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/tag"
	"github.com/retain-dev/retain/internal/emulator"
	"github.com/retain-dev/retain/internal/lancetest"
)

// tagCLI runs retain and fails unless it exits with want; it returns stdout
// and stderr.
func tagCLI(t *testing.T, want int, args ...string) (string, string) {
	t.Helper()
	out, errs, code := retain(t, args...)
	if code != want {
		t.Fatalf("retain %s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, want, out, errs)
	}
	return out, errs
}

func tagJSON[T any](t *testing.T, out string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("not JSON (%v):\n%s", err, out)
	}
	return v
}

// The tag commands through the binary, on a table real Lance wrote
// (branch-tag: main v1-v3 with tag v2-tag; branch exp v2-v4 with exp-tag;
// team/x forked from exp), named by path and by file:// URI.
func TestTagCLI(t *testing.T) {
	t.Parallel() // a process-bound test: it waits on retain, Lance and emulators, not the CPU
	db := fixtureDB(t, "branch-tag")
	table := filepath.Join(db, "branch-tag.lance")
	uri := "file://" + table

	// The read-only commands write nothing, not even the adapter's folder.
	out, _ := tagCLI(t, 0, "tag", "list", table)
	if !strings.Contains(out, "v2-tag") || !strings.Contains(out, "exp-tag") {
		t.Fatalf("list of Lance's tags:\n%s", out)
	}
	tagCLI(t, 0, "tag", "show", "v2-tag", table)
	tagCLI(t, 0, "tag", "resolve", "exp-tag", table)
	for _, d := range []string{db, table} {
		if _, err := os.Stat(filepath.Join(d, ".retain-localfs")); !os.IsNotExist(err) {
			t.Fatalf("a read-only tag command wrote into %s: %v", d, err)
		}
	}

	// create: head of main, a version, the head of a branch.
	out, _ = tagCLI(t, 0, "tag", "create", "mem-1", table, "--meta", "session=s1", "--meta", "agent=a=1", "--json")
	c := tagJSON[tag.Result](t, out)
	if c.Op != "create" || c.Tag.Branch != "main" || c.Tag.Version != 3 || c.Tag.Metadata["agent"] != "a=1" || c.Tag.CreatedAt == nil ||
		!strings.Contains(c.CAS, "create-if-absent") || c.Tag.Token == "" {
		t.Fatalf("create: %+v", c)
	}
	tagCLI(t, 0, "tag", "create", "mem-2", uri, "--version", "1", "--meta", "session=s2")
	out, _ = tagCLI(t, 0, "tag", "create", "mem-exp", table, "--branch", "exp", "--meta", "session=s1", "--json")
	if e := tagJSON[tag.Result](t, out); e.Tag.Branch != "exp" || e.Tag.Version != 4 {
		t.Fatalf("create on a branch: %+v", e)
	}
	tagCLI(t, 0, "tag", "create", "mem-x2", table, "--branch", "team/x", "--version", "4")

	// Refusals: an existing tag (exit 1, untouched), usage errors (exit 2).
	before, _ := tagCLI(t, 0, "tag", "show", "mem-1", table, "--json")
	_, errs := tagCLI(t, 1, "tag", "create", "mem-1", table, "--version", "1")
	if !strings.Contains(errs, "already exists") {
		t.Fatalf("create of an existing tag: %s", errs)
	}
	if again, _ := tagCLI(t, 0, "tag", "show", "mem-1", table, "--json"); again != before {
		t.Fatalf("a refused create changed the tag:\n%s\n%s", before, again)
	}
	for _, args := range [][]string{
		{"tag", "create", "ogcp_v1_x", table},
		{"tag", "update", "ogcp_v1_x", table, "--meta", "a=b"},
		{"tag", "delete", "ogcp_v1_x", table},
		{"tag", "create", "m3", table, "--meta", "novalue"},
		{"tag", "create", "m3", table, "--meta", "retain.state=x"},
		{"tag", "create", "m3", table, "--version", "0"},
		{"tag", "create", "bad..name", table},
		{"tag", "update", "mem-1", table},
		{"tag", "list", table, "--filter", "x"},
		{"tag", "show", table},
	} {
		if _, errs, code := retain(t, args...); code != 2 {
			t.Errorf("retain %v: exit %d, want 2: %s", args, code, errs)
		} else if len(args) > 3 && strings.HasPrefix(args[3], "ogcp_") && !strings.Contains(errs, "reserved") {
			t.Errorf("retain %v: %s", args, errs)
		}
	}
	if _, err := os.Stat(filepath.Join(table, "_refs", "tags", "m3.json")); !os.IsNotExist(err) {
		t.Fatal("a refused create wrote a tag")
	}
	_, errs = tagCLI(t, 1, "tag", "create", "m3", table, "--version", "9")
	if !strings.Contains(errs, "version 9 does not exist") {
		t.Fatalf("create at a missing version: %s", errs)
	}

	// list --filter; checkpoint pins hidden unless --all.
	tagCLI(t, 0, "checkpoint", "create", "cp1", db)
	out, _ = tagCLI(t, 0, "tag", "list", table, "--filter", "session=s1", "--json")
	l := tagJSON[struct {
		Tags   []tag.Ref `json:"tags"`
		Hidden int       `json:"hidden_pins"`
	}](t, out)
	if len(l.Tags) != 2 || l.Tags[0].Name != "mem-1" || l.Tags[1].Name != "mem-exp" || l.Hidden != 0 {
		t.Fatalf("list --filter session=s1: %s", out)
	}
	out, _ = tagCLI(t, 0, "tag", "list", table, "--json")
	l = tagJSON[struct {
		Tags   []tag.Ref `json:"tags"`
		Hidden int       `json:"hidden_pins"`
	}](t, out)
	if len(l.Tags) != 6 || l.Hidden != 1 {
		t.Fatalf("list: %s", out)
	}
	out, _ = tagCLI(t, 0, "tag", "list", table, "--all")
	if !strings.Contains(out, "ogcp_v1_") {
		t.Fatalf("list --all hides the pin:\n%s", out)
	}

	// update: set, unset; a stale token is refused and writes nothing.
	old := tagJSON[tag.Ref](t, before)
	time.Sleep(5 * time.Millisecond)
	out, _ = tagCLI(t, 0, "tag", "update", "mem-1", table, "--meta", "purpose=debug", "--unset", "agent", "--if-token", old.Token, "--json")
	u := tagJSON[tag.Result](t, out)
	if len(u.Tag.Metadata) != 2 || u.Tag.Metadata["purpose"] != "debug" || !u.Tag.CreatedAt.Equal(*old.CreatedAt) ||
		!u.Tag.UpdatedAt.After(*old.UpdatedAt) || u.Tag.Version != 3 {
		t.Fatalf("update: %+v (was %+v)", u.Tag, old)
	}
	_, errs = tagCLI(t, 1, "tag", "update", "mem-1", table, "--meta", "x=1", "--if-token", old.Token)
	if !strings.Contains(errs, "changed") {
		t.Fatalf("update with a stale token: %s", errs)
	}
	_, errs = tagCLI(t, 1, "tag", "delete", "mem-1", table, "--if-token", old.Token)
	if !strings.Contains(errs, "changed") {
		t.Fatalf("delete with a stale token: %s", errs)
	}
	out, _ = tagCLI(t, 0, "tag", "update", "mem-1", table, "--meta", "only=this", "--replace")
	if !strings.Contains(out, "only=this") || strings.Contains(out, "session") {
		t.Fatalf("update --replace: %s", out)
	}
	out, _ = tagCLI(t, 0, "tag", "show", "mem-1", table)
	if !strings.Contains(out, "meta only:") || !strings.Contains(out, "token:") {
		t.Fatalf("show:\n%s", out)
	}

	// resolve: branch and version, text and JSON.
	out, _ = tagCLI(t, 0, "tag", "resolve", "mem-exp", table)
	if out != "exp\t4\n" {
		t.Fatalf("resolve: %q", out)
	}
	out, _ = tagCLI(t, 0, "tag", "resolve", "mem-2", uri, "--json")
	if r := tagJSON[tag.Resolution](t, out); r.Branch != "main" || r.Version != 1 || !r.SizeMatches || !strings.HasPrefix(r.ManifestKey, "_versions/") {
		t.Fatalf("resolve --json: %+v", r)
	}

	// Real Lance checks out the tags the CLI wrote.
	var lr struct {
		Results []struct {
			Version uint64 `json:"version"`
			Rows    int    `json:"rows"`
		} `json:"results"`
	}
	lancetest.Node(t, "refs.cjs", map[string]any{"dir": db, "table": "branch-tag", "ops": []map[string]any{
		{"op": "count", "ref": "mem-1"}, {"op": "count", "ref": "mem-2"}, {"op": "count", "ref": "mem-exp"}, {"op": "count", "ref": "mem-x2"},
	}}, &lr)
	for i, want := range []struct {
		v    uint64
		rows int
	}{{3, 6}, {1, 3}, {4, 6}, {4, 6}} {
		if got := lr.Results[i]; got.Version != want.v || got.Rows != want.rows {
			t.Errorf("Lance checks out tag %d as %+v, want %+v", i, got, want)
		}
	}

	// delete; then update, show, resolve and delete find nothing.
	out, _ = tagCLI(t, 0, "tag", "delete", "mem-2", table)
	if !strings.Contains(out, `deleted tag "mem-2"`) {
		t.Fatalf("delete: %s", out)
	}
	for _, args := range [][]string{
		{"tag", "update", "mem-2", table, "--meta", "a=b"},
		{"tag", "show", "mem-2", table},
		{"tag", "resolve", "mem-2", table},
		{"tag", "delete", "mem-2", table},
	} {
		if _, errs := tagCLI(t, 1, args...); !strings.Contains(errs, "not found") {
			t.Errorf("retain %v after the delete: %s", args, errs)
		}
	}
	if _, err := os.Stat(filepath.Join(table, "_refs", "tags", "mem-2.json")); !os.IsNotExist(err) {
		t.Fatal("the deleted tag came back")
	}

	// A folder that is not a table.
	_, errs = tagCLI(t, 1, "tag", "list", db)
	if !strings.Contains(errs, "not a Lance dataset") || !strings.Contains(errs, "branch-tag.lance") {
		t.Fatalf("list of a database folder: %s", errs)
	}
}

// Through the s3 adapter as a plugin of the binary, on gofakes3, which
// honours If-Match on PUT but not on DELETE: update is one
// replace-if-version, delete marks then deletes.
func TestTagCLIS3(t *testing.T) {
	e := emulator.GoFakeS3(t)
	for k, v := range e.Env() {
		t.Setenv(k, v)
	}
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	ctx := context.Background()
	loc, err := storage.ParseLocation("s3://retain-tags/db")
	if err != nil {
		t.Fatal(err)
	}
	d, err := s3.Open(ctx, loc)
	if err != nil {
		t.Fatal(err)
	}
	s, err := storage.NewStore(ctx, "s3", d)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	src := filepath.Join("..", "..", "core", "lance", "testdata", "branch-tag.lance")
	err = filepath.WalkDir(src, func(p string, de fs.DirEntry, err error) error {
		if err != nil || de.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		b, err := os.ReadFile(p)
		if err == nil {
			_, err = s.PutBytes(ctx, "branch-tag.lance/"+filepath.ToSlash(rel), b, storage.PutOptions{})
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	table := "s3://retain-tags/db/branch-tag.lance"
	out, _ := tagCLI(t, 0, "tag", "create", "mem", table, "--branch", "exp", "--meta", "session=s1", "--json")
	if c := tagJSON[tag.Result](t, out); c.Tag.Version != 4 || c.Tag.Key != "_refs/tags/mem.json" {
		t.Fatalf("create: %+v", c)
	}
	out, _ = tagCLI(t, 0, "tag", "update", "mem", table, "--meta", "purpose=x", "--json")
	u := tagJSON[tag.Result](t, out)
	if u.Tag.Metadata["purpose"] != "x" || !strings.Contains(u.CAS, "replace-if-version native") {
		t.Fatalf("update: %+v", u)
	}
	out, _ = tagCLI(t, 0, "tag", "list", table, "--filter", "purpose=x")
	if !strings.Contains(out, "mem ") || strings.Contains(out, "v2-tag") {
		t.Fatalf("list --filter:\n%s", out)
	}
	out, _ = tagCLI(t, 0, "tag", "delete", "mem", table, "--if-token", u.Tag.Token, "--json")
	if del := tagJSON[tag.Result](t, out); !strings.Contains(del.CAS, "mark, then delete") {
		t.Fatalf("delete: %+v", del)
	}
	tagCLI(t, 1, "tag", "show", "mem", table)
	if _, err := s.Stat(ctx, "branch-tag.lance/_refs/tags/mem.json"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("after the delete: %v", err)
	}
	_, errs := tagCLI(t, 1, "tag", "list", "s3://retain-tags/db")
	if !strings.Contains(errs, "not a Lance dataset") || !strings.Contains(errs, "branch-tag.lance") {
		t.Fatalf("list of the database prefix: %s", errs)
	}
}
