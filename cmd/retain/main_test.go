package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/retain-dev/retain/adapters/localfs"
	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/storage/claim"
	"github.com/retain-dev/retain/internal/emulator"
)

var bin string

// TestMain builds retain once: the CLI is tested as a user runs it, and its
// bundled adapters run as plugins of that binary.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "retain-cli-")
	if err != nil {
		panic(err)
	}
	bin = filepath.Join(dir, "retain")
	if b, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		panic(string(b))
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// retainEnv runs the binary with extra environment variables; retain
// runs it with none.
func retainEnv(t *testing.T, env []string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

func retain(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	return retainEnv(t, nil, args...)
}

func TestVersion(t *testing.T) {
	out, _, code := retain(t, "version", "--json")
	var v struct {
		PluginProtocol  int      `json:"plugin_protocol"`
		BundledAdapters []string `json:"bundled_adapters"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &v) != nil || v.PluginProtocol != 1 || len(v.BundledAdapters) == 0 {
		t.Fatalf("version: %d %s", code, out)
	}
}

// adapters list starts localfs as a plugin and shows what the tests prove:
// create-if-absent native, the conditional operations gated at host scope.
func TestAdaptersList(t *testing.T) {
	out, errs, code := retain(t, "adapters", "list", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var rep struct {
		Adapters []struct {
			Name         string
			Status       string
			Capabilities *storage.Capabilities
		}
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	seen := map[string]string{}
	for _, a := range rep.Adapters {
		seen[a.Name] = a.Status
		if a.Name != "localfs" {
			continue
		}
		c := a.Capabilities
		if c == nil || c.CreateIfAbsent.Level != storage.LevelNative ||
			c.ReplaceIfVersion.Level != storage.LevelGated || c.ReplaceIfVersion.Scope != storage.ScopeHost ||
			c.DeleteIfVersion.Level != storage.LevelGated || !c.OrderedList {
			t.Fatalf("localfs declares %+v", c)
		}
		if _, ok := c.Gate("metadata"); !ok {
			t.Fatalf("localfs declares no metadata gate: %+v", c.Gates)
		}
	}
	for _, n := range []string{"s3", "gcs", "azure"} {
		if seen[n] != "available" {
			t.Errorf("%s: status %q", n, seen[n])
		}
	}
	if seen["localfs"] != "available" {
		t.Errorf("localfs: %q", seen["localfs"])
	}
}

func TestUnknownScheme(t *testing.T) {
	_, errs, code := retain(t, "claim", "status", "ftp://x")
	if code != 2 || !strings.Contains(errs, "no adapter serves") {
		t.Errorf("ftp: exit %d: %s", code, errs)
	}
}

func TestClaimStatusAndTakeover(t *testing.T) {
	dir := t.TempDir()
	out, _, code := retain(t, "claim", "status", dir, "--json")
	if code != 0 || !strings.Contains(out, `"held": false`) {
		t.Fatalf("free store: %d %s", code, out)
	}
	// A claim left by a process that has exited.
	ctx := context.Background()
	d, err := localfs.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := storage.NewStore(ctx, "localfs", d)
	dead := exec.Command("true")
	dead.Run()
	host, _ := os.Hostname()
	h, err := claim.Acquire(ctx, s, claim.Request{Action: "cleanup", Actor: "crashed-job", Scope: storage.ScopeHost})
	if err != nil {
		t.Fatal(err)
	}
	p := h.Payload()
	p.PID = dead.Process.Pid
	b, _ := json.Marshal(p)
	if _, err := s.PutBytes(ctx, claim.Key, b, storage.PutOptions{Mode: storage.PutReplaceIfVersion, IfVersion: h.Version()}); err != nil {
		t.Fatal(err)
	}
	out, _, code = retain(t, "claim", "status", "file://"+dir)
	if code != 0 || !strings.Contains(out, "crashed-job") || !strings.Contains(out, p.OwnerToken) {
		t.Fatalf("held store: %d %s", code, out)
	}
	_, errs, code := retain(t, "claim", "takeover", dir, "--token", "wrong", "--reason", "x")
	if code != 1 || !strings.Contains(errs, "not the claim's owner token") {
		t.Fatalf("wrong token: %d %s", code, errs)
	}
	_, errs, code = retain(t, "claim", "takeover", dir, "--token", p.OwnerToken)
	if code != 2 {
		t.Fatalf("missing --reason: %d %s", code, errs)
	}
	out, errs, code = retain(t, "claim", "takeover", dir, "--token", p.OwnerToken, "--reason", "job crashed", "--json")
	if code != 0 || !strings.Contains(out, "not running on "+host) {
		t.Fatalf("takeover: %d %s %s", code, out, errs)
	}
	out, _, _ = retain(t, "claim", "status", dir, "--json")
	if !strings.Contains(out, `"held": false`) {
		t.Fatalf("after takeover the store must be free: %s", out)
	}
}

// A live owner on this host is never taken over, whatever is attested.
func TestTakeoverOfLiveOwnerRefused(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	d, _ := localfs.Open(dir)
	s, _ := storage.NewStore(ctx, "localfs", d)
	h, err := claim.Acquire(ctx, s, claim.Request{Action: "cleanup", Scope: storage.ScopeHost})
	if err != nil {
		t.Fatal(err)
	}
	_, errs, code := retain(t, "claim", "takeover", dir, "--token", h.Token(), "--reason", "x", "--owner-dead-attested", "sure")
	if code != 1 || !strings.Contains(errs, "still running") {
		t.Fatalf("live owner: %d %s", code, errs)
	}
	if err := h.Verify(ctx); err != nil {
		t.Fatalf("refused takeover touched the claim: %v", err)
	}
}

// The bundled S3 adapter through the retain binary, against gofakes3: the
// capabilities are probed on the endpoint, and the claim commands work.
func TestS3StoreThroughBinary(t *testing.T) {
	e := emulator.GoFakeS3(t)
	for k, v := range e.Env() {
		t.Setenv(k, v)
	}
	store := "s3://retain-cli/tables"
	out, errs, code := retain(t, "adapters", "list", "--store", store, "--json")
	if code != 0 {
		t.Fatalf("adapters list --store: %d %s", code, errs)
	}
	var rep struct {
		Adapters []struct {
			Name         string
			Capabilities *storage.Capabilities
		}
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Adapters) == 0 || rep.Adapters[0].Name != "s3" || rep.Adapters[0].Capabilities == nil {
		t.Fatalf("want only s3, probed: %s", out)
	}
	c := rep.Adapters[0].Capabilities
	if c.CreateIfAbsent.Level != storage.LevelNative || c.DeleteIfVersion.Level != storage.LevelNone {
		t.Fatalf("gofakes3 honours conditional create and ignores conditional delete; declared %+v", c)
	}
	out, errs, code = retain(t, "claim", "status", store, "--json")
	if code != 0 || !strings.Contains(out, `"held": false`) {
		t.Fatalf("claim status on s3: %d %s %s", code, out, errs)
	}
	if strings.Contains(errs+out, e.SecretKey) {
		t.Fatal("the secret key appeared in the output")
	}
}

// A mistyped store path is an error, never a new empty store.
func TestMissingStoreRootNotCreated(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "typo")
	_, errs, code := retain(t, "claim", "status", missing)
	if code != 1 || !strings.Contains(errs, "does not exist") {
		t.Fatalf("claim status on a missing root: exit %d: %s", code, errs)
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Fatalf("the missing root was created: %v", err)
	}
}
