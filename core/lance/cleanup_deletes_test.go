package lance

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/retain-dev/retain/core/storage"
)

// notFoundDriver answers a delete of any key in gone with ErrNotFound, as
// a store that tells "already absent" apart may.
type notFoundDriver struct {
	storage.Driver
	gone map[string]bool
}

func (d notFoundDriver) DeleteMany(ctx context.Context, keys []string) ([]storage.DeleteResult, error) {
	out, err := d.Driver.DeleteMany(ctx, keys)
	for i := range out {
		if d.gone[out[i].Key] {
			out[i].Err = storage.Errorf("delete", out[i].Key, storage.ErrNotFound, "no such object")
		}
	}
	return out, err
}

// TestExecuteCleanupNamesEveryUnconfirmedDelete: a batch call that fails
// leaves every key of it unconfirmed: none is counted, each is named, and
// Remaining lists them with the files never attempted.
func TestExecuteCleanupNamesEveryUnconfirmedDelete(t *testing.T) {
	dir := copyFixture(t, "deletes")
	g := &guardDriver{okBatches: 0}
	d := mustOpen(t, guardedStore(t, dir, g), "deletes.lance")
	plan, err := d.PlanCleanup(bg, Policy{KeepLast: 1})
	if err != nil {
		t.Fatal(err)
	}
	res, err := d.ExecuteCleanup(bg, plan)
	if !errors.Is(err, ErrDeletesFailed) || !errors.Is(err, storage.ErrUnavailable) {
		t.Fatalf("want ErrDeletesFailed over the call's error, got %v", err)
	}
	if res.FilesDeleted != 0 || res.ManifestsDeleted != 0 || len(res.Failed) != plan.Totals.ManifestsToDelete || !res.Started ||
		len(res.Remaining) != len(plan.Files) {
		t.Fatalf("result %+v", res)
	}
	for _, f := range res.Failed {
		if !strings.Contains(f.Err, "outcome unknown") {
			t.Fatalf("failed %s: %s", f.Key, f.Err)
		}
	}
}

// TestExecuteCleanupCountsAlreadyGone: a delete the store answers with
// "not found" is a confirmed absence, counted as deleted.
func TestExecuteCleanupCountsAlreadyGone(t *testing.T) {
	dir := copyFixture(t, "deletes")
	s := openStore(t, dir)
	d := mustOpen(t, s, "deletes.lance")
	plan, err := d.PlanCleanup(bg, Policy{KeepLast: 1})
	if err != nil {
		t.Fatal(err)
	}
	drv, err := storage.NewStore(bg, "localfs", notFoundDriver{Driver: s.Driver(), gone: map[string]bool{plan.Files[0].Key: true}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := mustOpen(t, drv, "deletes.lance").ExecuteCleanup(bg, plan)
	if err != nil || len(res.Failed) != 0 || res.FilesDeleted != len(plan.Files) || len(res.Remaining) != 0 {
		t.Fatalf("%+v, %v", res, err)
	}
}
