package s3

import (
	"context"
	"strings"
	"testing"

	"github.com/retain-dev/retain/conformance"
	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/internal/emulator"
)

// The conformance suite through the plugin boundary (this test binary
// serves the adapter as a plugin of itself and runs the worker processes,
// see TestMain), 4 processes x the default rounds, against each emulator.

func confConfig(e *emulator.S3, store string, t *testing.T) conformance.Config {
	cfg := conformance.Config{Adapter: Name, Adapters: []storage.Adapter{Adapter}, Store: store,
		Backend: e.Name, ReportDir: t.TempDir()}
	if strings.HasPrefix(e.Name, "versitygw") {
		cfg.Skip = map[string]string{"conditional-delete-race": versitygwDeleteRace}
	}
	return cfg
}

// versitygwDeleteRace is why conditional-delete-race does not run on
// versitygw: the adapter sends If-Match with DeleteObject and the endpoint
// compares it, but versitygw's posix backend compares and then deletes, so
// a write between the two is deleted (the case found it: "a delete with a
// stale version removed the newer write", 1 round in 40 to 200).
const versitygwDeleteRace = "versitygw v1.8.0 compares DeleteObject's If-Match and then deletes: a write between the two is deleted by a stale conditional delete (found by this case; S3 compares atomically)"

// versitygw honours all three conditional requests: auto declares them all
// native and every case runs but conditional-delete-race (above).
func TestConformanceVersitygw(t *testing.T) {
	e := emulator.Versitygw(t)
	useEmulator(t, e, "retain-conf")
	rep := conformance.Check(t, confConfig(e, "s3://retain-conf/suite", t), "s3-versitygw")
	wantDeclared(t, rep, storage.LevelNative, storage.LevelNative, storage.LevelNative)
	for _, name := range []string{"create-if-absent-race", "compare-and-swap", "conditional-delete", "claim", "capability-honesty", "linearizability"} {
		wantResult(t, rep, name, conformance.Pass)
	}
}

// gofakes3 ignores If-Match on DELETE. With conditional-delete=auto the
// probe at open finds that, delete-if-version is declared none with the
// reason, and the conditional-delete case skips honestly; the none
// declaration itself is proven (unsupported, nothing deleted).
func TestConformanceGoFakeS3Auto(t *testing.T) {
	e := emulator.GoFakeS3(t)
	useEmulator(t, e, "retain-conf")
	rep := conformance.Check(t, confConfig(e, "s3://retain-conf/suite?conditional-delete=auto", t), "s3-gofakes3")
	wantDeclared(t, rep, storage.LevelNative, storage.LevelNative, storage.LevelNone)
	if r := rep.Capabilities.DeleteIfVersion.Reason; !strings.Contains(r, "ignores If-Match on DeleteObject") {
		t.Errorf("delete-if-version none for the wrong reason: %q", r)
	}
	wantResult(t, rep, "conditional-delete", conformance.Skip)
	wantResult(t, rep, "contract/DeclaredNoneIsUnsupported", conformance.Pass)
	wantResult(t, rep, "claim", conformance.Pass)
	wantResult(t, rep, "create-if-absent-race", conformance.Pass)
}

// conditional-delete=off declares none without probing.
func TestConformanceGoFakeS3Off(t *testing.T) {
	e := emulator.GoFakeS3(t)
	useEmulator(t, e, "retain-conf")
	rep := conformance.Check(t, confConfig(e, "s3://retain-conf/suite?conditional-delete=off", t), "s3-gofakes3-off")
	wantDeclared(t, rep, storage.LevelNative, storage.LevelNative, storage.LevelNone)
	if r := rep.Capabilities.DeleteIfVersion.Reason; r != "conditional-delete=off in the store URI" {
		t.Errorf("delete-if-version none for the wrong reason: %q", r)
	}
	wantResult(t, rep, "conditional-delete", conformance.Skip)
}

// Forcing conditional-delete=on against gofakes3 declares a capability the
// endpoint does not honour: the suite must fail the adapter, in the cases
// that exercise delete-if-version.
func TestConformanceGoFakeS3ForcedOnFails(t *testing.T) {
	e := emulator.GoFakeS3(t)
	useEmulator(t, e, "retain-conf")
	cfg := confConfig(e, "s3://retain-conf/suite?conditional-delete=on", t)
	cfg.Run = "^(contract/DeleteIfVersion|conditional-delete|capability-honesty|claim|hygiene)$"
	rep, err := conformance.Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	var sb strings.Builder
	rep.WriteTable(&sb)
	t.Logf("conformance s3-gofakes3 with conditional-delete=on (expected to fail):\n%s", sb.String())
	wantDeclared(t, rep, storage.LevelNative, storage.LevelNative, storage.LevelNative)
	wantResult(t, rep, "contract/DeleteIfVersion", conformance.Fail)
	wantResult(t, rep, "conditional-delete", conformance.Fail)
	wantResult(t, rep, "capability-honesty", conformance.Fail)
	// The claim's release is a delete-if-version: a stale owner's release
	// deletes the new owner's claim.
	wantResult(t, rep, "claim", conformance.Fail)
	if !rep.Failed() {
		t.Fatal("the suite passed an adapter that declares delete-if-version native on an endpoint that ignores it")
	}
}

// In process (no plugin boundary, workers open the adapter themselves).
func TestConformanceVersitygwInProcess(t *testing.T) {
	e := emulator.Versitygw(t)
	useEmulator(t, e, "retain-conf")
	cfg := confConfig(e, "s3://retain-conf/inproc", t)
	cfg.InProcess = true
	conformance.Check(t, cfg, "s3-versitygw-inprocess")
}

func wantDeclared(t *testing.T, rep *conformance.Report, create, replace, del storage.Level) {
	t.Helper()
	c := rep.Capabilities
	if c.CreateIfAbsent.Level != create || c.ReplaceIfVersion.Level != replace || c.DeleteIfVersion.Level != del {
		t.Errorf("declared create=%s replace=%s delete=%s, want %s %s %s", c.CreateIfAbsent.Level, c.ReplaceIfVersion.Level,
			c.DeleteIfVersion.Level, create, replace, del)
	}
}

func wantResult(t *testing.T, rep *conformance.Report, name string, want conformance.Result) {
	t.Helper()
	c, ok := rep.Case(name)
	if !ok {
		t.Errorf("case %s did not run", name)
		return
	}
	if c.Result != want {
		t.Errorf("case %s: %s (%s), want %s", name, c.Result, c.Reason, want)
	}
}
