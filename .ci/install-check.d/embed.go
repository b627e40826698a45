// An embedder: creates a checkpoint of a store in process, through the
// bundled localfs adapter (no plugin process), from the released modules.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/retain-dev/retain/adapters/bundled"
	"github.com/retain-dev/retain/core/checkpoint"
)

func main() {
	ctx := context.Background()
	s, err := bundled.OpenInProcess(ctx, os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "embed:", err)
		os.Exit(1)
	}
	defer s.Close()
	c, err := checkpoint.Create(ctx, s, "embedded", "")
	if err != nil {
		fmt.Fprintln(os.Stderr, "embed:", err)
		os.Exit(1)
	}
	fmt.Printf("created checkpoint %s (%s)\n", c.Name, c.ID)
}
