// An embedder that only implements the storage contract: it depends on
// core/storage alone.
package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/storage/memstore"
)

func main() {
	ctx := context.Background()
	var d storage.Driver = memstore.New()
	s, err := storage.NewStore(ctx, "mem", d)
	if err != nil {
		panic(err)
	}
	if _, err := s.Put(ctx, "k", strings.NewReader("v"), storage.PutOptions{}); err != nil {
		panic(err)
	}
	fmt.Println("a driver of its own, through the portable store")
}
