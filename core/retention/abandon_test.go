package retention

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/retain-dev/retain/adapters/localfs"
	"github.com/retain-dev/retain/core/retention/runs"
	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/storage/claim"
)

// incompleteRun leaves an unfinished run: branch-tag.lance's deletes fail,
// so its plan stays journaled and the open marker stays.
func incompleteRun(t *testing.T, dir string) string {
	t.Helper()
	drv, err := localfs.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	s, err := storage.NewStore(bg, "localfs", failDeletes(drv, "branch-tag.lance/"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rep, err := Run(bg, s.At(loc(dir)), Policy{KeepLast: 1}, RunOptions{ConfirmWriteOutage: true})
	if !errors.Is(err, ErrRunIncomplete) {
		t.Fatalf("want an incomplete run, got %v", err)
	}
	return rep.OperationID
}

// TestAbandonUnreadableJournal: a truncated run.json (or a missing one
// whose open marker stays) used to block every later cleanup: resume and
// abandon both refused to parse it. A new run now names the command that
// clears it; `--abandon OP` closes the run without parsing the journal,
// keeping its bytes; the next run proceeds.
func TestAbandonUnreadableJournal(t *testing.T) {
	for _, c := range []struct {
		name   string
		damage func(t *testing.T, p string)
		say    string
	}{
		{"truncated", func(t *testing.T, p string) {
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, b[:len(b)/2], 0o644); err != nil {
				t.Fatal(err)
			}
		}, "does not parse"},
		{"missing", func(t *testing.T, p string) {
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
		}, "is missing"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir, _ := setup(t)
			op := incompleteRun(t, dir)
			jp := filepath.Join(dir, filepath.FromSlash(JournalKey(op)))
			c.damage(t, jp)
			damaged, _ := os.ReadFile(jp)
			s := open(t, dir, false)
			l := loc(dir)

			if _, err := Resume(bg, s, ResumeOptions{}); err == nil {
				t.Fatal("resumed from an unreadable journal")
			}
			_, err := Run(bg, s, Policy{KeepLast: 1}, RunOptions{ConfirmWriteOutage: true})
			abandon := "`retain cleanup run " + l.String() + " --abandon " + op + "`"
			if !errors.Is(err, runs.ErrOpen) || !strings.Contains(err.Error(), abandon) || !strings.Contains(err.Error(), c.say) {
				t.Fatalf("a new run must be refused naming %s, got %v", abandon, err)
			}

			j, err := Abandon(bg, s, op, ResumeOptions{})
			if err != nil {
				t.Fatalf("abandon: %v", err)
			}
			if j.State != StateAbandoned || !strings.Contains(j.Note, "abandoned by") {
				t.Fatalf("abandoned record %+v", j)
			}
			if rj, _, err := ReadJournal(bg, s, op); err != nil || rj.State != StateAbandoned || rj.Note != j.Note {
				t.Fatalf("journal after abandon: %+v, %v", rj, err)
			}
			if c.name == "truncated" {
				kept, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(corruptKey(op))))
				if err != nil || string(kept) != string(damaged) {
					t.Fatalf("the unreadable journal's bytes were not kept: %v", err)
				}
			}
			for _, k := range []string{openKey(op), JournalPrefix + op + "/tables/0000.json", JournalPrefix + op + "/tables/0001.json"} {
				if exists(t, dir, k) {
					t.Fatalf("%s left after abandon", k)
				}
			}
			if p, _, err := claim.Read(bg, s); err == nil && p != nil {
				t.Fatalf("claim left held: %+v", p)
			}
			if _, err := Abandon(bg, s, op, ResumeOptions{}); storage.KindOf(err) != storage.ErrPreconditionFailed {
				t.Fatalf("second abandon: %v", err)
			}
			if _, err := Run(bg, s, Policy{KeepLast: 1}, RunOptions{ConfirmWriteOutage: true}); err != nil {
				t.Fatalf("the next run: %v", err)
			}
		})
	}
}
