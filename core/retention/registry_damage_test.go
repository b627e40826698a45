package retention

import (
	"encoding/json"
	"flag"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/retain-dev/retain/core/checkpoint"
	"github.com/retain-dev/retain/core/checkpoint/registry"
	"github.com/retain-dev/retain/core/lance"
)

var registryDamageSeeds = flag.Int("registry-damage-seeds", 40, "seeds of TestRegistryDamageNeverUnpins (a soak: -registry-damage-seeds=2000)")

// damagedStore is setup's store (checkpoint "nightly" pins deletes.lance
// v3 while v4 and v5 follow) plus a checkpoint "gone" created and deleted
// and one leftover pin of it, which an intact registry reclaims. Registry
// versions: 1 nightly, 2 gone, 3 gone's tombstone (the head).
func damagedStore(t *testing.T) string {
	t.Helper()
	dir, _ := setup(t)
	s := open(t, dir, false)
	gone, err := checkpoint.Create(bg, s, "gone", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := checkpoint.Delete(bg, s, "gone"); err != nil {
		t.Fatal(err)
	}
	ds, _ := lance.Open(s, "branch-tag.lance")
	if _, err := ds.CreateTag(bg, registry.PinTagPrefix(gone.ID)+"t_"+strings.Repeat("3", 64), 2, nil); err != nil {
		t.Fatal(err)
	}
	return dir
}

// dataKeys are the store's objects outside _retain/ and the refs: what
// cleanup may remove, named the same in every store setup builds.
func dataKeys(t *testing.T, dir string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		if !strings.HasPrefix(rel, "_retain/") && !strings.Contains(rel, "/_refs/") {
			out[rel] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// nightlyPins are the pin tags of checkpoint "nightly" as "root:tag".
func nightlyPins(t *testing.T, dir string, id registry.ID) map[string]bool {
	t.Helper()
	s := open(t, dir, false)
	out := map[string]bool{}
	for _, root := range []string{registry.RegistryPath, "deletes.lance", "branch-tag.lance"} {
		ds, _ := lance.Open(s, root)
		tags, _ := ds.ListTags(bg)
		for _, tg := range tags {
			if strings.HasPrefix(tg.Name, registry.PinTagPrefix(id)) {
				out[root+":"+tg.Name] = true
			}
		}
	}
	return out
}

// cleanupOnce runs what an operator runs: reconcile, then a cleanup run
// keeping the latest version; it returns the data keys removed.
func cleanupOnce(t *testing.T, dir string) map[string]bool {
	t.Helper()
	before := dataKeys(t, dir)
	s := open(t, dir, false)
	_, _ = checkpoint.Reconcile(bg, s)
	_, _ = Run(bg, s, Policy{KeepLast: 1}, RunOptions{ConfirmWriteOutage: true})
	after := dataKeys(t, dir)
	removed := map[string]bool{}
	for k := range before {
		if !after[k] {
			removed[k] = true
		}
	}
	return removed
}

// damageRegistry applies one or two random damages to the registry's
// objects, as an operator, a lifecycle rule, a bad restore or a bit flip
// would, and says what it did.
func damageRegistry(t *testing.T, rng *rand.Rand, dir string) string {
	t.Helper()
	reg := filepath.Join(dir, filepath.FromSlash(registry.RegistryPath))
	versions, _ := filepath.Glob(filepath.Join(reg, "versions", "*.json"))
	sort.Strings(versions) // newest first: V2 naming
	var did []string
	for n := 1 + rng.IntN(2); n > 0 && len(versions) > 0; n-- {
		v := versions[rng.IntN(len(versions))]
		name := filepath.Base(v)
		b, err := os.ReadFile(v)
		if err != nil {
			continue // removed by an earlier damage
		}
		switch k := rng.IntN(7); k {
		case 0:
			i := rng.IntN(len(b))
			b[i] ^= byte(1 << rng.IntN(7))
			did = append(did, fmt.Sprintf("flipped byte %d of %s", i, name))
			writeFile(t, v, b)
		case 1:
			n := rng.IntN(len(b))
			did = append(did, fmt.Sprintf("truncated %s to %d bytes", name, n))
			writeFile(t, v, b[:n])
		case 2:
			did = append(did, "deleted "+name)
			os.Remove(v)
		case 3, 4:
			var m map[string]any
			if json.Unmarshal(b, &m) != nil {
				continue
			}
			if k == 3 {
				rows, _ := m["rows"].([]any)
				if len(rows) == 0 {
					continue
				}
				i := rng.IntN(len(rows))
				m["rows"] = append(rows[:i:i], rows[i+1:]...)
				did = append(did, fmt.Sprintf("dropped row %d of %s", i, name))
			} else {
				did = append(did, "rewrote "+rewriteString(rng, m)+" in "+name)
			}
			nb, _ := json.Marshal(m)
			writeFile(t, v, append(nb, '\n'))
		case 5:
			hint := filepath.Join(reg, "latest_version_hint.json")
			if rng.IntN(2) == 0 {
				did = append(did, "deleted the head record")
				os.Remove(hint)
			} else if hb, err := os.ReadFile(hint); err == nil && len(hb) > 0 {
				hb[rng.IntN(len(hb))] ^= 1
				did = append(did, "flipped a byte of the head record")
				writeFile(t, hint, hb)
			}
		case 6:
			did = append(did, "deleted the registry")
			os.RemoveAll(reg)
		}
	}
	return strings.Join(did, "; ")
}

// rewriteString replaces one random string value in m (valid JSON after)
// with another of the same length, as a bit flip in a text field would.
func rewriteString(rng *rand.Rand, m map[string]any) string {
	type leaf struct {
		path string
		old  string
		set  func(string)
	}
	var leaves []leaf
	var walk func(v any, set func(any), path string)
	walk = func(v any, set func(any), path string) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				walk(e, func(n any) { x[k] = n }, path+"."+k)
			}
		case []any:
			for i, e := range x {
				walk(e, func(n any) { x[i] = n }, fmt.Sprintf("%s[%d]", path, i))
			}
		case string:
			if x != "" {
				leaves = append(leaves, leaf{path: path, old: x, set: func(s string) { set(s) }})
			}
		}
	}
	walk(m, nil, "")
	if len(leaves) == 0 {
		return "nothing"
	}
	sort.Slice(leaves, func(i, j int) bool { return leaves[i].path < leaves[j].path }) // map order is random
	l := leaves[rng.IntN(len(leaves))]
	b := []byte(l.old)
	b[rng.IntN(len(b))] = "abcdefghijklmnopqrstuvwxyz234567"[rng.IntN(32)]
	l.set(string(b))
	return l.path
}

func writeFile(t *testing.T, p string, b []byte) {
	t.Helper()
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestRegistryDamageNeverUnpins is issue 13's registry fuzz: random byte
// flips, truncations, deleted versions, rewritten rows and fields, a lost
// or flipped head record, a deleted registry. After each, reconcile and
// cleanup either act exactly as on the intact registry or refuse: never a
// file removed that the intact registry keeps (the pinned version's among
// them), never a pin of the live checkpoint reclaimed.
func TestRegistryDamageNeverUnpins(t *testing.T) {
	intact := cleanupOnce(t, damagedStore(t))
	if !intact["deletes.lance/_versions/18446744073709551614.manifest"] {
		t.Fatalf("the intact run removed %v: the test needs it to remove v1", intact)
	}
	acted, refused := 0, 0
	for seed := 0; seed < *registryDamageSeeds; seed++ {
		dir := damagedStore(t)
		s := open(t, dir, false)
		_, snap, err := registry.Open(s, registry.Options{}).Head(bg)
		if err != nil {
			t.Fatal(err)
		}
		c, err := snap.ByName("nightly")
		if err != nil {
			t.Fatal(err)
		}
		pins := nightlyPins(t, dir, c.ID)
		what := damageRegistry(t, rand.New(rand.NewPCG(uint64(seed), 13)), dir)
		removed := cleanupOnce(t, dir)
		for k := range removed {
			if !intact[k] {
				t.Fatalf("seed %d (%s): cleanup removed %s, which the intact registry keeps", seed, what, k)
			}
		}
		if len(removed) != 0 && len(removed) != len(intact) {
			t.Fatalf("seed %d (%s): removed %d of the intact run's %d files: neither the same nor a refusal", seed, what, len(removed), len(intact))
		}
		after := nightlyPins(t, dir, c.ID)
		for p := range pins {
			if !after[p] && !strings.HasPrefix(p, registry.RegistryPath+":") {
				t.Fatalf("seed %d (%s): the pin %s of the live checkpoint was reclaimed", seed, what, p)
			}
		}
		if len(removed) == 0 {
			refused++
		} else {
			acted++
		}
	}
	t.Logf("%d seeds: %d acted as on the intact registry, %d refused", *registryDamageSeeds, acted, refused)
}

// TestLaggingHeadRecordSurvivesRegistryCleanup: a commit whose head record
// write was lost leaves the record behind the head; the next cleanup must
// neither refuse (the chain from the record leads to the head) nor remove
// a version that chain needs, so the store never reads as damaged.
func TestLaggingHeadRecordSurvivesRegistryCleanup(t *testing.T) {
	dir, _ := setup(t)
	s := open(t, dir, false)
	if _, err := Run(bg, s, Policy{KeepLast: 1}, RunOptions{ConfirmWriteOutage: true}); err != nil {
		t.Fatal(err)
	}
	reg := registry.Open(s, registry.Options{})
	lagV, lag, err := reg.Head(bg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := checkpoint.Create(bg, s, "b", ""); err != nil {
		t.Fatal(err)
	}
	// The record as if b's commit had lost its record write.
	if err := reg.WriteHeadRecord(bg, lagV, lag); err != nil {
		t.Fatal(err)
	}
	if _, err := Run(bg, s, Policy{KeepLast: 1}, RunOptions{ConfirmWriteOutage: true}); err != nil {
		t.Fatalf("cleanup with a lagging head record: %v", err)
	}
	if rep, err := checkpoint.Reconcile(bg, s); err != nil {
		t.Fatalf("reconcile after it: %v %+v", err, rep)
	}
	if _, _, err := reg.Head(bg); err != nil {
		t.Fatalf("head after it: %v", err)
	}
	if rep, err := checkpoint.Verify(bg, s); err != nil {
		t.Fatalf("verify after it: %v %+v", err, rep)
	}
}
