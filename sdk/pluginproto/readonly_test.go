package pluginproto

import (
	"testing"

	"github.com/retain-dev/retain/sdk/core"
)

func TestReadOnlyCrossesTheWire(t *testing.T) {
	loc := core.Location{Scheme: "file", Path: "/x", ReadOnly: true}
	if got := locationFromPB(locationToPB(loc)); !got.ReadOnly {
		t.Error("Location.ReadOnly lost on the wire")
	}
	if got := locationFromPB(locationToPB(core.Location{Scheme: "file", Path: "/x"})); got.ReadOnly {
		t.Error("Location.ReadOnly appeared on the wire")
	}
	if got := capsFromPB(capsToPB(core.Capabilities{ReadOnly: true})); !got.ReadOnly {
		t.Error("Capabilities.ReadOnly lost on the wire")
	}
	if got := capsFromPB(capsToPB(core.Capabilities{})); got.ReadOnly {
		t.Error("Capabilities.ReadOnly appeared on the wire")
	}
	// A plugin that ignored the request still reads as read-only to the host.
	c := forceReadOnly(core.Capabilities{
		CreateIfAbsent: core.Capability{Level: core.LevelNative, Scope: core.ScopeGlobal},
		Gates:          []core.GateSpec{{Name: "g", Scope: core.ScopeHost}},
	})
	if !c.ReadOnly || c.CreateIfAbsent.Level != core.LevelNone || len(c.Gates) != 0 {
		t.Errorf("forceReadOnly: %+v", c)
	}
}
