// Command retain-adapter-httpstore is the httpstore adapter as a retain
// storage plugin: build it, publish its SHA-256, and run it with
// `retain --adapter PATH --adapter-sha256 HEX` or `conformance run`.
// Serve is the whole main: it prints the go-plugin handshake on stdout, so
// nothing may write there first.
package main

import (
	"github.com/retain-dev/retain/conformance/examples/httpstore"
	"github.com/retain-dev/retain/pluginproto"
)

func main() { pluginproto.Serve(httpstore.Adapter) }
