package main

import (
	"strings"
	"testing"

	"github.com/retain-dev/retain/core/checkpoint"
)

// SIGINT that lands after a checkpoint delete or create has committed, as
// it releases the claim: the release must not use the cancelled context,
// or the claim stays held (exit 0, a warning) and every later retention
// operation is refused until someone takes the claim over.
func TestSignalAfterCommitStillReleasesClaim(t *testing.T) {
	for _, tc := range []struct {
		name, fp string
		args     []string
	}{
		{"delete", checkpoint.FPDeleteAfterCommit, []string{"checkpoint", "delete", "nightly"}},
		{"create", checkpoint.FPCreateAfterSidecarGone, []string{"checkpoint", "create", "weekly"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := fixtureDB(t, "deletes")
			if _, errs, code := retain(t, "checkpoint", "create", "nightly", db); code != 0 {
				t.Fatalf("create: %d %s", code, errs)
			}
			p := startPaused(t, tc.fp, append(tc.args, db)...)
			p.interruptAndResume(t)
			out := p.out
			if st, _, _ := retain(t, "claim", "status", db); !strings.Contains(st, "free") {
				t.Fatalf("the claim after SIGINT past the commit: %s\n%s output: %s", st, tc.name, out.String())
			}
		})
	}
}
