package tag

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/retain-dev/retain/adapters/localfs"
	"github.com/retain-dev/retain/adapters/s3"
	"github.com/retain-dev/retain/core/lance"
	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/storage/storagetest"
	"github.com/retain-dev/retain/internal/emulator"
)

// Concurrency of tag writes between real OS processes: this test binary
// re-executed as workers (TestTagCASWorker), each opening the store itself
// — localfs on a directory (replace- and delete-if-version gated by host
// flocks), and the s3 adapter on gofakes3 (replace-if-version native, no
// conditional delete: deletes go mark-then-delete).

const tagWorkerEnv = "RETAIN_TAG_WORKER"

// tagWorkerSpec is what one worker process does.
type tagWorkerSpec struct {
	Mode     string `json:"mode"` // "counter", "updater", "deleter"
	ID       int    `json:"id"`
	Store    string `json:"store"` // store URI
	Attempts int    `json:"attempts"`
	// DeleteAt: the deleter deletes once the counter reaches it.
	DeleteAt int    `json:"delete_at"`
	Start    string `json:"start"` // file whose appearance starts the work
	Out      string `json:"out"`   // result file
}

// tagWorkerResult is what a worker did.
type tagWorkerResult struct {
	// Wins are the counter values this worker's successful CAS wrote.
	Wins      []int `json:"wins"`
	Conflicts int   `json:"conflicts"`
	// Gone counts attempts that found the tag deleted (reads, and stale
	// updates refused as not found).
	Gone int `json:"gone"`
	// Deleted is the counter of the state the deleter deleted (-1: none).
	Deleted int    `json:"deleted"`
	Error   string `json:"error,omitempty"`
}

func tagOpenURI(t testing.TB, uri string) (*Tags, func()) {
	t.Helper()
	loc, err := storage.ParseLocation(uri)
	if err != nil {
		t.Fatal(err)
	}
	var d storage.Driver
	scope := storage.ScopeGlobal
	switch loc.Scheme {
	case "file":
		d, err = localfs.Open(loc.Path)
		scope = storage.ScopeHost
	case "s3":
		d, err = s3.Open(context.Background(), loc)
	default:
		t.Fatalf("scheme %q", loc.Scheme)
	}
	if err != nil {
		t.Fatal(err)
	}
	s, err := storage.NewStore(context.Background(), loc.Scheme, d)
	if err != nil {
		t.Fatal(err)
	}
	ds, err := lance.Open(s, "t.lance")
	if err != nil {
		t.Fatal(err)
	}
	return New(ds, Options{Scope: scope}), func() { s.Close() }
}

// TestTagCASWorker is a worker process; it does nothing in a normal run.
func TestTagCASWorker(t *testing.T) {
	raw := os.Getenv(tagWorkerEnv)
	if raw == "" {
		t.Skip("worker of TestTagCASProcesses")
	}
	var spec tagWorkerSpec
	if err := json.Unmarshal([]byte(raw), &spec); err != nil {
		t.Fatal(err)
	}
	res := tagWorkerResult{Deleted: -1}
	defer func() {
		b, _ := json.Marshal(res)
		if err := os.WriteFile(spec.Out, b, 0o644); err != nil {
			t.Error(err)
		}
	}()
	tags, done := tagOpenURI(t, spec.Store)
	defer done()
	// Widen the window between each write's read and its conditional
	// write, so racing writers land in it: only the CAS keeps them apart.
	tagHookAfterRead = func(op string) {
		max := 300
		if op == "delete-tag" {
			max = 3000
		}
		time.Sleep(time.Duration(rand.IntN(max)) * time.Microsecond)
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(time.Millisecond) {
		if _, err := os.Stat(spec.Start); err == nil {
			break
		}
		if time.Now().After(deadline) {
			res.Error = "no start signal"
			return
		}
	}
	ctx := context.Background()
	fail := func(format string, args ...any) {
		res.Error = fmt.Sprintf(format, args...)
	}
	switch spec.Mode {
	case "counter", "updater":
		var last Ref
		for i := 0; i < spec.Attempts; i++ {
			cur, err := tags.Show(ctx, "ctr")
			if errors.Is(err, ErrTagNotFound) {
				res.Gone++
				if last.Token == "" {
					continue
				}
				// Updates from a state read before the delete: never a
				// create, whether through the read or straight to the
				// conditional write of the Lance layer.
				set := map[string]string{"counter": tagItoa(tagAtoi(last.Metadata["counter"]) + 1)}
				_, err = tags.UpdateMeta(ctx, "ctr", MetaUpdate{IfToken: last.Token, Set: set})
				if !errors.Is(err, ErrTagNotFound) || !errors.Is(err, storage.ErrNotFound) {
					fail("update after the delete: %v, want not found", err)
					return
				}
				_, err = tags.Dataset().UpdateTagFile(ctx, last.Lance(), set, lance.UpdateTagOptions{})
				if !errors.Is(err, ErrTagNotFound) || !errors.Is(err, storage.ErrNotFound) {
					fail("UpdateTagFile after the delete: %v, want not found", err)
					return
				}
				res.Gone++
				continue
			}
			if err != nil {
				fail("show: %v", err)
				return
			}
			last = cur
			if spec.Mode == "updater" {
				time.Sleep(200 * time.Microsecond) // pace: leave the deleter room
			}
			n := tagAtoi(cur.Metadata["counter"]) + 1
			_, err = tags.UpdateMeta(ctx, "ctr", MetaUpdate{IfToken: cur.Token,
				Set: map[string]string{"counter": tagItoa(n), "writer": tagItoa(spec.ID)}})
			switch {
			case err == nil:
				res.Wins = append(res.Wins, n)
			case errors.Is(err, ErrTagChanged) && errors.Is(err, storage.ErrPreconditionFailed):
				res.Conflicts++
			case errors.Is(err, ErrTagNotFound) && errors.Is(err, storage.ErrNotFound):
				res.Gone++
			default:
				fail("update: %v", err)
				return
			}
		}
	case "deleter":
		// Wait for the updaters to reach DeleteAt; read the tag.
		var stale Ref
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(time.Millisecond) {
			cur, err := tags.Show(ctx, "ctr")
			if err != nil {
				fail("show: %v", err)
				return
			}
			if tagAtoi(cur.Metadata["counter"]) >= spec.DeleteAt {
				stale = cur
				break
			}
			if time.Now().After(deadline) {
				fail("the counter never reached %d", spec.DeleteAt)
				return
			}
		}
		// Wait until an updater has moved the tag on, then delete the state
		// read: the delete must lose (a delete of a state not seen would
		// remove that update).
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(200 * time.Microsecond) {
			cur, err := tags.Show(ctx, "ctr")
			if err != nil {
				fail("show: %v", err)
				return
			}
			if cur.Token != stale.Token {
				break
			}
			if time.Now().After(deadline) {
				fail("the updaters stopped before the delete")
				return
			}
		}
		if _, err := tags.Delete(ctx, "ctr", stale.Token); !errors.Is(err, ErrTagChanged) || !errors.Is(err, storage.ErrPreconditionFailed) {
			fail("delete of a state updated since: %v, want a conflict", err)
			return
		}
		res.Conflicts++
		// Then delete whatever the delete reads, racing the updaters in
		// the window the hook opens, until it wins.
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); {
			del, err := tags.Delete(ctx, "ctr", "")
			switch {
			case err == nil:
				res.Deleted = tagAtoi(del.Tag.Metadata["counter"])
				return
			case errors.Is(err, ErrTagChanged):
				res.Conflicts++
			default:
				fail("delete: %v", err)
				return
			}
		}
		fail("the deleter never won")
	}
}

// tagRunWorkers runs one worker process per spec and returns their results.
func tagRunWorkers(t *testing.T, env []string, specs []tagWorkerSpec) []tagWorkerResult {
	t.Helper()
	dir := t.TempDir()
	start := filepath.Join(dir, "start")
	type proc struct {
		cmd *exec.Cmd
		out *strings.Builder
	}
	var procs []proc
	for i := range specs {
		specs[i].Start, specs[i].Out = start, filepath.Join(dir, fmt.Sprintf("out-%d.json", i))
		b, _ := json.Marshal(specs[i])
		cmd := storagetest.Child("TestTagCASWorker", append(append([]string{}, env...), tagWorkerEnv+"="+string(b)), "-test.timeout=60s")
		var out strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		procs = append(procs, proc{cmd, &out})
	}
	if err := os.WriteFile(start, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	results := make([]tagWorkerResult, len(specs))
	for i, p := range procs {
		if err := p.cmd.Wait(); err != nil {
			t.Errorf("worker %d: %v\n%s", i, err, p.out)
			continue
		}
		b, err := os.ReadFile(specs[i].Out)
		if err != nil {
			t.Fatalf("worker %d wrote no result: %v\n%s", i, err, p.out)
		}
		if err := json.Unmarshal(b, &results[i]); err != nil {
			t.Fatal(err)
		}
		if results[i].Error != "" {
			t.Errorf("worker %d (%s): %s", i, specs[i].Mode, results[i].Error)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	return results
}

// tagSeedCounter makes the dataset t.lance (one manifest) and the tag
// "ctr" with counter=0 on the store at uri.
func tagSeedCounter(t *testing.T, uri string) *Tags {
	t.Helper()
	tags, done := tagOpenURI(t, uri)
	t.Cleanup(done)
	ds := tags.Dataset()
	if _, err := ds.Store.PutBytes(tagCtx, ds.Key("_versions/"+lance.ManifestName(1, lance.NamingV2)), make([]byte, 321), storage.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := tags.Create(tagCtx, "ctr", CreateOptions{Metadata: map[string]string{"counter": "0"}}); err != nil {
		t.Fatal(err)
	}
	return tags
}

// tagBackends are the stores the process tests run on: each returns a
// store URI and the environment workers need to reach it.
func tagBackends() []struct {
	name  string
	setup func(t *testing.T) (string, []string)
} {
	return []struct {
		name  string
		setup func(t *testing.T) (string, []string)
	}{
		{"localfs", func(t *testing.T) (string, []string) { return t.TempDir(), nil }},
		{"s3-gofakes3", func(t *testing.T) (string, []string) {
			e := emulator.GoFakeS3(t)
			list := emulator.IsolateAWS(t, e.Env())
			return "s3://retain-tags/" + strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-")), list
		}},
	}
}

// N processes increment one tag's counter with CAS: exactly one process
// wins each value (each round), and the final counter is the number of
// wins — no update is lost.
func TestTagCASProcesses(t *testing.T) {
	const procs, attempts = 4, 30
	for _, b := range tagBackends() {
		t.Run(b.name, func(t *testing.T) {
			uri, env := b.setup(t)
			tags := tagSeedCounter(t, uri)
			specs := make([]tagWorkerSpec, procs)
			for i := range specs {
				specs[i] = tagWorkerSpec{Mode: "counter", ID: i, Store: uri, Attempts: attempts}
			}
			results := tagRunWorkers(t, env, specs)
			var all []int
			conflicts := 0
			owner := map[int]int{}
			for i, r := range results {
				all = append(all, r.Wins...)
				conflicts += r.Conflicts
				for _, v := range r.Wins {
					if prev, dup := owner[v]; dup {
						t.Errorf("counter value %d won by workers %d and %d", v, prev, i)
					}
					owner[v] = i
				}
			}
			sort.Ints(all)
			for i, v := range all {
				if v != i+1 {
					t.Fatalf("winning values %v: want exactly 1..%d, each once", all, len(all))
				}
			}
			final, err := tags.Show(tagCtx, "ctr")
			if err != nil {
				t.Fatal(err)
			}
			if got := final.Metadata["counter"]; got != tagItoa(len(all)) || final.Metadata["writer"] != tagItoa(owner[len(all)]) {
				t.Fatalf("final %v after %d wins: a lost update", final.Metadata, len(all))
			}
			if len(all) == 0 || len(all)+conflicts != procs*attempts {
				t.Fatalf("%d wins + %d conflicts of %d attempts", len(all), conflicts, procs*attempts)
			}
			t.Logf("%s: %d wins, %d conflicts (%s)", b.name, len(all), conflicts, final.Key)
		})
	}
}

// A delete racing three updaters: every update that won happened before
// the delete (the deleted state carries all of them), no update after the
// delete succeeds — each is not found — and the tag stays gone.
func TestTagDeleteRacesUpdateProcesses(t *testing.T) {
	const attempts, deleteAt = 80, 25
	for _, b := range tagBackends() {
		t.Run(b.name, func(t *testing.T) {
			uri, env := b.setup(t)
			tags := tagSeedCounter(t, uri)
			specs := []tagWorkerSpec{
				{Mode: "updater", ID: 0, Store: uri, Attempts: attempts},
				{Mode: "updater", ID: 1, Store: uri, Attempts: attempts},
				{Mode: "updater", ID: 2, Store: uri, Attempts: attempts},
				{Mode: "deleter", ID: 3, Store: uri, DeleteAt: deleteAt},
			}
			results := tagRunWorkers(t, env, specs)
			wins, gone := 0, 0
			for _, r := range results[:3] {
				wins += len(r.Wins)
				gone += r.Gone
			}
			deleted := results[3].Deleted
			if deleted < deleteAt || wins != deleted {
				t.Fatalf("the delete removed counter %d, the updaters won %d times: an update was lost or landed after the delete", deleted, wins)
			}
			if _, err := tags.Show(tagCtx, "ctr"); !errors.Is(err, ErrTagNotFound) {
				t.Fatalf("after the delete: %v, want not found (revived?)", err)
			}
			t.Logf("%s: %d updates before the delete, %d attempts found it gone, deleter conflicts %d", b.name, wins, gone, results[3].Conflicts)
		})
	}
}
