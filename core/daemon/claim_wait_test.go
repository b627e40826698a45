package daemon

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/retain-dev/retain/adapters/localfs"
	"github.com/retain-dev/retain/core/retention"
	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/storage/claim"
	"github.com/retain-dev/retain/core/storage/storagetest"
)

// TestLiveCLIRunIsAClaimWait: while `retain cleanup run`
// holds the claim (its open marker is present from the journal's creation
// on), the daemon's retention part calls Resume on it; Resume tries a
// takeover, which is refused (the owner is alive), and that refusal does
// not match claim.ErrHeld. The daemon logs retention_failed, bumps
// retain_retention_failures and the record's failure count, instead of
// treating it as the claim wait it is.
func TestLiveCLIRunIsAClaimWait(t *testing.T) {
	dir, s, loc := store(t, "deletes")
	op := "cleanup-cli"
	j := `{"format":1,"operation_id":"cleanup-cli","state":"running","started_at":"2026-11-30T00:00:00Z","updated_at":"2026-11-30T00:00:00Z",` +
		`"policy":{"keep_last":1},"boundary_version":0,"tables":[],"registry":{"remove":[],"kept":0,"state":"pending","deleted":0}}`
	for k, body := range map[string]string{
		retention.JournalKey(op):     j,
		"_retain/cleanup/open/" + op: retention.JournalKey(op) + "\n",
	} {
		p := filepath.Join(dir, k)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The CLI run, alive in this very process.
	h, err := claim.Acquire(bg, s, claim.Request{OperationID: op, Action: "cleanup", Scope: claim.ScopeFor(loc)})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release(bg)
	d := &Daemon{Store: s.At(loc), Config: cfg(t, "retention:\n  keep_last: 1\n  writers_stopped: true\n")}
	r := d.Pass(bg)
	t.Logf("retention error: %s", r.RetentionError)
	if d.state.RetentionFailures != 0 {
		t.Fatalf("a live CLI cleanup run holding the claim was counted as a retention failure (failures %d): %s", d.state.RetentionFailures, r.RetentionError)
	}
}

// lostClaim applies the first create of the claim object and then reports
// a transient error (a lost response); the next reads of the claim fail
// transiently too (the same outage).
type lostClaim struct {
	mu        sync.Mutex
	lost      bool
	failReads int
}

func (d *lostClaim) after(c storagetest.Call, err error) error {
	if c.Op != storagetest.OpPut || c.Key != claim.Key || err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.lost {
		d.lost, d.failReads = true, 3
		return storage.Errorf("put", c.Key, storage.ErrTransient, "injected: response lost")
	}
	return nil
}

func (d *lostClaim) before(c storagetest.Call) error {
	if c.Op != storagetest.OpGet || c.Key != claim.Key {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.failReads > 0 {
		d.failReads--
		return storage.Errorf("get", c.Key, storage.ErrTransient, "injected: outage")
	}
	return nil
}

// TestLostClaimResponseDoesNotWedge: a claim create whose response is
// lost during a short outage is read back only three times, at once; when
// those reads fail too, the error stands and the claim object (which did
// land) is left behind, owned by nobody but carrying the daemon's own pid.
// Every later pass finds the claim held; no takeover can prove the owner
// dead while the daemon lives: reconcile and retention stop until the
// daemon is restarted and an operator takes the claim over.
func TestLostClaimResponseDoesNotWedge(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	if err := os.CopyFS(filepath.Join(dir, "deletes.lance"), os.DirFS(filepath.Join("..", "lance", "testdata", "deletes.lance"))); err != nil {
		t.Fatal(err)
	}
	drv, err := localfs.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	lc := &lostClaim{}
	s, err := storage.NewStore(bg, "localfs", storagetest.NewHook(drv).Before(lc.before).After(lc.after))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	loc := storage.Location{Scheme: "file", Path: dir}
	d := &Daemon{Store: s.At(loc), Config: cfg(t, "retention:\n  keep_last: 1\n  writers_stopped: true\n")}
	r1 := d.Pass(bg)
	t.Logf("pass 1: reconcile %q; retention %q", r1.ReconcileError, r1.RetentionError)
	r2 := d.Pass(bg)
	t.Logf("pass 2: reconcile %q; retention %q; holder %q", r2.ReconcileError, r2.RetentionError, r2.ClaimHolder)
	p, _, err := claim.Read(bg, s)
	if err != nil {
		return // no orphan claim: fine
	}
	_, terr := claim.Takeover(bg, s, claim.TakeoverRequest{Request: claim.Request{Action: "takeover", Scope: claim.ScopeFor(loc)},
		Token: p.OwnerToken, Reason: "review"})
	if p.PID == os.Getpid() && errors.Is(terr, claim.ErrNoProof) {
		t.Fatalf("an orphan claim of this daemon (op %s, pid %d) blocks every pass (pass 2: %q) and cannot be taken over while the daemon lives: %v",
			p.OperationID, p.PID, r2.RetentionError, terr)
	}
}
