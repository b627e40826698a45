package pluginproto

import (
	"testing"

	"github.com/retain-dev/retain/core/storage"
)

func TestReadOnlyCrossesTheWire(t *testing.T) {
	loc := storage.Location{Scheme: "file", Path: "/x", ReadOnly: true}
	if got := locationFromPB(locationToPB(loc)); !got.ReadOnly {
		t.Error("Location.ReadOnly lost on the wire")
	}
	if got := locationFromPB(locationToPB(storage.Location{Scheme: "file", Path: "/x"})); got.ReadOnly {
		t.Error("Location.ReadOnly appeared on the wire")
	}
	if got := capsFromPB(capsToPB(storage.Capabilities{ReadOnly: true})); !got.ReadOnly {
		t.Error("Capabilities.ReadOnly lost on the wire")
	}
	if got := capsFromPB(capsToPB(storage.Capabilities{})); got.ReadOnly {
		t.Error("Capabilities.ReadOnly appeared on the wire")
	}
	// A plugin that ignored the request still reads as read-only to the host.
	c := forceReadOnly(storage.Capabilities{
		CreateIfAbsent: storage.Capability{Level: storage.LevelNative, Scope: storage.ScopeGlobal},
		Gates:          []storage.GateSpec{{Name: "g", Scope: storage.ScopeHost}},
	})
	if !c.ReadOnly || c.CreateIfAbsent.Level != storage.LevelNone || len(c.Gates) != 0 {
		t.Errorf("forceReadOnly: %+v", c)
	}
}
