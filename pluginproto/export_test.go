package pluginproto

import "testing"

// LaunchMode starts this test binary as a plugin in mode (see pluginModes),
// closed when the test ends: launch, for the benchmarks in package
// pluginproto_test.
func LaunchMode(tb testing.TB, mode string) *Client { return launch(tb, mode) }
