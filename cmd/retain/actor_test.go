package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/retain-dev/retain/core/checkpoint"
	"github.com/retain-dev/retain/core/retention"
)

// retainNoActor runs the binary with RETAIN_ACTOR (and the given keys)
// removed from the environment, plus env.
func retainNoActor(t *testing.T, drop []string, env []string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if k == actorEnv || contains(drop, k) {
			continue
		}
		cmd.Env = append(cmd.Env, kv)
	}
	cmd.Env = append(cmd.Env, env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return out.String(), errb.String(), ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), 0
}

func checkpointActor(t *testing.T, db, name string) string {
	t.Helper()
	out, errs, code := retain(t, "checkpoint", "show", name, db, "--json")
	var in checkpoint.Info
	if code != 0 || json.Unmarshal([]byte(out), &in) != nil {
		t.Fatalf("show %s: %d %s", name, code, errs)
	}
	return in.Actor
}

// The actor recorded is --actor, else RETAIN_ACTOR, else the OS user@host
// (never "unknown@host").
func TestActorFlagEnvAndOSUser(t *testing.T) {
	db := fixtureDB(t, "v2-appends")
	if _, errs, code := retainNoActor(t, nil, []string{actorEnv + "=from-env"}, "checkpoint", "create", "a", db, "--actor", "ops@ci"); code != 0 {
		t.Fatalf("create --actor: %d %s", code, errs)
	}
	if got := checkpointActor(t, db, "a"); got != "ops@ci" {
		t.Fatalf("--actor over %s: recorded %q", actorEnv, got)
	}
	if _, errs, code := retainNoActor(t, nil, []string{actorEnv + "=nightly job"}, "checkpoint", "create", "b", db); code != 0 {
		t.Fatalf("create with %s: %d %s", actorEnv, code, errs)
	}
	if got := checkpointActor(t, db, "b"); got != "nightly job" {
		t.Fatalf("%s: recorded %q", actorEnv, got)
	}
	// Neither, and no $USER: the OS still knows the user by its uid.
	if _, errs, code := retainNoActor(t, []string{"USER", "LOGNAME"}, nil, "checkpoint", "create", "c", db); code != 0 {
		t.Fatalf("create as the OS user: %d %s", code, errs)
	}
	u, err := user.Current()
	if err != nil {
		t.Skip("the test's own user is unknown:", err)
	}
	host, _ := os.Hostname()
	if got := checkpointActor(t, db, "c"); got != u.Username+"@"+host {
		t.Fatalf("OS user: recorded %q, want %q", got, u.Username+"@"+host)
	}

	// The cleanup's claim and audit lines carry it too.
	if _, errs, code := retainNoActor(t, nil, nil, "checkpoint", "delete", "a", db, "--actor", "ops@ci"); code != 0 {
		t.Fatalf("delete: %s", errs)
	}
	if _, errs, code := retainNoActor(t, nil, nil, "cleanup", "run", db, "--confirm-write-outage", "--keep-last", "1", "--actor", "janitor"); code != 0 {
		t.Fatalf("cleanup run --actor: %d %s", code, errs)
	}
	out, _, code := retain(t, "audit", db, "--json")
	var lines []retention.AuditRecord
	if code != 0 || json.Unmarshal([]byte(out), &lines) != nil || len(lines) == 0 {
		t.Fatalf("audit: %d %s", code, out)
	}
	for _, l := range lines {
		if l.Actor != "janitor" {
			t.Fatalf("audit actor: %+v", l)
		}
	}
}

// A bad actor is a usage error (exit 2) naming where it came from, before
// anything is written.
func TestActorRefusedWhenBad(t *testing.T) {
	db := fixtureDB(t, "v2-appends")
	for _, c := range []struct {
		env  []string
		args []string
		want string
	}{
		{nil, []string{"--actor", ""}, "--actor is empty"},
		{nil, []string{"--actor", "   "}, "--actor is empty"},
		{nil, []string{"--actor", "eve\nlevel=forged"}, "non-printable"},
		{nil, []string{"--actor", "eve\x1b[2J"}, "non-printable"},
		{nil, []string{"--actor", " eve"}, "white space"},
		{nil, []string{"--actor", strings.Repeat("a", maxActorBytes+1)}, "at most 256"},
		{[]string{actorEnv + "="}, nil, actorEnv + " is empty"},
		{[]string{actorEnv + "=a\tb"}, nil, actorEnv},
	} {
		args := append([]string{"checkpoint", "create", "x", db}, c.args...)
		_, errs, code := retainNoActor(t, nil, c.env, args...)
		if code != 2 || !strings.Contains(errs, c.want) {
			t.Fatalf("%q %q: exit %d, want 2 and %q: %s", c.env, c.args, code, c.want, errs)
		}
	}
	if _, errs, code := retainNoActor(t, nil, []string{actorEnv + "="}, "daemon", db, "--once"); code != 2 || !strings.Contains(errs, actorEnv+" is empty") {
		t.Fatalf("daemon with an empty %s: %d %s", actorEnv, code, errs)
	}
	if out, _, _ := retain(t, "checkpoint", "list", db); strings.Contains(out, "x") {
		t.Fatalf("a refused create wrote a checkpoint: %s", out)
	}
}

// With no OS user and neither --actor nor RETAIN_ACTOR, a command that
// records an actor refuses (exit 2) naming both; one that records none
// still runs.
func TestActorUnknownUserRefuses(t *testing.T) {
	db := fixtureDB(t, "v2-appends")
	saved := osIdentity
	t.Cleanup(func() { osIdentity = saved })
	osIdentity = func() (string, string, error) {
		return "", "", errors.New("the OS user of this process is unknown (user: unknown userid 54321; $USER and $LOGNAME are unset)")
	}
	t.Setenv(actorEnv, "")
	os.Unsetenv(actorEnv)
	for _, args := range [][]string{
		{"checkpoint", "create", "x", db},
		{"cleanup", "run", db, "--confirm-write-outage", "--keep-last", "1"},
		{"reconcile", db},
	} {
		var out, errb bytes.Buffer
		code := run(args, &out, &errb)
		if code != 2 || !strings.Contains(errb.String(), "--actor NAME") || !strings.Contains(errb.String(), actorEnv) || strings.Contains(errb.String(), "unknown@") {
			t.Fatalf("%v: exit %d: %s", args, code, errb.String())
		}
	}
}

// The same as a real process of a uid the OS has no name for (needs root
// to run as one).
func TestActorUnknownUIDProcess(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run as a uid without a passwd entry")
	}
	const uid = 54321
	if _, err := user.LookupId("54321"); err == nil {
		t.Skip("uid 54321 has a passwd entry here")
	}
	dir := t.TempDir()
	exe := filepath.Join(dir, "retain")
	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(exe, b, 0o755); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(dir, "db")
	if err := os.CopyFS(filepath.Join(db, "t.lance"), os.DirFS(filepath.Join("..", "..", "core", "lance", "testdata", "v2-appends.lance"))); err != nil {
		t.Fatal(err)
	}
	// The other uid must reach and write the store.
	os.Chmod(filepath.Dir(dir), 0o755)
	filepath.Walk(dir, func(p string, _ os.FileInfo, _ error) error { return os.Chmod(p, 0o777) })
	as := func(args ...string) (string, int) {
		cmd := exec.Command(exe, args...)
		cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/"}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
		var errb bytes.Buffer
		cmd.Stderr = &errb
		err := cmd.Run()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return errb.String(), ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return errb.String(), 0
	}
	if errs, code := as("checkpoint", "create", "x", db); code != 2 || !strings.Contains(errs, "--actor NAME or set "+actorEnv) {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if errs, code := as("checkpoint", "list", db); code != 0 {
		t.Fatalf("a command that records no actor: exit %d: %s", code, errs)
	}
	if errs, code := as("checkpoint", "create", "x", db, "--actor", "ops"); code != 0 {
		t.Fatalf("with --actor: exit %d: %s", code, errs)
	}
	if got := checkpointActor(t, db, "x"); got != "ops" {
		t.Fatalf("recorded %q", got)
	}
}

// The daemon takes --actor over its config's actor.
func TestActorDaemonFlagOverConfig(t *testing.T) {
	db := fixtureDB(t, "v2-appends")
	cfg := filepath.Join(t.TempDir(), "daemon.yaml")
	if err := os.WriteFile(cfg, []byte("actor: from-config\nretention:\n  keep_last: 1\n  writers_stopped: true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, errs, code := retainNoActor(t, nil, nil, "daemon", db, "--config", cfg, "--once", "--metrics-addr", "", "--actor", "nightly-ops"); code != 0 {
		t.Fatalf("daemon --once: %d %s", code, errs)
	}
	out, _, code := retain(t, "audit", db, "--json")
	var lines []retention.AuditRecord
	if code != 0 || json.Unmarshal([]byte(out), &lines) != nil || len(lines) == 0 {
		t.Fatalf("audit: %d %s", code, out)
	}
	for _, l := range lines {
		if l.Actor != "nightly-ops" {
			t.Fatalf("audit actor: %+v", l)
		}
	}
}

// quickstart records the actor too, and refuses without one as the
// other commands do.
func TestActorQuickstart(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "qs")
	if _, errs, code := retainNoActor(t, nil, []string{actorEnv + "="}, "quickstart", dir); code != 2 || !strings.Contains(errs, actorEnv+" is empty") {
		t.Fatalf("quickstart with an empty %s: %d %s", actorEnv, code, errs)
	}
	if _, err := os.Stat(dir); err == nil {
		t.Fatal("a refused quickstart made its directory")
	}
	if _, errs, code := retainNoActor(t, nil, nil, "quickstart", dir, "--json", "--actor", "qs-actor"); code != 0 {
		t.Fatalf("quickstart: %d %s", code, errs)
	}
	if got := checkpointActor(t, dir, "quickstart-v3"); got != "qs-actor" {
		t.Fatalf("quickstart checkpoint actor %q", got)
	}
}
