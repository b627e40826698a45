package emulator

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"
)

func TestStartAll(t *testing.T) {
	for name, ep := range map[string]string{
		"versitygw": Versitygw(t).Endpoint,
		"azurite":   Azurite(t).Endpoint,
		"gofakes3":  GoFakeS3(t).Endpoint,
		"fakegcs":   "http://" + FakeGCS(t).Host + "/storage/v1/b",
	} {
		resp, err := http.Get(ep)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		resp.Body.Close()
		t.Logf("%s answers %s", name, resp.Status)
	}
}

// Ensure fails when an installer returns success without installing, and
// writes no marker that a later run would trust.
func TestEnsureRechecksAfterInstalling(t *testing.T) {
	tools, err := ToolsDir()
	if err != nil {
		t.Fatal(err)
	}
	name := "ensure-recheck-probe"
	os.Remove(filepath.Join(tools, name+".done"))
	t.Cleanup(func() { os.Remove(filepath.Join(tools, name+".lock")) })
	ft := &fatalRecorder{TB: t}
	func() {
		defer func() { recover() }()
		Ensure(ft, name, func(string) bool { return false }, func(string) error { return nil })
	}()
	if !ft.failed {
		t.Fatal("Ensure accepted an install that left nothing behind")
	}
	if exists(filepath.Join(tools, name+".done")) {
		t.Fatal("Ensure wrote its marker for a tool that is not there")
	}
}

// fatalRecorder turns Fatalf into a recorded failure and a panic, so the
// test can watch Ensure refuse.
type fatalRecorder struct {
	testing.TB
	failed bool
}

func (f *fatalRecorder) Fatalf(format string, args ...any) { f.failed = true; panic("fatal") }
func (f *fatalRecorder) Fatal(args ...any)                 { f.failed = true; panic("fatal") }
