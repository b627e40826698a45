package lance

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/retain-dev/retain/adapters/localfs"
	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/storage/storagetest"
)

// A table's transaction batches are read a few at once: every transaction
// of every batch is read and counted once, whatever the batches' order,
// and the counters they share survive the race detector.
func TestReadTxnsBatchesSideBySide(t *testing.T) {
	dir := t.TempDir()
	txns := filepath.Join(dir, "t.lance", "_transactions")
	if err := os.MkdirAll(txns, 0o755); err != nil {
		t.Fatal(err)
	}
	const n = 5*txnBatch + 7
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("%d-u%04d.txn", i, i)
		if i%50 == 49 {
			continue // missing: read as a manifest
		}
		if err := os.WriteFile(filepath.Join(txns, names[i]), []byte("not a transaction"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	d := mustOpen(t, openStore(t, dir), "t.lance")
	pl := &planner{d: d}
	ops := pl.readTxns(bg, &member{ds: d}, names)
	if len(ops) != n {
		t.Fatalf("%d ops for %d names", len(ops), n)
	}
	for i, op := range ops {
		if op != nil {
			t.Fatalf("%s does not parse, yet gave an op", names[i])
		}
	}
	if pl.stats.txnsRead != n {
		t.Errorf("%d transactions counted read, want %d (one per answered key)", pl.stats.txnsRead, n)
	}
	if want := int64(n-n/50) * int64(len("not a transaction")); pl.stats.txnBytes != want {
		t.Errorf("%d transaction bytes counted, want %d", pl.stats.txnBytes, want)
	}
}

// Transactions are read in batches: one request per txnBatch through a
// store whose driver reads batches (localfs, and any plugin offering
// them), not one get each — what keeps the plugin's per-call cost out of
// a long history's planning.
func TestReadTxnsIsOneRequestPerBatch(t *testing.T) {
	dir := t.TempDir()
	txns := filepath.Join(dir, "t.lance", "_transactions")
	if err := os.MkdirAll(txns, 0o755); err != nil {
		t.Fatal(err)
	}
	const n = 3*txnBatch + 1
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("%d-u%04d.txn", i, i)
		if err := os.WriteFile(filepath.Join(txns, names[i]), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	drv, err := localfs.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	cnt := storagetest.NewCounting(drv)
	s, err := storage.NewStore(bg, "localfs", cnt)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	d := mustOpen(t, s, "t.lance")
	before := cnt.Counts()
	(&planner{d: d}).readTxns(bg, &member{ds: d}, names)
	c := cnt.Counts()
	if got := c.Get - before.Get; got != 0 {
		t.Errorf("%d single gets for %d transactions, want none", got, n)
	}
	if got := c.BatchRead - before.BatchRead; got != 4 {
		t.Errorf("%d batch reads for %d transactions, want 4 (%d a batch)", got, n, txnBatch)
	}
}
