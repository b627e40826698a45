package checkpoint_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/retain-dev/retain/adapters/bundled"
	"github.com/retain-dev/retain/core/checkpoint"
	"github.com/retain-dev/retain/core/checkpoint/registry"
	"github.com/retain-dev/retain/core/lance"
	"github.com/retain-dev/retain/core/storage"
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
	loc, err := storage.ParseLocation(dir)
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

// A long-lived process that lists a store's checkpoints again and again
// (a health loop, as the daemon's metrics do) keeps one cache of each
// kind per store and carries them in its context: an unchanged
// checkpoint then costs no request after the first round.
func ExampleList_longLived() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "retain-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
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
	if _, err := checkpoint.Create(ctx, s, "nightly", ""); err != nil {
		log.Fatal(err)
	}

	// One of each per store, kept for the life of the process.
	ctx = lance.WithRefCache(ctx, lance.NewRefCache())
	ctx = registry.WithCache(ctx, registry.NewCache())
	for range 3 { // each round would be a tick
		_, infos, err := checkpoint.List(ctx, s)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(len(infos), "live,", infos[0].Name, infos[0].Health)
	}
	// Output:
	// 1 live, nightly ok
	// 1 live, nightly ok
	// 1 live, nightly ok
}
