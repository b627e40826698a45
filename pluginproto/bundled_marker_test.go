package pluginproto

import (
	"strconv"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/retain-dev/retain/core"
)

// A bundled-plugin marker leaked into the host's environment (exported in a
// shell, inherited from an ancestor) names another parent, so it never
// stops a legitimate launch.
func TestLeakedBundledMarkerIgnored(t *testing.T) {
	for _, v := range []string{"1", strconv.Itoa(1 << 30)} {
		t.Setenv(EnvBundledHost, v)
		ctx := ctxT(t, 30*time.Second)
		c, err := LaunchBundled(ctx, "testmem", core.Location{Scheme: "testmem"}, hclog.NewNullLogger())
		if err != nil {
			t.Fatalf("%s=%s: %v", EnvBundledHost, v, err)
		}
		c.Close()
	}
}
