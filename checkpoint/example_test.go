package checkpoint_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/retain-dev/retain/adapters/bundled"
	"github.com/retain-dev/retain/checkpoint"
	"github.com/retain-dev/retain/sdk/core"
)

// Create a checkpoint of every table of a store, then list the store's
// checkpoints: what `retain checkpoint create` and `list` do.
func ExampleCreate() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "retain-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := os.CopyFS(filepath.Join(dir, "update.lance"), os.DirFS("../lance/testdata/update.lance")); err != nil {
		log.Fatal(err)
	}
	loc, err := core.ParseLocation(dir)
	if err != nil {
		log.Fatal(err)
	}
	s, err := bundled.OpenLocationInProcess(ctx, loc)
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()

	c, err := checkpoint.Create(ctx, s, "before-migration", "") // "": branch main
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("created", c.Name, "on", c.SourceBranch)

	_, infos, err := checkpoint.List(ctx, s)
	if err != nil {
		log.Fatal(err)
	}
	for _, i := range infos {
		fmt.Println(i.Name, i.State, i.TableCount, "table(s)", i.Health)
	}
	// Output:
	// created before-migration on main
	// before-migration live 1 table(s) ok
}
