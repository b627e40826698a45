package retention_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/retain-dev/retain/adapters/bundled"
	"github.com/retain-dev/retain/core/retention"
	"github.com/retain-dev/retain/core/storage"
)

// Preview a cleanup, then run it: what `retain cleanup preview` and
// `retain cleanup run --confirm-write-outage` do.
func ExampleRun() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "retain-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	// update.lance has versions 1 and 2 on main.
	if err := os.CopyFS(filepath.Join(dir, "update.lance"), os.DirFS("../lance/testdata/update.lance")); err != nil {
		log.Fatal(err)
	}
	loc, err := storage.ParseLocation(dir)
	if err != nil {
		log.Fatal(err)
	}
	s, err := bundled.OpenLocationInProcess(ctx, loc)
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	policy := retention.Policy{KeepLast: 1}

	// Preview reads only; its plan is provisional.
	plan, err := retention.Preview(ctx, s, policy)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("preview: %d kept, %d removed, %d files\n",
		plan.Totals.VersionsKept, plan.Totals.VersionsRemoved, plan.Totals.FilesToDelete)

	// Run plans again under the store's claim and deletes. The caller
	// confirms no writer commits meanwhile (or runs Online, with a time
	// window).
	rep, err := retention.Run(ctx, s, policy, retention.RunOptions{ConfirmWriteOutage: true})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("run: %d removed, %d files deleted, %d failed\n",
		rep.Totals.VersionsRemoved, rep.Totals.FilesDeleted, rep.Failed)
	// Output:
	// preview: 1 kept, 1 removed, 2 files
	// run: 1 removed, 2 files deleted, 0 failed
}
