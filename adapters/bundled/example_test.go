package bundled_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/retain-dev/retain/adapters/bundled"
	"github.com/retain-dev/retain/core/checkpoint"
)

// An application opens a store in its own process: no plugin subcommand
// to dispatch from main, no child process.
func ExampleOpenInProcess() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "retain-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	// A Lance table of the repository's fixtures, copied: never open a
	// fixture in place.
	if err := os.CopyFS(filepath.Join(dir, "update.lance"), os.DirFS("../../core/lance/testdata/update.lance")); err != nil {
		log.Fatal(err)
	}

	s, err := bundled.OpenInProcess(ctx, dir) // or "s3://bucket/prefix", "gs://…", "az://…"
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	tables, err := checkpoint.DiscoverTables(ctx, s)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(s.Adapter(), tables)
	// Output: localfs [update.lance]
}
