// Command acme-adapter is a vendor's adapter binary in miniature: its whole
// main is one call to pluginproto.Serve. It serves a local directory (it
// borrows localfs's driver) under its own adapter name. With
// ACME_BROKEN=plain-create it lies: it declares create-if-absent native but
// writes plainly, which the conformance suite must catch.
package main

import (
	"context"
	"io"
	"os"

	"github.com/retain-dev/retain/adapters/localfs"
	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/pluginproto"
)

func main() {
	pluginproto.Serve(storage.Adapter{
		Name:    "acme-fs",
		Schemes: []string{"file"},
		Open: func(ctx context.Context, loc storage.Location) (storage.Driver, error) {
			d, err := localfs.Adapter.Open(ctx, loc)
			if err != nil || os.Getenv("ACME_BROKEN") != "plain-create" {
				return d, err
			}
			return plainCreate{d}, nil
		},
	})
}

type plainCreate struct{ storage.Driver }

func (p plainCreate) Put(ctx context.Context, key string, body io.Reader, opts storage.PutOptions) (storage.Info, error) {
	if opts.Mode == storage.PutCreateIfAbsent {
		opts.Mode = storage.PutOverwrite
	}
	return p.Driver.Put(ctx, key, body, opts)
}
