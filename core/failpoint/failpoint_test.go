package failpoint

import (
	"github.com/retain-dev/retain/core/storage/storagetest"
	"os"
	"os/exec"
	"testing"
)

func TestInertUnlessNamed(t *testing.T) {
	exited := -1
	exit = func(c int) { exited = c }
	defer func() { exit = os.Exit }()

	t.Setenv(Env, "")
	Hit("create/after-tags")
	if exited != -1 {
		t.Fatal("unset: Hit exited")
	}
	t.Setenv(Env, "create/after-sidecar, delete/after-commit")
	Hit("create/after-tags")
	if exited != -1 {
		t.Fatal("other names: Hit exited")
	}
	Hit("delete/after-commit")
	if exited != ExitCode {
		t.Fatalf("named: exit %d", exited)
	}
	if !Enabled("create/after-sidecar") || Enabled("create") {
		t.Fatal("Enabled matches whole names only")
	}
}

// TestRealExit re-executes the test binary with the variable set: the
// process really exits with ExitCode at the failpoint.
func TestRealExit(t *testing.T) {
	if os.Getenv("FAILPOINT_CHILD") == "1" {
		Hit("x/y")
		os.Exit(0)
	}
	cmd := storagetest.Child("TestRealExit", []string{"FAILPOINT_CHILD=1", Env + "=x/y"})
	err := cmd.Run()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != ExitCode {
		t.Fatalf("child: %v", err)
	}
	cmd = storagetest.Child("TestRealExit", []string{"FAILPOINT_CHILD=1", Env + "="})
	if err := cmd.Run(); err != nil {
		t.Fatalf("inert child: %v", err)
	}
}
