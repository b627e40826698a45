// Command faultadapter is a vendor adapter binary for tests: localfs with
// injected faults, configured from RETAIN_FAULT_* environment variables
// (see package internal/faultadapter). Run it through retain:
//
//	retain --adapter ./faultadapter checkpoint list /data/lance
//
// Its main is one call to pluginproto.Serve, as a vendor's is.
package main

import (
	"github.com/retain-dev/retain/internal/faultadapter"
	"github.com/retain-dev/retain/pluginproto"
)

func main() {
	pluginproto.Serve(faultadapter.FromEnv())
}
