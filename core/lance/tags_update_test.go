package lance

import (
	"context"
	"testing"
	"time"

	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/storage/memstore"
)

// UpdateTagFile rewrites exactly what Lance's tags.update rewrites
// (updatedAt; here the metadata too) and only the state read.
func TestUpdateTagFile(t *testing.T) {
	s := refMemStore(t)
	d := refFakeDataset(t, s, "t.lance", 100, 200)
	created := time.Date(2026, 11, 30, 16, 6, 37, 296483849, time.UTC)
	orig, err := d.PutTagFile(refCtx, Tag{Name: "m", Branch: "", Version: 2, ManifestSize: 200, CreatedAt: created, Metadata: map[string]string{"a": "1"}})
	if err != nil {
		t.Fatal(err)
	}
	old, err := d.ReadTag(refCtx, "m")
	if err != nil {
		t.Fatal(err)
	}
	// A clock behind the old updatedAt still moves it forward.
	up, err := d.UpdateTagFile(refCtx, old, map[string]string{"b": "2"}, UpdateTagOptions{Now: created.Add(-time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if !up.UpdatedAt.After(old.UpdatedAt) || !up.CreatedAt.Equal(created) || up.Version != 2 || up.ManifestSize != 200 || up.Info.Version == old.Info.Version {
		t.Fatalf("updated %+v from %+v", up, old)
	}
	body, _, err := s.ReadAll(refCtx, "t.lance/_refs/tags/m.json")
	if err != nil {
		t.Fatal(err)
	}
	want := "{\n  \"branch\": null,\n  \"version\": 2,\n  \"createdAt\": \"2026-11-30T16:06:37.296483849Z\",\n  \"updatedAt\": \"2026-11-30T16:06:37.296484849Z\",\n  \"manifestSize\": 200,\n  \"metadata\": {\n    \"b\": \"2\"\n  }\n}"
	if string(body) != want {
		t.Fatalf("wrote\n%s\nwant\n%s", body, want)
	}
	// The state read before is stale: refused, nothing written.
	_, err = d.UpdateTagFile(refCtx, old, map[string]string{"c": "3"}, UpdateTagOptions{})
	refWantIs(t, "stale update", err, ErrTagChanged, storage.ErrPreconditionFailed)
	_, err = d.UpdateTagFile(refCtx, orig, map[string]string{"c": "3"}, UpdateTagOptions{Gated: true})
	refWantIs(t, "stale gated update", err, ErrTagChanged, storage.ErrPreconditionFailed)
	if again, _, _ := s.ReadAll(refCtx, "t.lance/_refs/tags/m.json"); string(again) != want {
		t.Fatal("a refused update wrote")
	}
	// Deleted: not found, never created again.
	if err := d.DeleteTag(refCtx, "m", up.Info.Version); err != nil {
		t.Fatal(err)
	}
	for _, gated := range []bool{false, true} {
		_, err = d.UpdateTagFile(refCtx, up, map[string]string{"c": "3"}, UpdateTagOptions{Gated: gated})
		refWantIs(t, "update of a deleted tag", err, ErrTagNotFound, storage.ErrNotFound)
		if _, err := s.Stat(refCtx, "t.lance/_refs/tags/m.json"); err == nil {
			t.Fatal("an update revived the tag")
		}
	}
	_, err = d.UpdateTagFile(refCtx, Tag{Name: "m"}, nil, UpdateTagOptions{})
	refWantIs(t, "a tag not read from the store", err, storage.ErrInvalidArgument)
}

type noReplaceDriver struct{ *memstore.Driver }

func (d noReplaceDriver) Capabilities(ctx context.Context) (storage.Capabilities, error) {
	c, err := d.Driver.Capabilities(ctx)
	c.ReplaceIfVersion = storage.Capability{Level: storage.LevelNone, Reason: "test"}
	return c, err
}

// Without replace-if-version the update is refused, never a plain put.
func TestUpdateTagFileUnsupported(t *testing.T) {
	s, err := storage.NewStore(refCtx, "memory", noReplaceDriver{memstore.New()})
	if err != nil {
		t.Fatal(err)
	}
	d := refFakeDataset(t, s, "", 100)
	if _, err := d.CreateTag(refCtx, "m", 1, nil); err != nil {
		t.Fatal(err)
	}
	old, _ := d.ReadTag(refCtx, "m")
	_, err = d.UpdateTagFile(refCtx, old, map[string]string{"a": "1"}, UpdateTagOptions{})
	refWantIs(t, "update without replace-if-version", err, storage.ErrUnsupported)
	if cur, _ := d.ReadTag(refCtx, "m"); cur.Info.Version != old.Info.Version {
		t.Fatal("the refused update wrote")
	}
}
