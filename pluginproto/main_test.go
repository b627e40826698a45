package pluginproto

import (
	"context"
	"fmt"
	"log"
	"os"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/retain-dev/retain/core/storage"
)

// envMode makes the test binary a plugin (or a host) instead of running
// tests: the re-exec pattern, so the tests need no separate binaries.
const envMode = "RETAIN_PLUGINPROTO_TEST_PLUGIN"

// pluginModes are what the test binary can be when re-executed. Serving
// another adapter through the plugin (for benchmarks against it in
// process) is one more entry here plus a location in testConfig's caller.
var pluginModes = map[string]func(){
	// mem serves the in-test memory driver.
	"mem": func() { Serve(testAdapter) },
	// chatty logs to stderr before serving, as real plugins do.
	"chatty": func() {
		log.Printf("chatty plugin starting (plain log line)")
		hclog.New(&hclog.LoggerOptions{Output: os.Stderr, JSONFormat: true}).Info("chatty plugin starting")
		Serve(testAdapter)
	},
	// stdout breaks the rule: it prints to stdout before the handshake.
	"stdout": func() {
		fmt.Println("hello from a plugin that talks on stdout")
		Serve(testAdapter)
	},
	// exit7 exits before its handshake with a status of its own.
	"exit7": func() { os.Exit(7) },
	// legacy answers as a plugin that predates batch reads and sessions.
	"legacy": func() { serve(testAdapter, serveConfig{legacy: true}) },
	// unpacked answers as a plugin that predates packed lists and batches.
	"unpacked": func() { serve(testAdapter, serveConfig{unpacked: true}) },
	// v2 offers only a protocol version this host does not speak.
	"v2": func() { serve(testAdapter, serveConfig{versions: []int{2}}) },
	// host launches a mem plugin, prints its pid and waits to be killed.
	"host":             func() { hostMode(true) },
	"host-nopdeathsig": func() { hostMode(false) },
}

func TestMain(m *testing.M) {
	if mode := os.Getenv(envMode); mode != "" {
		f, ok := pluginModes[mode]
		if !ok {
			fmt.Fprintf(os.Stderr, "unknown %s mode %q\n", envMode, mode)
			os.Exit(3)
		}
		f()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func hostMode(pdeathsig bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg := testConfig("mem")
	cfg.noPdeathsig = !pdeathsig
	c, err := Launch(ctx, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "host:", err)
		os.Exit(1)
	}
	fmt.Println(c.pid())
	time.Sleep(time.Minute) // until the test kills us
	os.Exit(4)
}

// testExe is this test binary.
func testExe() string {
	exe, err := os.Executable()
	if err != nil {
		return os.Args[0]
	}
	return exe
}

// testConfig launches this binary as a plugin in mode.
func testConfig(mode string) LaunchConfig {
	return LaunchConfig{
		Adapter:      "testmem",
		Path:         testExe(),
		Env:          []string{envMode + "=" + mode},
		Location:     storage.Location{Scheme: "testmem"},
		Logger:       hclog.NewNullLogger(),
		StartTimeout: 20 * time.Second,
	}
}

// launch starts a plugin in mode, closed when the test ends.
func launch(tb testing.TB, mode string, edit ...func(*LaunchConfig)) *Client {
	tb.Helper()
	cfg := testConfig(mode)
	for _, e := range edit {
		e(&cfg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := Launch(ctx, cfg)
	if err != nil {
		tb.Fatalf("launch %s: %v", mode, err)
	}
	tb.Cleanup(func() { c.Close() })
	return c
}
