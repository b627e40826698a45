package main

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/retain-dev/retain/internal/faultadapter"
)

func sha256File(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// --adapter runs a vendor plugin binary for the store: with and without
// its digest, read-only opens stay read-only through it, and a wrong
// digest or a binary that is no plugin is a setup error naming the binary.
func TestAdapterFlagCheckpointList(t *testing.T) {
	fa := faultadapter.Build(t)
	digest := sha256File(t, fa)
	db := fixtureDB(t, "v2-appends")
	if _, errs, code := retain(t, "checkpoint", "create", "nightly/1", db); code != 0 {
		t.Fatalf("create: %d %s", code, errs)
	}
	before := folderState(t, db)

	out, errs, code := retain(t, "--adapter", fa, "checkpoint", "list", db)
	if code != 0 || !strings.Contains(out, "nightly/1") || !strings.Contains(out, "ok") {
		t.Fatalf("list without digest: %d\n%s\n%s", code, out, errs)
	}
	if !strings.Contains(errs, "without a digest check") {
		t.Errorf("no warning about the unchecked digest: %s", errs)
	}
	out, errs, code = retain(t, "--adapter", fa, "--adapter-sha256", digest, "checkpoint", "list", db, "--json")
	if code != 0 || !strings.Contains(out, `"nightly/1"`) || strings.Contains(errs, "without a digest check") {
		t.Fatalf("list with digest: %d\n%s\n%s", code, out, errs)
	}
	// The same through the environment, on a file:// URI.
	out, errs, code = retainEnv(t, []string{"RETAIN_ADAPTER=" + fa, "RETAIN_ADAPTER_SHA256=" + digest}, "checkpoint", "list", "file://"+db)
	if code != 0 || !strings.Contains(out, "nightly/1") {
		t.Fatalf("list through RETAIN_ADAPTER: %d\n%s\n%s", code, out, errs)
	}
	wantUnchanged(t, "checkpoint list through --adapter", before, folderState(t, db))
	// On a store retain never wrote to, a writable open would create
	// localfs's folder; the read-only open through the plugin does not.
	fresh := fixtureDB(t, "v2-appends")
	freshBefore := folderState(t, fresh)
	if out, errs, code := retain(t, "--adapter", fa, "--adapter-sha256", digest, "checkpoint", "list", fresh); code != 0 {
		t.Fatalf("list on a fresh store: %d\n%s\n%s", code, out, errs)
	}
	if _, err := os.Stat(filepath.Join(fresh, ".retain-localfs")); err == nil {
		t.Fatal("a read-only command through --adapter created .retain-localfs")
	}
	wantUnchanged(t, "checkpoint list through --adapter on a fresh store", freshBefore, folderState(t, fresh))

	// A vendor's own scheme reaches the plugin as a parsed location, not
	// the bundled adapters' "no adapter serves" (this plugin serves file://
	// only, so its localfs refuses it).
	_, errs, code = retain(t, "--adapter", fa, "--adapter-sha256", digest, "checkpoint", "list", "acme://bucket/prefix")
	if code != 2 || !strings.Contains(errs, `localfs serves file:// locations, not "acme"`) {
		t.Fatalf("vendor scheme: %d %s", code, errs)
	}

	// The vendor binary, not the bundled localfs, serves the store: its
	// faults reach the command (RETAIN_FAULT_* reach the plugin through the
	// host's environment).
	_, errs, code = retainEnv(t, []string{"RETAIN_FAULT_RATE=1", "RETAIN_FAULT_SEED=7"},
		"--adapter", fa, "--adapter-sha256", digest, "checkpoint", "list", db)
	if code != 1 || !strings.Contains(errs, "injected fault") {
		t.Fatalf("faults on every request: %d %s", code, errs)
	}

	wrong := strings.Repeat("0", 64)
	_, errs, code = retain(t, "--adapter", fa, "--adapter-sha256", wrong, "checkpoint", "list", db)
	if code != 2 || !strings.Contains(errs, "adapter binary "+fa) || !strings.Contains(errs, "does not match") ||
		!strings.Contains(errs, digest) || !strings.Contains(errs, "sha256sum") {
		t.Fatalf("wrong digest: %d %s", code, errs)
	}
	_, errs, code = retain(t, "--adapter", fa, "--adapter-sha256", "xyz", "checkpoint", "list", db)
	if code != 2 || !strings.Contains(errs, "64 hex digits") {
		t.Fatalf("malformed digest: %d %s", code, errs)
	}
	if _, err := os.Stat("/bin/true"); err == nil {
		_, errs, code = retain(t, "--adapter", "/bin/true", "checkpoint", "list", db)
		if code != 2 || !strings.Contains(errs, "adapter binary /bin/true") || !strings.Contains(errs, "failed to start") ||
			!strings.Contains(errs, "pluginproto.Serve") {
			t.Fatalf("not a plugin: %d %s", code, errs)
		}
	}
	missing := filepath.Join(t.TempDir(), "acme-adapter")
	_, errs, code = retain(t, "--adapter", missing, "checkpoint", "list", db)
	if code != 2 || !strings.Contains(errs, missing) {
		t.Fatalf("missing binary: %d %s", code, errs)
	}
	_, errs, code = retain(t, "--adapter-sha256", digest, "checkpoint", "list", db)
	if code != 2 || !strings.Contains(errs, "no --adapter") {
		t.Fatalf("digest without binary: %d %s", code, errs)
	}
	wantUnchanged(t, "refused opens", before, folderState(t, db))
}

// Through the fault adapter every delete fails: cleanup run stops with the
// typed incomplete error, releases its claim, and once the faults stop
// --resume through the same adapter finishes the run.
func TestAdapterFlagCleanupResume(t *testing.T) {
	fa := faultadapter.Build(t)
	digest := sha256File(t, fa)
	db := runFixture(t)
	v3 := filepath.Join(db, "deletes.lance", "_versions", "18446744073709551612.manifest")
	v4 := filepath.Join(db, "deletes.lance", "_versions", "18446744073709551611.manifest")
	state := filepath.Join(t.TempDir(), "faults.json")
	faulty := []string{"RETAIN_FAULT_FAIL_DELETES=1000", "RETAIN_FAULT_STATE=" + state}
	adapter := []string{"--adapter", fa, "--adapter-sha256", digest}

	out, errs, code := retainEnv(t, faulty, append(adapter, "cleanup", "run", db, "--confirm-write-outage", "--keep-last", "1")...)
	if code != 1 || !strings.Contains(errs, "stopped part-way") || !strings.Contains(errs, "--resume") {
		t.Fatalf("faulty run: %d\n%s\n%s", code, out, errs)
	}
	if _, err := os.Stat(v4); err != nil {
		t.Fatal("deletes v4 removed although every delete failed")
	}
	st, err := faultadapter.ReadState(state)
	if err != nil || st.FailedDeletes == 0 {
		t.Fatalf("state file: %+v %v", st, err)
	}
	// The claim was released (its keys are spared), so the store is free.
	if out, _, code := retain(t, "--adapter", fa, "--adapter-sha256", digest, "claim", "status", db, "--json"); code != 0 || !strings.Contains(out, `"held": false`) {
		t.Fatalf("claim after the failed run: %d %s", code, out)
	}

	healed := []string{"RETAIN_FAULT_FAIL_DELETES=0", "RETAIN_FAULT_STATE=" + state}
	out, errs, code = retainEnv(t, healed, append(adapter, "cleanup", "run", db, "--resume", "--confirm-write-outage")...)
	if code != 0 || !strings.Contains(out, "resumed cleanup run") {
		t.Fatalf("resume: %d\n%s\n%s", code, out, errs)
	}
	if _, err := os.Stat(v4); err == nil {
		t.Fatal("deletes v4 survived the resumed run")
	}
	if _, err := os.Stat(v3); err != nil {
		t.Fatal("pinned deletes v3 removed")
	}
	if _, errs, code := retain(t, append(adapter, "checkpoint", "show", "nightly", db, "--deep")...); code != 0 {
		t.Fatalf("show --deep after the resumed run: %d %s", code, errs)
	}
}

// RETAIN_FAULT_FAIL_DELETES counts across plugin processes through its
// state file: with one failure allowed, the run fails one table and the
// resume, a new retain process with the very same environment, finishes.
func TestAdapterFlagFaultsCountedAcrossRestarts(t *testing.T) {
	fa := faultadapter.Build(t)
	db := runFixture(t)
	env := []string{"RETAIN_ADAPTER=" + fa, "RETAIN_ADAPTER_SHA256=" + sha256File(t, fa),
		"RETAIN_FAULT_FAIL_DELETES=1", "RETAIN_FAULT_STATE=" + filepath.Join(t.TempDir(), "faults.json")}
	out, errs, code := retainEnv(t, env, "cleanup", "run", db, "--confirm-write-outage", "--keep-last", "1")
	if code != 1 || !strings.Contains(errs, "stopped part-way (1 table(s) done, 1 left)") || !strings.Contains(errs, "injected fault 1 of 1") {
		t.Fatalf("run: %d\n%s\n%s", code, out, errs)
	}
	out, errs, code = retainEnv(t, env, "cleanup", "run", db, "--resume", "--confirm-write-outage")
	if code != 0 || !strings.Contains(out, "resumed cleanup run") {
		t.Fatalf("resume with the same faults: %d\n%s\n%s", code, out, errs)
	}
}
