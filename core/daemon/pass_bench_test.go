package daemon

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/retain-dev/retain/adapters/localfs"
	"github.com/retain-dev/retain/core/checkpoint"
	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/storage/storagetest"
)

// BenchmarkQuietPass: the requests of a pass with nothing to remove (what
// an hourly daemon costs on a settled store): reconcile, the retention
// plan, no commit, no audit line; two tables and a checkpoint.
//
//	go test -run '^$' -bench QuietPass ./core/daemon/
func BenchmarkQuietPass(b *testing.B) {
	dir := filepath.Join(b.TempDir(), "db")
	for _, n := range []string{"deletes", "branch-tag"} {
		if err := os.CopyFS(filepath.Join(dir, n+".lance"), os.DirFS(filepath.Join("..", "lance", "testdata", n+".lance"))); err != nil {
			b.Fatal(err)
		}
	}
	d, err := localfs.Open(dir)
	if err != nil {
		b.Fatal(err)
	}
	c := storagetest.NewCounting(d)
	s, err := storage.NewStore(bg, "localfs", c)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	loc := storage.Location{Scheme: "file", Path: dir}
	if _, err := checkpoint.Create(bg, s.At(loc), "nightly", ""); err != nil {
		b.Fatal(err)
	}
	p := filepath.Join(b.TempDir(), "c.yaml")
	os.WriteFile(p, []byte("retention:\n  keep_last: 1\n  writers_stopped: true\n"), 0o644)
	cfg, err := LoadConfig(p)
	if err != nil {
		b.Fatal(err)
	}
	// Settle: the first pass removes what the window allows.
	(&Daemon{Store: s.At(loc), Config: cfg}).Pass(bg)
	b.ResetTimer()
	before := c.Counts()
	for i := 0; i < b.N; i++ {
		d := &Daemon{Store: s.At(loc), Config: cfg} // a fresh daemon: retention is due
		if r := d.Pass(bg); !r.RetentionCompleted || r.Retention.BoundaryVersion != 0 {
			b.Fatalf("pass: %+v", r)
		}
	}
	after := c.Counts()
	b.ReportMetric(float64(after.Total()-before.Total())/float64(b.N), "requests/op")
	b.ReportMetric(float64(after.Put-before.Put)/float64(b.N), "puts/op")
	b.ReportMetric(float64(after.Delete+after.DeleteMany-before.Delete-before.DeleteMany)/float64(b.N), "deletes/op")
}
