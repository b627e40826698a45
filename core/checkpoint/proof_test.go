package checkpoint

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/retain-dev/retain/core/checkpoint/registry"
	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/storage/claim"
)

// mustCreate creates a checkpoint in this process.
func mustCreate(t testing.TB, ps *proofStore, name string) *Created {
	t.Helper()
	c, err := Create(bg, ps.s, name, "")
	if err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
	return c
}

// wantLive checks that name is live with id (if id is not empty).
func wantLive(t testing.TB, live map[string]Info, name string, id registry.ID) Info {
	t.Helper()
	in, ok := live[name]
	if !ok || (id != "" && in.ID != id) {
		t.Fatalf("checkpoint %s: live %v, id %s, want %s", name, ok, in.ID, id)
	}
	return in
}

func liveInfos(live map[string]Info) []Info {
	var out []Info
	for _, in := range live {
		out = append(out, in)
	}
	return out
}

// TestProofCrashCreate: for every create failpoint, on localfs and on
// versitygw, a child process exits there while another checkpoint ("keep")
// exists; the claim it left is taken over with proof that its pid is gone;
// before reconcile no live checkpoint lacks a pin; reconcile finishes or
// rolls back; then the invariants hold, real Lance reads every pin, and the
// name can be used again.
func TestProofCrashCreate(t *testing.T) {
	for _, kind := range proofBackends {
		t.Run(kind, func(t *testing.T) {
			pe := newProofEnv(t, kind)
			for _, fp := range CreateFailpoints {
				t.Run(filepath.Base(fp), func(t *testing.T) {
					ps := pe.store(t)
					keep := mustCreate(t, ps, "keep")
					crashAt(t, ps, "create", "crash", fp)
					held := takeoverDead(t, ps)
					if want := fp != FPCreateAfterCapture && fp != FPCreateAfterRelease; held != want {
						t.Fatalf("claim held %v after a crash at %s", held, fp)
					}
					published := slices.Contains([]string{FPCreateAfterCommit, FPCreateAfterSidecarGone, FPCreateAfterRelease}, fp)
					live, _ := livePins(t, ps, false) // no live checkpoint lacks a pin, even before reconcile
					wantLive(t, live, "keep", keep.ID)
					if _, ok := live["crash"]; ok != published || len(live) != 1+btoi(published) {
						t.Fatalf("published %v, want %v (%d live)", ok, published, len(live))
					}
					leftovers := stray(t, ps)
					live, rep := reconcileOK(t, ps)
					wantLive(t, live, "keep", keep.ID)
					if _, ok := live["crash"]; ok != published {
						t.Fatalf("after reconcile published %v, want %v", ok, published)
					}
					if !published {
						mustCreate(t, ps, "crash")
						live, _ = livePins(t, ps, true)
					}
					lanceCheck(t, ps, liveInfos(live)...)
					t.Logf("%s %s: claim held %v, published %v, %d stray tags before reconcile, %d sidecars resolved, %d reclaimed",
						kind, fp, held, published, len(leftovers), len(rep.Sidecars), len(rep.Reclaimed))
				})
			}
		})
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestProofCrashDelete: for every delete failpoint, on localfs and on
// versitygw, a child deleting "victim" exits there while "keep" exists.
// The claim is taken over with proof; before reconcile no live checkpoint
// lacks a pin and the victim is tombstoned exactly when the crash came
// after the commit (its tags may stay: over-retention); reconcile reclaims
// every leftover; the name is then revived with a fresh id and the old id
// stays tombstoned.
func TestProofCrashDelete(t *testing.T) {
	for _, kind := range proofBackends {
		t.Run(kind, func(t *testing.T) {
			pe := newProofEnv(t, kind)
			for _, fp := range DeleteFailpoints {
				t.Run(filepath.Base(fp), func(t *testing.T) {
					ps := pe.store(t)
					keep := mustCreate(t, ps, "keep")
					victim := mustCreate(t, ps, "victim")
					crashAt(t, ps, "delete", "victim", fp)
					held := takeoverDead(t, ps)
					if want := fp == FPDeleteAfterClaim || fp == FPDeleteAfterCommit; held != want {
						t.Fatalf("claim held %v after a crash at %s", held, fp)
					}
					tombstoned := fp != FPDeleteAfterClaim
					live, _ := livePins(t, ps, false)
					wantLive(t, live, "keep", keep.ID)
					if _, ok := live["victim"]; ok == tombstoned {
						t.Fatalf("victim live %v after a crash at %s", ok, fp)
					}
					leftovers := stray(t, ps)
					for _, p := range leftovers {
						_, tag, _ := strings.Cut(p, ":")
						if pt, _ := registry.ParsePinTag(tag); pt.CheckpointID != victim.ID {
							t.Fatalf("stray %s is not the victim's", p)
						}
					}
					live, rep := reconcileOK(t, ps)
					wantLive(t, live, "keep", keep.ID)
					if !tombstoned {
						wantLive(t, live, "victim", victim.ID)
						if _, err := Delete(bg, ps.s, "victim"); err != nil {
							t.Fatal(err)
						}
						live, _ = reconcileOK(t, ps)
					}
					if _, ok := live["victim"]; ok {
						t.Fatal("victim revived")
					}
					c := mustCreate(t, ps, "victim")
					if c.ID == victim.ID || c.Generation != 2 {
						t.Fatalf("revived %s generation %d (old id %s)", c.ID, c.Generation, victim.ID)
					}
					_, snap := head(t, ps.s)
					if old, err := snap.ByID(victim.ID); err != nil || old.State != registry.Tombstoned {
						t.Fatalf("old id: %+v %v", old, err)
					}
					live, _ = livePins(t, ps, true)
					lanceCheck(t, ps, liveInfos(live)...)
					t.Logf("%s %s: claim held %v, tombstoned %v, %d leftover tags before reconcile, %d reclaimed",
						kind, fp, held, tombstoned, len(leftovers), len(rep.Reclaimed))
				})
			}
		})
	}
}

// TestProofCrashReconcile: for every reconcile failpoint, on localfs and
// on versitygw, reconcile runs in a child over a store with work to do — a
// delete that died after its commit (tombstoned, tags left) and a create
// that died after its tags (sidecar and tags left) — and exits there. The
// claim is taken over with proof; "keep" never lacks a pin; a second
// reconcile finishes the work and the invariants hold.
func TestProofCrashReconcile(t *testing.T) {
	for _, kind := range proofBackends {
		t.Run(kind, func(t *testing.T) {
			pe := newProofEnv(t, kind)
			for _, fp := range ReconcileFailpoints {
				t.Run(filepath.Base(fp), func(t *testing.T) {
					ps := pe.store(t)
					keep := mustCreate(t, ps, "keep")
					mustCreate(t, ps, "victim")
					crashAt(t, ps, "delete", "victim", FPDeleteAfterCommit)
					takeoverDead(t, ps)
					crashAt(t, ps, "create", "orphan", FPCreateAfterTags)
					takeoverDead(t, ps)
					before := stray(t, ps)
					if len(before) != 6 {
						t.Fatalf("setup left %d stray tags, want 6: %v", len(before), before)
					}
					crashAt(t, ps, "reconcile", "", fp)
					if !takeoverDead(t, ps) {
						t.Fatalf("no claim left by a reconcile that died at %s", fp)
					}
					live, _ := livePins(t, ps, false)
					wantLive(t, live, "keep", keep.ID)
					mid := stray(t, ps)
					live, rep := reconcileOK(t, ps)
					if len(live) != 1 {
						t.Fatalf("live %v", live)
					}
					wantLive(t, live, "keep", keep.ID)
					mustCreate(t, ps, "orphan")
					live, _ = livePins(t, ps, true)
					lanceCheck(t, ps, liveInfos(live)...)
					t.Logf("%s %s: %d stray tags before the crash, %d after it, then %d sidecars resolved and %d reclaimed",
						kind, fp, len(before), len(mid), len(rep.Sidecars), len(rep.Reclaimed))
				})
			}
		})
	}
}

// race runs op on name in two child processes started together (both
// wait for the same instant after opening the store).
func race(t testing.TB, ps *proofStore, op, name string, retryHeld bool) [2]*childResult {
	t.Helper()
	dir := t.TempDir()
	goFile := filepath.Join(dir, "go")
	var waits [2]func() *childResult
	for i := range waits {
		sp := childSpec{Loc: ps.loc, Op: op, Name: name, RetryHeld: retryHeld, Ready: filepath.Join(dir, fmt.Sprint("ready", i)),
			Go: goFile, Out: filepath.Join(dir, fmt.Sprint("result", i))}
		cmd, out := startChild(t, sp, "")
		waits[i] = func() *childResult { return waitChild(t, cmd, out, sp, "") }
	}
	for i := 0; i < 2; {
		if _, err := os.Stat(filepath.Join(dir, fmt.Sprint("ready", i))); err == nil {
			i++
			continue
		}
		time.Sleep(time.Millisecond)
	}
	if err := os.WriteFile(goFile, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	return [2]*childResult{waits[0](), waits[1]()}
}

// raceOutcome checks that exactly one of two racing creates won and the
// other was refused with ErrNameTaken, or (without retries) claim.ErrHeld;
// it returns the winner and the loser.
func raceOutcome(t testing.TB, res [2]*childResult, retryHeld bool) (win, lose *childResult) {
	t.Helper()
	switch {
	case res[0].Err == "" && res[1].Err != "":
		win, lose = res[0], res[1]
	case res[1].Err == "" && res[0].Err != "":
		win, lose = res[1], res[0]
	default:
		t.Fatalf("want exactly one winner: %+v / %+v", res[0], res[1])
	}
	if !lose.NameTaken && !(lose.Held && !retryHeld) {
		t.Fatalf("the loser failed otherwise: %+v", lose)
	}
	return win, lose
}

// liveWithName counts the live headers holding name.
func liveWithName(snap *registry.Snapshot, name string) int {
	n := 0
	for _, cp := range snap.Checkpoints {
		if cp.Name == name && cp.State == registry.Live {
			n++
		}
	}
	return n
}

const raceRounds = 10

// TestProofRaceSameName: two OS processes create the same new name at the
// same instant, 10 rounds per backend (odd rounds retry while the claim is
// held, as a script would; even rounds take the protocol's answer). Each
// round: exactly one authority record (one live header with the name, the
// winner's id), the loser refused with ErrNameTaken (or claim.ErrHeld),
// any tag the loser left is a reclaimable pin, and after reconcile no tag
// but the live checkpoints' remains.
func TestProofRaceSameName(t *testing.T) {
	for _, kind := range proofBackends {
		t.Run(kind, func(t *testing.T) {
			pe := newProofEnv(t, kind)
			ps := pe.store(t)
			outcomes := map[string]int{}
			for round := 1; round <= raceRounds; round++ {
				name := fmt.Sprintf("race/%d", round)
				retry := round%2 == 1
				win, lose := raceOutcome(t, race(t, ps, "create", name, retry), retry)
				_, snap := head(t, ps.s)
				cp, err := snap.ByName(name)
				if err != nil || cp.ID != win.ID || liveWithName(snap, name) != 1 || cp.Generation != 1 {
					t.Fatalf("round %d: registry %+v %v, winner %s", round, cp, err, win.ID)
				}
				left := stray(t, ps)
				live, _ := reconcileOK(t, ps)
				wantLive(t, live, name, win.ID)
				outcomes[fmt.Sprintf("loser name-taken=%v held=%v (held retries>0: %v), winner attempts %d, stray %d",
					lose.NameTaken, lose.Held, lose.HeldRetries > 0, win.Attempts, len(left))]++
			}
			live, _ := livePins(t, ps, true)
			if len(live) != raceRounds {
				t.Fatalf("%d live checkpoints, want %d", len(live), raceRounds)
			}
			lanceCheck(t, ps, liveInfos(live)...)
			t.Logf("%s, %d rounds: %v", kind, raceRounds, outcomes)
		})
	}
}

// TestProofRaceRevive: a tombstoned name is revived by two OS processes at
// the same instant, 10 rounds per backend. Each round: exactly one fresh
// id at generation 2, the old id stays tombstoned and never revives, one
// live header with the name, and reconcile leaves only live pins.
func TestProofRaceRevive(t *testing.T) {
	for _, kind := range proofBackends {
		t.Run(kind, func(t *testing.T) {
			pe := newProofEnv(t, kind)
			ps := pe.store(t)
			outcomes := map[string]int{}
			var olds []registry.ID
			for round := 1; round <= raceRounds; round++ {
				name := fmt.Sprintf("reuse/%d", round)
				retry := round%2 == 1
				old := mustCreate(t, ps, name)
				if _, err := Delete(bg, ps.s, name); err != nil {
					t.Fatal(err)
				}
				olds = append(olds, old.ID)
				win, lose := raceOutcome(t, race(t, ps, "create", name, retry), retry)
				_, snap := head(t, ps.s)
				res, _ := snap.Reservation(name)
				if win.ID == old.ID || win.Generation != 2 || res.State != registry.Live || res.Generation != 2 || res.CheckpointID != win.ID || liveWithName(snap, name) != 1 {
					t.Fatalf("round %d: winner %+v, reservation %+v, old %s", round, win, res, old.ID)
				}
				for _, id := range olds {
					if cp, err := snap.ByID(id); err != nil || cp.State != registry.Tombstoned {
						t.Fatalf("round %d: old id %s: %+v %v", round, id, cp, err)
					}
				}
				left := stray(t, ps)
				live, _ := reconcileOK(t, ps)
				wantLive(t, live, name, win.ID)
				outcomes[fmt.Sprintf("loser name-taken=%v held=%v (held retries>0: %v), winner attempts %d, stray %d",
					lose.NameTaken, lose.Held, lose.HeldRetries > 0, win.Attempts, len(left))]++
			}
			live, _ := livePins(t, ps, true)
			if len(live) != raceRounds {
				t.Fatalf("%d live checkpoints, want %d", len(live), raceRounds)
			}
			lanceCheck(t, ps, liveInfos(live)...)
			t.Logf("%s, %d rounds: %v", kind, raceRounds, outcomes)
		})
	}
}

// TestProofABA: on localfs and on versitygw, the table is deleted and
// recreated at the same path with the same version numbers (through the
// Store API) between capture and tagging: create finds another commit at
// the tagged version when it reads the heads after the tags, rolls its
// tags back and starts over; the second attempt pins the recreated table,
// and nothing of the first is left (pin, sidecar, claim).
func TestProofABA(t *testing.T) {
	for _, kind := range proofBackends {
		t.Run(kind, func(t *testing.T) {
			pe := newProofEnv(t, kind)
			ps := pe.store(t)
			testHookBeforeTags = func() {
				testHookBeforeTags = nil
				removeFolder(t, ps.s, "v2-appends.lance")
				uploadFixture(t, ps.s, "v2-appends-again", "v2-appends.lance")
			}
			defer func() { testHookBeforeTags = nil }()
			c, err := Create(bg, ps.s, "a", "")
			if err != nil || c.Attempts != 2 {
				t.Fatalf("ABA on %s: %+v %v", kind, c, err)
			}
			for _, ct := range c.Tables {
				if ct.Path == "v2-appends.lance" && ct.PhysicalRef != headRef(t, ps.s, ct.Path) {
					t.Fatalf("pinned %s, not the recreated table's head", ct.PhysicalRef)
				}
			}
			live, pins := livePins(t, ps, true)
			wantLive(t, live, "a", c.ID)
			if all := allPins(t, ps.s); len(all) != len(pins) {
				t.Fatalf("the first attempt left pins: %v, live %v", all, pins)
			}
			noSidecars(t, ps.s)
			if _, _, err := claim.Read(bg, ps.s); !errors.Is(err, storage.ErrNotFound) {
				t.Fatalf("claim left: %v", err)
			}
			reconcileOK(t, ps)
			lanceCheck(t, ps, liveInfos(live)...)
		})
	}
}
