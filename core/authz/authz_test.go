package authz

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/retain-dev/retain/core/storage"
)

const store = "s3://b/p"

func mustParse(t *testing.T, src string) *Policy {
	t.Helper()
	p, err := Parse("test.cedar", []byte(src))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return p
}

func TestDefaultDenyWithoutPermit(t *testing.T) {
	p := mustParse(t, `permit (principal == Retain::Actor::"alice", action, resource);`)
	d := p.Authorize("bob", Request{Action: ActionCheckpointCreate, Store: store, Checkpoint: "n"})
	if d.Allowed || len(d.Reasons) != 0 || d.String() != "deny (no permit)" {
		t.Fatalf("got %+v (%s), want default deny", d, d)
	}
}

func TestPermitByActor(t *testing.T) {
	p := mustParse(t, `@id("alice-all") permit (principal == Retain::Actor::"alice", action, resource);`)
	d := p.Authorize("alice", Request{Action: ActionTagCreate, Store: store, Table: "t.lance", Tag: "v1"})
	if !d.Allowed || d.String() != `allow by policy "alice-all"` {
		t.Fatalf("got %+v (%s)", d, d)
	}
	if r := d.Reasons[0]; r.File != "test.cedar" || r.Line != 1 || r.Effect != "permit" {
		t.Fatalf("reason %+v", r)
	}
}

func TestForbidWinsOverPermit(t *testing.T) {
	p := mustParse(t, `permit (principal, action, resource);
@id("no-deletes")
forbid (principal, action == Retain::Action::"checkpoint delete", resource);`)
	d := p.Authorize("alice", Request{Action: ActionCheckpointDelete, Store: store, Checkpoint: "n"})
	if d.Allowed || d.String() != `deny by forbid "no-deletes"` || d.Reasons[0].Line != 2 {
		t.Fatalf("got %+v (%s)", d, d)
	}
	if !p.Authorize("alice", Request{Action: ActionCheckpointCreate, Store: store, Checkpoint: "n"}).Allowed {
		t.Fatal("create should be allowed")
	}
}

func TestResourceInStoreCoversEveryKind(t *testing.T) {
	p := mustParse(t, `permit (principal, action, resource in Retain::Store::"s3://b/p");`)
	for _, r := range []Request{
		{Action: ActionReconcile, Store: store},
		{Action: ActionReconcile, Store: store, Table: "t.lance"},
		{Action: ActionCheckpointCreate, Store: store, Checkpoint: "hourly/1"},
		{Action: ActionCheckpointCreate, Store: store, Table: "t.lance", Checkpoint: "hourly/1"},
		{Action: ActionBranchCreate, Store: store, Branch: "dev"},
		{Action: ActionBranchCreate, Store: store, Table: "t.lance", Branch: "dev"},
		{Action: ActionTagCreate, Store: store, Tag: "v1"},
		{Action: ActionTagCreate, Store: store, Table: "t.lance", Tag: "v1"},
	} {
		if d := p.Authorize("a", r); !d.Allowed {
			t.Errorf("%s: %s", r, d)
		}
		r.Store = "s3://b/other"
		if d := p.Authorize("a", r); d.Allowed {
			t.Errorf("%s: allowed in another store", r)
		}
	}
	// A branch of a table is in the table, too.
	q := mustParse(t, `permit (principal, action, resource in Retain::Table::"s3://b/p|t.lance");`)
	if d := q.Authorize("a", Request{Action: ActionBranchDelete, Store: store, Table: "t.lance", Branch: "dev"}); !d.Allowed {
		t.Errorf("branch in table: %s", d)
	}
}

func TestCompoundIDsEscapeSeparator(t *testing.T) {
	if a, b := TableUID("s|x", "t"), TableUID("s", "x|t"); a == b {
		t.Fatalf("ids collide: %s", a)
	}
}

func TestAttributePolicies(t *testing.T) {
	p := mustParse(t, `permit (principal, action == Retain::Action::"checkpoint delete", resource is Retain::Checkpoint)
when { resource.name like "hourly/*" && resource.store == "s3://b/p" };`)
	if d := p.Authorize("a", Request{Action: ActionCheckpointDelete, Store: store, Checkpoint: "hourly/3"}); !d.Allowed {
		t.Errorf("hourly: %s", d)
	}
	if d := p.Authorize("a", Request{Action: ActionCheckpointDelete, Store: store, Checkpoint: "nightly"}); d.Allowed {
		t.Error("nightly allowed")
	}
	// Attributes are present on every kind, so this does not error for a store.
	q := mustParse(t, `permit (principal, action, resource) when { resource.table == "" };`)
	if d := q.Authorize("a", Request{Action: ActionReconcile, Store: store}); !d.Allowed {
		t.Errorf("store: %s", d)
	}
}

func TestContextCommand(t *testing.T) {
	p := mustParse(t, `permit (principal, action == Retain::Action::"cleanup run", resource) when { context.command == "cleanup resume" };`)
	if d := p.Authorize("a", Request{Action: ActionCleanupRun, Command: "cleanup resume", Store: store}); !d.Allowed {
		t.Errorf("resume: %s", d)
	}
	if d := p.Authorize("a", Request{Action: ActionCleanupRun, Store: store}); d.Allowed {
		t.Error("run (command defaults to the action) allowed")
	}
}

func TestEvaluationErrorFailsClosed(t *testing.T) {
	// The second permit errors (no such attribute); Cedar alone would allow
	// by the first, but an error must deny.
	p := mustParse(t, `permit (principal, action, resource);
@id("broken") permit (principal, action, resource) when { resource.nope == 1 };`)
	ctx := WithGate(context.Background(), NewGate(p, "a", nil))
	err := Check(ctx, Request{Action: ActionReconcile, Store: store})
	var de *DeniedError
	if !errors.As(err, &de) || de.Decision.Allowed || len(de.Decision.Errors) != 1 {
		t.Fatalf("got %v, want a fail-closed denial", err)
	}
	for _, want := range []string{`"broken"`, "test.cedar:2", "fail closed"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message %q lacks %q", err, want)
		}
	}
}

func TestParseErrorNamesFileAndLine(t *testing.T) {
	_, err := Parse("/etc/retain/policy.cedar", []byte("permit (principal, action, resource);\nforbid (principal,\n  action = x, resource);"))
	if !errors.Is(err, ErrPolicy) || !errors.Is(err, storage.ErrInvalidArgument) {
		t.Fatalf("err %v does not match ErrPolicy and ErrInvalidArgument", err)
	}
	if !strings.Contains(err.Error(), "/etc/retain/policy.cedar:3:") || strings.Contains(err.Error(), "<input>") {
		t.Fatalf("message %q does not name file:line", err)
	}
}

func TestLoadFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "p.cedar")
	if err := os.WriteFile(path, []byte(`permit (principal, action, resource);`), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := LoadFile(path)
	if err != nil || p.File() != path || p.IDs()[0] != "policy0" {
		t.Fatalf("LoadFile: %v %v", p, err)
	}
	if _, err := LoadFile(path + ".missing"); !errors.Is(err, ErrPolicy) || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
}

func TestEmptyPolicyIsAnError(t *testing.T) {
	for _, src := range []string{"", "// nothing yet\n"} {
		_, err := Parse("p.cedar", []byte(src))
		if !errors.Is(err, ErrPolicy) || !strings.Contains(err.Error(), "denies everything") {
			t.Errorf("%q: %v", src, err)
		}
	}
}

func TestUnknownNamesInScopeAreRefused(t *testing.T) {
	for _, src := range []string{
		`forbid (principal, action == Retain::Action::"checkpoint delet", resource);`,
		`forbid (principal, action, resource is Retain::Chekpoint);`,
		`@id("x") permit (principal, action, resource); @id("x") permit (principal, action, resource);`,
	} {
		if _, err := Parse("p.cedar", []byte(src)); !errors.Is(err, ErrPolicy) {
			t.Errorf("%s: %v", src, err)
		}
	}
}

func TestUnknownActionDenies(t *testing.T) {
	p := mustParse(t, `permit (principal, action, resource);`)
	if d := p.Authorize("a", Request{Action: "checkpoint destroy", Store: store}); d.Allowed || len(d.Errors) == 0 {
		t.Fatalf("unknown action: %s", d)
	}
	ctx := WithGate(context.Background(), NewGate(p, "a", nil))
	for _, r := range []Request{{Action: "checkpoint destroy", Store: store}, {Store: store}, {Action: ActionReconcile}} {
		if err := Check(ctx, r); !errors.Is(err, storage.ErrInvalidArgument) {
			t.Errorf("%+v: %v", r, err)
		}
	}
	if err := Check(WithGate(context.Background(), NewGate(p, "", nil)), Request{Action: ActionReconcile, Store: store}); !errors.Is(err, storage.ErrInvalidArgument) {
		t.Errorf("empty actor: %v", err)
	}
}

func TestNoGateAllows(t *testing.T) {
	if err := Check(context.Background(), Request{Action: ActionCheckpointDelete, Store: store}); err != nil {
		t.Fatal(err)
	}
}

func TestDeniedErrorMatchesSentinelsAndNamesEverything(t *testing.T) {
	p, err := Parse("/etc/retain/policy.cedar", []byte(`permit (principal, action, resource);
@id("no-deletes")
forbid (principal == Retain::Actor::"bob", action == Retain::Action::"checkpoint delete", resource);`))
	if err != nil {
		t.Fatal(err)
	}
	var audited []Decision
	g := NewGate(p, "bob", func(d Decision, _ Request) { audited = append(audited, d) })
	err = Check(WithGate(context.Background(), g), Request{Action: ActionCheckpointDelete, Store: "file:///x", Checkpoint: "nightly"})
	if !errors.Is(err, ErrDenied) || !errors.Is(err, storage.ErrPermissionDenied) {
		t.Fatalf("%v does not match both sentinels", err)
	}
	var de *DeniedError
	if !errors.As(err, &de) || len(de.Reasons) != 1 || de.Reasons[0] != "no-deletes" {
		t.Fatalf("DeniedError %+v", de)
	}
	want := `checkpoint delete on checkpoint "nightly" in store "file:///x": denied for actor "bob" by policy file /etc/retain/policy.cedar (forbid policy "no-deletes" at line 2)`
	if !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("message\n%s\nwant prefix\n%s", err, want)
	}
	if len(audited) != 1 || audited[0].Allowed {
		t.Fatalf("audit saw %v", audited)
	}
	// A default deny says to ask for a permit.
	q := mustParse(t, `permit (principal == Retain::Actor::"alice", action, resource);`)
	err = NewGate(q, "bob", nil).Check(Request{Action: ActionReconcile, Store: store})
	if !strings.Contains(err.Error(), "no permit policy matches") || !strings.Contains(err.Error(), "--actor") {
		t.Fatalf("message %q", err)
	}
}

func TestActionsAreValidAndDistinct(t *testing.T) {
	seen := map[Action]bool{}
	for _, a := range Actions() {
		if !a.Valid() || seen[a] {
			t.Errorf("action %q", a)
		}
		seen[a] = true
	}
	if len(seen) != 14 {
		t.Errorf("%d actions, want 14", len(seen))
	}
}

func TestDocSampleParses(t *testing.T) {
	mustParse(t, `@id("operators")
permit (principal == Retain::Actor::"ops", action, resource);
@id("scheduler-hourly")
permit (
  principal == Retain::Actor::"scheduler",
  action in [Retain::Action::"checkpoint create", Retain::Action::"checkpoint prune"],
  resource in Retain::Store::"s3://bucket/prod"
) when { resource.name like "hourly/*" };
@id("keep-release-tags")
forbid (principal, action == Retain::Action::"tag delete", resource is Retain::Tag)
when { resource.name like "release-*" };`)
}

func TestDeniedErrorKind(t *testing.T) {
	if k := storage.KindOf(&DeniedError{}); k != storage.ErrPermissionDenied {
		t.Fatalf("KindOf = %v", k)
	}
}
