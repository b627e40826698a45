package bundled

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/retain-dev/retain/core/storage"
)

// TestMain dispatches the plugin subcommand as the retain binary does, so
// the tests below launch this test binary as a bundled plugin.
func TestMain(m *testing.M) {
	if len(os.Args) >= 3 && os.Args[1] == PluginCommand {
		if err := Serve(os.Args[2]); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func launchT(t *testing.T, name string) (*storage.Store, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	loc, err := storage.ParseLocation("file://" + t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	s, err := OpenAdapter(ctx, name, loc, hclog.NewNullLogger())
	if err == nil {
		t.Cleanup(func() { s.Close() })
	}
	return s, err
}

func TestBundledAdapterRunsAsPluginOfItsBinary(t *testing.T) {
	s, err := launchT(t, "localfs")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(context.Background(), "k", strings.NewReader("v"), storage.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := launchT(t, "nope"); !errors.Is(err, storage.ErrUnavailable) {
		t.Fatalf("an adapter this binary lacks: %v, want ErrUnavailable", err)
	}
	err = self.Serve([]storage.Adapter{{Name: "s3"}, {Name: "localfs"}}, "gcs")
	var ce *storage.Error
	if !errors.As(err, &ce) || ce.Kind != storage.ErrInvalidArgument || !strings.Contains(ce.Msg, `"gcs"`) || !strings.Contains(ce.Msg, "localfs, s3") {
		t.Fatalf("serving an unknown adapter: %v", err)
	}
}

// A bundled-plugin marker leaked into the host's environment (exported in a
// shell, inherited from an ancestor) names another parent, so it never
// stops a legitimate launch.
func TestLeakedBundledMarkerIgnored(t *testing.T) {
	for _, v := range []string{"1", strconv.Itoa(1 << 30)} {
		t.Setenv(EnvHost, v)
		if _, err := launchT(t, "localfs"); err != nil {
			t.Fatalf("%s=%s: %v", EnvHost, v, err)
		}
	}
}
