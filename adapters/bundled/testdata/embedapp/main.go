// Command embedapp is an application embedding retain the obvious way: its
// main opens a store, with no plugin dispatch line. It takes everything
// from the environment, as a real application takes its configuration, so
// a copy of it launched as its own plugin does exactly the same again:
// EMBEDAPP_MODE=plugin (bundled.Open) or inprocess (bundled.OpenInProcess),
// EMBEDAPP_STORE the store.
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/retain-dev/retain/adapters/bundled"
	"github.com/retain-dev/retain/core/checkpoint"
	"github.com/retain-dev/retain/core/storage"
)

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var (
		s   *storage.Store
		err error
	)
	store := os.Getenv("EMBEDAPP_STORE")
	if os.Getenv("EMBEDAPP_MODE") == "inprocess" {
		s, err = bundled.OpenInProcess(ctx, store)
	} else {
		s, err = bundled.Open(ctx, store, hclog.NewNullLogger())
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "embedapp:", err)
		os.Exit(1)
	}
	defer s.Close()
	_, infos, err := checkpoint.List(ctx, s)
	if err != nil {
		fmt.Fprintln(os.Stderr, "embedapp:", err)
		os.Exit(1)
	}
	fmt.Printf("opened, %d checkpoints\n", len(infos))
}
