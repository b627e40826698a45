package retention

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"encoding/json"
	"os/exec"

	"github.com/retain-dev/retain/adapters/localfs"
	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/storage/claim"
	"github.com/retain-dev/retain/core/storage/storagetest"
)

// claimOutage: the first create of the claim object lands but its
// response is lost, and the next failReads reads of the claim fail (the
// outage outlasts every read-back); failClaimDelete fails deletes of the
// claim (a process that dies holding it); deletes under failPrefix fail.
type claimOutage struct {
	mu              sync.Mutex
	lost            bool
	failReads       int
	failClaimDelete bool
	failPrefix      string
}

// store opens a store on d with the outage injected.
func (o *claimOutage) store(t *testing.T, d storage.Driver) *storage.Store {
	s, err := storage.NewStore(bg, "localfs", storagetest.NewHook(d).Before(o.before).After(o.after))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func (o *claimOutage) before(c storagetest.Call) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	switch c.Op {
	case storagetest.OpGet:
		if c.Key == claim.Key && o.failReads > 0 {
			o.failReads--
			return storage.Errorf("get", c.Key, storage.ErrTransient, "injected: outage")
		}
	case storagetest.OpDelete:
		if (c.Key == claim.Key && o.failClaimDelete) || (o.failPrefix != "" && strings.HasPrefix(c.Key, o.failPrefix)) {
			return storage.Errorf("delete", c.Key, storage.ErrTransient, "injected: delete fails")
		}
	case storagetest.OpDeleteMany:
		for _, k := range c.Keys {
			if o.failPrefix != "" && strings.HasPrefix(k, o.failPrefix) {
				return errors.New("injected delete failure")
			}
		}
	}
	return nil
}

func (o *claimOutage) after(c storagetest.Call, err error) error {
	if c.Op != storagetest.OpPut || c.Key != claim.Key || err != nil {
		return err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.lost {
		o.lost, o.failReads = true, 10
		return storage.Errorf("put", c.Key, storage.ErrTransient, "injected: response lost")
	}
	return nil
}

func deadPID(t *testing.T) int {
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Skip("no `true` to get a dead pid:", err)
	}
	return cmd.Process.Pid
}

// TestAdoptedClaimNamesItsRun: Acquire adopts a claim this process
// created earlier (lost response, no read-back answered) but keeps that
// claim's payload: the claim object keeps naming the EARLIER operation.
// A cleanup run carried out under the adopted claim that dies part-way
// leaves its journal open and the claim naming another operation; Resume
// only takes over a claim naming the run itself, so every resume (and the
// daemon, which treats the HeldError as a wait) finds "held" for ever,
// even once the owner is provably dead.
func TestAdoptedClaimNamesItsRun(t *testing.T) {
	dir, _ := setup(t)
	drv, err := localfs.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	rd := &claimOutage{}
	s := rd.store(t, drv)
	// 1. A run whose claim create lands with its response lost.
	_, err = Run(bg, s.At(loc(dir)), Policy{KeepLast: 1}, RunOptions{ConfirmWriteOutage: true, OperationID: "cleanup-first"})
	if err == nil {
		t.Fatal("the first run should fail on the lost create")
	}
	t.Logf("first run: %v", err)
	// 2. The next run adopts that claim; it dies part-way (its table
	// deletes fail, and so does the claim's release: the process is gone).
	rd.mu.Lock()
	rd.failReads, rd.failClaimDelete, rd.failPrefix = 0, true, "branch-tag.lance/"
	rd.mu.Unlock()
	rep, err := Run(bg, s.At(loc(dir)), Policy{KeepLast: 1}, RunOptions{ConfirmWriteOutage: true, OperationID: "cleanup-second"})
	if !errors.Is(err, ErrRunIncomplete) {
		t.Fatalf("want an incomplete second run, got %v", err)
	}
	p, _, err := claim.Read(bg, s)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("run %s left the claim naming operation %q (action %s)", rep.OperationID, p.OperationID, p.Action)
	// The process is dead now: its pid is not running.
	raw, err := os.ReadFile(filepath.Join(dir, claim.Key))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	m["pid"] = deadPID(t)
	raw, _ = json.Marshal(m)
	if err := os.WriteFile(filepath.Join(dir, claim.Key), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	// 3. A restarted process resumes the open run.
	_, err = Resume(bg, open(t, dir, false), ResumeOptions{OperationID: rep.OperationID})
	if errors.Is(err, claim.ErrHeld) {
		t.Fatalf("resume of %s after its process died is refused as held (claim names %q, not the run): %v", rep.OperationID, p.OperationID, err)
	}
	if err != nil {
		t.Fatalf("resume: %v", err)
	}
}

// Control: the same death without an adopted claim is resumed.
func TestResumeAfterOwnerDeath(t *testing.T) {
	dir, _ := setup(t)
	drv, err := localfs.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	rd := &claimOutage{lost: true, failClaimDelete: true, failPrefix: "branch-tag.lance/"}
	s := rd.store(t, drv)
	rep, err := Run(bg, s.At(loc(dir)), Policy{KeepLast: 1}, RunOptions{ConfirmWriteOutage: true, OperationID: "cleanup-second"})
	if !errors.Is(err, ErrRunIncomplete) {
		t.Fatalf("want an incomplete run, got %v", err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, claim.Key))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	m["pid"] = deadPID(t)
	raw, _ = json.Marshal(m)
	if err := os.WriteFile(filepath.Join(dir, claim.Key), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Resume(bg, open(t, dir, false), ResumeOptions{OperationID: rep.OperationID}); err != nil && !errors.Is(err, ErrRunIncomplete) {
		t.Fatalf("resume: %v", err)
	}
}
