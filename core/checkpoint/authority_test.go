package checkpoint

import (
	"bytes"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/retain-dev/retain/core/checkpoint/registry"
	"github.com/retain-dev/retain/core/lance"
	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/storage/memstore"
	"github.com/retain-dev/retain/core/storage/storagetest"
)

// authorityStore builds the store every damage case starts from: a
// checkpoint "gone" created and deleted (registry versions 1, 2), then
// "a" (3) and "b" (4), plus one leftover pin of "gone" that an intact
// registry reclaims. It returns the live checkpoints and the leftover.
func authorityStore(t *testing.T, pe *proofEnv, quiet bool) (*proofStore, map[string]Info, string) {
	t.Helper()
	ps := pe.store(t)
	gone := mustCreate(t, ps, "gone")
	if _, err := Delete(bg, ps.s, "gone"); err != nil {
		t.Fatal(err)
	}
	mustCreate(t, ps, "a")
	mustCreate(t, ps, "b")
	if quiet {
		// Versions 5 and 6: a checkpoint created and deleted, so the head
		// publishes nothing and no registry pin names it.
		mustCreate(t, ps, "tmp")
		if _, err := Delete(bg, ps.s, "tmp"); err != nil {
			t.Fatal(err)
		}
	}
	ds, _ := lance.Open(ps.s, "v2-appends.lance")
	leftover := registry.PinTagPrefix(gone.ID) + "t_" + "2222222222222222222222222222222222222222222222222222222222222222"
	if _, err := ds.CreateTag(bg, leftover, 3, nil); err != nil {
		t.Fatal(err)
	}
	live, _ := livePins(t, ps, false)
	return ps, live, "v2-appends.lance:" + leftover
}

// headJSON reads registry version v as a generic JSON object.
func versionJSON(t *testing.T, s *storage.Store, v registry.Version) map[string]any {
	t.Helper()
	b, _, err := s.ReadAll(bg, registry.VersionKey(v))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func writeVersionJSON(t *testing.T, s *storage.Store, v registry.Version, m map[string]any) {
	t.Helper()
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutBytes(bg, registry.VersionKey(v), append(b, '\n'), storage.PutOptions{Mode: storage.PutOverwrite}); err != nil {
		t.Fatal(err)
	}
}

// rowsOf returns the indexes of the rows of checkpoint id in m.
func rowsOf(m map[string]any, id registry.ID) []int {
	var out []int
	for i, r := range m["rows"].([]any) {
		if r.(map[string]any)["checkpoint_id"] == string(id) {
			out = append(out, i)
		}
	}
	return out
}

// registryDamages are issue 13's items 1–4, each as the operator (or a
// lifecycle rule, a bad restore, a bit flip) did it. Version 3 published
// "a", version 4 (the head) published "b".
type registryDamage struct {
	name string
	// quiet: on a store whose head (version 6) published nothing.
	quiet  bool
	damage func(t *testing.T, ps *proofStore, live map[string]Info)
}

var registryDamages = []registryDamage{
	{"registry deleted", false, func(t *testing.T, ps *proofStore, _ map[string]Info) {
		removeFolder(t, ps.s, registry.RegistryPath)
	}},
	{"registry versions expired", false, func(t *testing.T, ps *proofStore, _ map[string]Info) {
		removeFolder(t, ps.s, "_retain/registry/versions")
	}},
	{"head version deleted", false, func(t *testing.T, ps *proofStore, _ map[string]Info) {
		if err := ps.s.Delete(bg, registry.VersionKey(4), storage.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}},
	{"publishing version deleted", false, func(t *testing.T, ps *proofStore, _ map[string]Info) {
		if err := ps.s.Delete(bg, registry.VersionKey(3), storage.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}},
	{"head rewritten without a row", false, func(t *testing.T, ps *proofStore, live map[string]Info) {
		m := versionJSON(t, ps.s, 4)
		rows := m["rows"].([]any)
		i := rowsOf(m, live["a"].ID)[0]
		m["rows"] = append(rows[:i:i], rows[i+1:]...)
		writeVersionJSON(t, ps.s, 4, m)
	}},
	{"byte flip in a row that still parses", false, func(t *testing.T, ps *proofStore, live map[string]Info) {
		b, _, err := ps.s.ReadAll(bg, registry.VersionKey(4))
		if err != nil {
			t.Fatal(err)
		}
		// The last character of the transaction uuid in a's first row.
		m := versionJSON(t, ps.s, 4)
		ref := m["rows"].([]any)[rowsOf(m, live["a"].ID)[0]].(map[string]any)["physical_ref"].(string)
		enc, _ := json.Marshal(ref)
		inner := enc[1 : len(enc)-1] // as the file holds it, ending in the uuid and \"
		at := bytes.Index(b, inner)
		if at < 0 || !bytes.HasSuffix(inner, []byte(`\"`)) {
			t.Fatalf("row %s not found in the head's bytes", inner)
		}
		i := at + len(inner) - len(`\"`) - 1
		if b[i] == '0' {
			b[i] = '1'
		} else {
			b[i] = '0'
		}
		if _, err := ps.s.PutBytes(bg, registry.VersionKey(4), b, storage.PutOptions{Mode: storage.PutOverwrite}); err != nil {
			t.Fatal(err)
		}
	}},
	{"head deleted, publishing nothing", true, func(t *testing.T, ps *proofStore, _ map[string]Info) {
		// The head was tmp's tombstone: without it tmp looks live again.
		if err := ps.s.Delete(bg, registry.VersionKey(6), storage.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}},
	{"tombstone forged in a head publishing nothing", true, func(t *testing.T, ps *proofStore, live map[string]Info) {
		// Consistent in every invariant, and no registry pin names the
		// head: only the head record shows it is not the one its commit
		// wrote.
		forgeTombstone(t, ps, live["a"].ID)
		reg := registry.Open(ps.s, registry.Options{})
		if _, _, err := reg.HeadUnverified(bg); err != nil {
			t.Fatalf("the forged head must still parse: %v", err)
		}
		if _, _, err := reg.Head(bg); !errors.Is(err, registry.ErrCorruptRegistry) {
			t.Fatalf("Head read a forged head: %v", err)
		}
	}},
	{"head record deleted with a tombstone forged", true, func(t *testing.T, ps *proofStore, live map[string]Info) {
		forgeTombstone(t, ps, live["a"].ID)
		if err := ps.s.Delete(bg, registry.HintKey, storage.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}},
	{"head record torn", true, func(t *testing.T, ps *proofStore, _ map[string]Info) {
		if _, err := ps.s.PutBytes(bg, registry.HintKey, []byte(`{"format":1,"vers`), storage.PutOptions{Mode: storage.PutOverwrite}); err != nil {
			t.Fatal(err)
		}
	}},
	{"publishing version rewritten", false, func(t *testing.T, ps *proofStore, _ map[string]Info) {
		m := versionJSON(t, ps.s, 3)
		for _, c := range m["checkpoints"].([]any) {
			c.(map[string]any)["actor"] = "mallory@restore"
		}
		writeVersionJSON(t, ps.s, 3, m)
	}},
}

// TestAuthorityLostKeepsEveryPin: for each damage to the registry, on
// localfs and versitygw, reconcile refuses with ErrAuthorityLost naming
// the way out, reclaims and repairs nothing, every pin is still there —
// the leftover an intact registry would reclaim included — a checkpoint
// delete (which reconciles first) refuses, and real Lance still checks
// out every pinned version.
func TestAuthorityLostKeepsEveryPin(t *testing.T) {
	for _, kind := range proofBackends {
		t.Run(kind, func(t *testing.T) {
			pe := newProofEnv(t, kind)
			for _, d := range registryDamages {
				t.Run(d.name, func(t *testing.T) {
					ps, live, leftover := authorityStore(t, pe, d.quiet)
					before := allPins(t, ps.s)
					if !before[leftover] {
						t.Fatalf("setup: no leftover %s", leftover)
					}
					d.damage(t, ps, live)
					damaged := allPins(t, ps.s) // the damage may take registry pins with it
					rep, err := Reconcile(bg, ps.s)
					if !errors.Is(err, ErrAuthorityLost) || !errors.Is(err, ErrConflicts) || !errors.Is(err, storage.ErrPreconditionFailed) {
						t.Fatalf("reconcile on a damaged registry: %v %+v", err, rep)
					}
					if len(rep.Reclaimed)+len(rep.Repaired)+len(rep.Sidecars) != 0 {
						t.Fatalf("reconcile acted on a registry it cannot trust: %+v", rep)
					}
					if got := allPins(t, ps.s); !maps.Equal(got, damaged) {
						t.Fatalf("pins changed: before %v, after %v", damaged, got)
					}
					if !bytes.Contains([]byte(err.Error()), []byte("retain registry recover")) {
						t.Fatalf("the refusal does not name the way out: %v", err)
					}
					if _, err := Delete(bg, ps.s, "b"); !errors.Is(err, ErrAuthorityLost) {
						t.Fatalf("delete on a damaged registry: %v", err)
					}
					if got := allPins(t, ps.s); !maps.Equal(got, damaged) {
						t.Fatalf("the refused delete changed pins")
					}
					lanceCheck(t, ps, liveInfos(live)...)
				})
			}
		})
	}
}

// TestIntactRegistryReclaimsLeftovers is the control: on the undamaged
// store reconcile reclaims exactly the deleted checkpoint's leftover.
func TestIntactRegistryReclaimsLeftovers(t *testing.T) {
	ps, live, leftover := authorityStore(t, newProofEnv(t, "localfs"), false)
	before := allPins(t, ps.s)
	got, rep := reconcileOK(t, ps)
	if len(rep.Reclaimed) != 1 || rep.Reclaimed[0].Path+":"+rep.Reclaimed[0].Tag != leftover {
		t.Fatalf("reclaimed %+v, want %s", rep.Reclaimed, leftover)
	}
	delete(before, leftover)
	if after := allPins(t, ps.s); !maps.Equal(after, before) {
		t.Fatalf("pins: %v, want %v", after, before)
	}
	if len(got) != len(live) {
		t.Fatalf("live %v, want %v", got, live)
	}
}

// extraDamages are refusals recover must also get out of: a head that no
// longer reads, and a registry lost while its pins carry no record (pins
// written before records existed).
var extraDamages = []registryDamage{
	{"head truncated", false, func(t *testing.T, ps *proofStore, _ map[string]Info) {
		b, _, err := ps.s.ReadAll(bg, registry.VersionKey(4))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ps.s.PutBytes(bg, registry.VersionKey(4), b[:len(b)/2], storage.PutOptions{Mode: storage.PutOverwrite}); err != nil {
			t.Fatal(err)
		}
	}},
	{"registry deleted, pins without records", false, func(t *testing.T, ps *proofStore, _ map[string]Info) {
		removeFolder(t, ps.s, registry.RegistryPath)
		for _, root := range pinRoots()[1:] {
			ds, _ := lance.Open(ps.s, root)
			for _, tg := range pinTags(t, ps.s, root) {
				if err := ds.DeleteTag(bg, tg.Name, ""); err != nil {
					t.Fatal(err)
				}
				tg.Metadata = nil
				if _, err := ds.PutTagFile(bg, tg); err != nil {
					t.Fatal(err)
				}
			}
		}
	}},
}

// untrustedHead are the damages after which recover builds below the head.
var untrustedHead = map[string]bool{
	"tombstone forged in a head publishing nothing": true,
	"head record deleted with a tombstone forged":   true,
	"head record torn": true,
}

// TestRecoverRestoresEveryCheckpoint: after each damage, `registry
// recover` puts every checkpoint back live with every pin (under its
// name where a proof of it survived), the next reconcile is clean, and
// real Lance checks out every pinned version — losing the registry costs
// no checkpoint. A deleted checkpoint whose tombstone was lost comes back
// as recovered/<id>: over-retained, never under.
func TestRecoverRestoresEveryCheckpoint(t *testing.T) {
	for _, kind := range proofBackends {
		t.Run(kind, func(t *testing.T) {
			pe := newProofEnv(t, kind)
			for _, d := range append(registryDamages, extraDamages...) {
				t.Run(d.name, func(t *testing.T) {
					ps, live, _ := authorityStore(t, pe, d.quiet)
					d.damage(t, ps, live)
					if _, err := Reconcile(bg, ps.s); err == nil {
						t.Fatal("reconcile accepted the damaged registry")
					}
					vr, err := Verify(bg, ps.s)
					if !errors.Is(err, ErrRegistryDamaged) || vr.Next != "retain registry recover STORE" {
						t.Fatalf("verify: %v %+v", err, vr)
					}
					dry, err := Recover(bg, ps.s, RecoverOptions{DryRun: true})
					if err != nil || dry.RegistryVersion != 0 || len(dry.Checkpoints) == 0 {
						t.Fatalf("dry run: %v %+v", err, dry)
					}
					rep, err := Recover(bg, ps.s, RecoverOptions{})
					if err != nil || len(rep.Unrecoverable) != 0 {
						t.Fatalf("recover: %v %+v", err, rep)
					}
					if untrustedHead[d.name] && !slices.ContainsFunc(rep.Revived, func(n string) bool { return strings.HasPrefix(n, "tmp ") }) {
						// Built below the head in doubt: tmp, deleted by
						// that head, comes back live and is named (and so
						// does a, where the head forged its tombstone).
						t.Fatalf("revived %v, want tmp among them", rep.Revived)
					}
					got := recoveredClean(t, ps)
					byID := map[registry.ID]Info{}
					for _, in := range got {
						byID[in.ID] = in
					}
					legacy := d.name == "registry deleted, pins without records"
					for name, in := range live {
						rin, ok := byID[in.ID]
						if !ok {
							t.Fatalf("checkpoint %s (%s) was not recovered: %+v", name, in.ID, got)
						}
						if want := name; !legacy && rin.Name != want {
							t.Fatalf("checkpoint %s recovered as %q", in.ID, rin.Name)
						}
					}
					vr, err = Verify(bg, ps.s)
					if d.name == "publishing version rewritten" {
						// The rewritten version stays as evidence: the
						// chain shows it, nothing else is wrong.
						if !errors.Is(err, ErrRegistryDamaged) || len(vr.ChainBreaks) != 1 || vr.ChainBreaks[0].Version != 4 || len(vr.Problems) != 0 || vr.HeadError != "" {
							t.Fatalf("verify after recover: %v %+v", err, vr)
						}
					} else if err != nil {
						t.Fatalf("verify after recover: %v %+v", err, vr)
					}
					// Idempotent: a second recover finds nothing to do.
					if again, err := Recover(bg, ps.s, RecoverOptions{}); err != nil || again.RegistryVersion != 0 {
						t.Fatalf("second recover: %v %+v", err, again)
					}
					lanceCheck(t, ps, liveInfos(got)...)
				})
			}
		})
	}
}

// recoveredClean runs reconcile after a recover: no conflict, no sidecar;
// every live checkpoint healthy under show --deep (a recovered leftover
// may pin fewer tables than the others); every ogcp_ tag a live pin.
func recoveredClean(t *testing.T, ps *proofStore) map[string]Info {
	t.Helper()
	rep, err := Reconcile(bg, ps.s)
	if err != nil || len(rep.Conflicts) != 0 {
		t.Fatalf("reconcile after recover: %v %+v", err, rep)
	}
	noSidecars(t, ps.s)
	_, infos, err := List(bg, ps.s)
	if err != nil {
		t.Fatal(err)
	}
	live := map[string]Info{}
	pins := map[string]bool{}
	for _, in := range infos {
		sh, err := Show(bg, ps.s, string(in.ID), true)
		if err != nil || sh.Health != "ok" || len(sh.Deep.Missing) != 0 {
			t.Fatalf("show --deep %s: %+v %v", in.Name, sh, err)
		}
		live[in.Name] = in
		for _, p := range in.Pins {
			pins[p.Path+":"+p.Tag] = true
		}
	}
	for p := range allPins(t, ps.s) {
		if !pins[p] {
			t.Fatalf("after recover and reconcile %s remains, no live checkpoint's", p)
		}
	}
	return live
}

// forgeTombstone rewrites the head (version 6 of a quiet store) so that
// live checkpoint id is tombstoned, consistently in every invariant.
func forgeTombstone(t *testing.T, ps *proofStore, cid registry.ID) {
	t.Helper()
	m := versionJSON(t, ps.s, 6)
	id := string(cid)
	for _, k := range []string{"names", "checkpoints", "rows"} {
		for _, e := range m[k].([]any) {
			e := e.(map[string]any)
			if e["checkpoint_id"] == id || e["id"] == id {
				e["state"] = "tombstoned"
			}
		}
	}
	ts := append(m["tombstones"].([]any), map[string]any{"checkpoint_id": id, "name": "a", "generation": 1,
		"delete_operation_id": "delete-forged", "deleted_at": "2026-12-01T00:00:00Z", "actor": "mallory@host"})
	sort.Slice(ts, func(i, j int) bool {
		return ts[i].(map[string]any)["checkpoint_id"].(string) < ts[j].(map[string]any)["checkpoint_id"].(string)
	})
	m["tombstones"] = ts
	writeVersionJSON(t, ps.s, 6, m)
}

// TestRecoverUnplaceablePins: pins recover cannot place as they are never
// wedge the store. A pin on a table its checkpoint already pins at another
// version becomes a checkpoint of its own; a pin (without a record) of a
// version that is gone is reported naming --drop-pin, which drops it with
// the operator's reason, and the store is settled.
func TestRecoverUnplaceablePins(t *testing.T) {
	ps, live, _ := authorityStore(t, newProofEnv(t, "localfs"), false)
	a := live["a"]
	var tableID registry.ID
	for _, p := range a.Pins {
		if p.Path == "v2-appends.lance" {
			tableID = p.TableID
		}
	}
	ds, _ := lance.Open(ps.s, "v2-appends.lance")
	v2, err := ds.VersionAt(bg, 2)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := ds.PhysRef(bg, v2)
	if err != nil {
		t.Fatal(err)
	}
	second := registry.Pin{TableID: tableID, Incarnation: 1, Target: registry.Target{Path: "v2-appends.lance", Branch: "main", Version: 2, PhysicalRef: ref.String()}}
	secondTag, _ := registry.TablePinTag(a.ID, second)
	if _, err := ds.CreateTagOnBranch(bg, secondTag, "main", 2, registry.NewPinRecord(a.ID, "a", "main", a.CreatedAt, a.Actor, 2, &second).Metadata()); err != nil {
		t.Fatal(err)
	}
	bt, _ := lance.Open(ps.s, "branch-tag.lance")
	goneTag := registry.PinTagPrefix(registry.NewID()) + "t_" + strings.Repeat("4", 64)
	if _, err := bt.CreateTag(bg, goneTag, 2, nil); err != nil {
		t.Fatal(err)
	}
	v2key := bt.Key("_versions/18446744073709551613.manifest")
	if err := ps.s.Delete(bg, v2key, storage.DeleteOptions{}); err != nil {
		t.Fatalf("deleting branch-tag v2's manifest: %v", err)
	}
	removeFolder(t, ps.s, registry.RegistryPath)

	rep, err := Recover(bg, ps.s, RecoverOptions{})
	if err != nil || len(rep.Unrecoverable) != 1 || !strings.Contains(rep.Unrecoverable[0].Detail, "--drop-pin branch-tag.lance:"+goneTag) {
		t.Fatalf("recover: %v %+v", err, rep)
	}
	spilled := false
	for _, c := range rep.Checkpoints {
		for _, p := range c.Tables {
			spilled = spilled || (c.ID != a.ID && p.Path == "v2-appends.lance" && strings.HasPrefix(p.Replaces, registry.PinTagPrefix(a.ID)))
		}
	}
	if !spilled {
		t.Fatalf("the second pin of a on v2-appends was not given a checkpoint of its own: %+v", rep.Checkpoints)
	}
	if _, err := Reconcile(bg, ps.s); !errors.Is(err, ErrAuthorityLost) {
		t.Fatalf("reconcile with the unplaced pin: %v", err)
	}
	drop := RecoverOptions{DropPins: []string{"branch-tag.lance:" + goneTag}}
	if _, err := Recover(bg, ps.s, drop); !errors.Is(err, storage.ErrInvalidArgument) {
		t.Fatalf("a drop without a reason: %v", err)
	}
	drop.Reason = "its version was deleted by hand; nothing reads it"
	rep, err = Recover(bg, ps.s, drop)
	if err != nil || len(rep.Dropped) != 1 || rep.RegistryVersion != 0 || len(rep.Unrecoverable) != 0 {
		t.Fatalf("recover --drop-pin: %v %+v", err, rep)
	}
	recoveredClean(t, ps)
	if _, err := Verify(bg, ps.s); err != nil {
		t.Fatalf("verify: %v", err)
	}
}

// TestRecoverAgainAfterItsRecordWasLost: recover builds over a head that
// forged a tombstone, then its own head record write is lost (the record
// still names the forged head's true bytes). Run again, it must not take
// the forged version as its base: the checkpoint stays live and no pin of
// it is reclaimed.
func TestRecoverAgainAfterItsRecordWasLost(t *testing.T) {
	ps, live, _ := authorityStore(t, newProofEnv(t, "localfs"), true)
	record, _, err := ps.s.ReadAll(bg, registry.HintKey)
	if err != nil {
		t.Fatal(err)
	}
	forgeTombstone(t, ps, live["a"].ID)
	if _, err := Recover(bg, ps.s, RecoverOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := ps.s.PutBytes(bg, registry.HintKey, record, storage.PutOptions{Mode: storage.PutOverwrite}); err != nil {
		t.Fatal(err) // as if recover's record write had been lost
	}
	rep, err := Recover(bg, ps.s, RecoverOptions{})
	if err != nil || rep.From >= 6 {
		t.Fatalf("second recover built on version %d (the forged head is 6): %v %+v", rep.From, err, rep)
	}
	got := recoveredClean(t, ps)
	if in, ok := got["a"]; !ok || in.ID != live["a"].ID {
		t.Fatalf("a is not live after the second recover: %+v", got)
	}
}

// lostCommitAnswer lands every registry version put, then answers it
// with a transient error: the commit happened, its caller cannot know.
func lostCommitAnswer(c storagetest.Call, err error) error {
	if err == nil && c.Op == storagetest.OpPut && strings.HasPrefix(c.Key, registry.VersionsPrefix) {
		return storage.Errorf("put", c.Key, storage.ErrTransient, "connection reset (the put landed)")
	}
	return err
}

// TestLostCommitAnswersKeepTheHeadRecord: creates whose commit answers are
// lost (found landed through VerifyRef) still record the head, so two in
// a row do not leave a head Head must refuse.
func TestLostCommitAnswersKeepTheHeadRecord(t *testing.T) {
	mem := memstore.New()
	s, err := storage.NewStore(bg, "memstore", storagetest.NewHook(mem).After(lostCommitAnswer))
	if err != nil {
		t.Fatal(err)
	}
	plain, _ := memStore(t, "v2-appends")
	for _, o := range mustList(t, plain) {
		b, _, _ := plain.ReadAll(bg, o)
		if _, err := s.PutBytes(bg, o, b, storage.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	loc := storage.Location{Scheme: "mem", Bucket: "test"}
	for _, name := range []string{"a", "b"} {
		if _, err := Create(bg, s.At(loc), name, ""); err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
	}
	reg := registry.Open(s, registry.Options{})
	v, sha, err := reg.HeadRecord(bg)
	if err != nil || v != 2 || sha == "" {
		t.Fatalf("head record %d %q %v, want version 2", v, sha, err)
	}
	if _, _, err := reg.Head(bg); err != nil {
		t.Fatalf("head after two lost commit answers: %v", err)
	}
}

func mustList(t *testing.T, s *storage.Store) []string {
	t.Helper()
	objs, err := s.List(bg, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, o := range objs {
		out = append(out, o.Key)
	}
	return out
}
