package checkpoint

// Helpers of the proof tests (docs/checkpoints.md, "Proof"): one store on
// localfs or on an S3 emulator (versitygw through the s3 adapter), a child
// process running one protocol operation (this test binary, re-executed),
// the takeover of a dead child's claim with proof, and the invariants.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/retain-dev/retain/adapters/s3"
	"github.com/retain-dev/retain/core/checkpoint/registry"
	"github.com/retain-dev/retain/core/failpoint"
	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/storage/claim"
	"github.com/retain-dev/retain/core/storage/storagetest"
	"github.com/retain-dev/retain/internal/emulator"
	"github.com/retain-dev/retain/internal/lancetest"
)

// proofTables are the fixtures every proof store holds, with the row count
// real Lance gives at their main head (version 3, fixtures.json).
var proofTables = map[string]int{"v2-appends.lance": 7, "branch-tag.lance": 6}

// backends the proof tests run on.
var proofBackends = []string{"localfs", "s3"}

// proofEnv is one backend of a proof test: localfs, or one versitygw
// with one bucket whose stores are prefixes.
type proofEnv struct {
	kind   string
	e      *emulator.S3
	bucket string
	n      int
}

// newProofEnv prepares a backend. For s3 it starts versitygw, points the
// AWS environment at it (inherited by the child processes), isolated from
// the machine's AWS files, and creates the bucket.
func newProofEnv(t *testing.T, kind string) *proofEnv {
	t.Helper()
	pe := &proofEnv{kind: kind}
	if kind != "s3" {
		return pe
	}
	pe.e = emulator.Versitygw(t)
	emulator.IsolateAWS(t, pe.e.Env())
	pe.bucket = "proof"
	c := awss3.New(awss3.Options{Region: pe.e.Region, BaseEndpoint: aws.String(pe.e.Endpoint), UsePathStyle: true,
		Credentials: aws.NewCredentialsCache(aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: pe.e.AccessKey, SecretAccessKey: pe.e.SecretKey}, nil
		}))})
	if _, err := c.CreateBucket(bg, &awss3.CreateBucketInput{Bucket: aws.String(pe.bucket)}); err != nil {
		t.Fatalf("create bucket on %s: %v", pe.e.Name, err)
	}
	return pe
}

// proofStore is one store of a proof test, holding the proof fixtures.
type proofStore struct {
	kind string
	s    *storage.Store
	loc  storage.Location
}

// store makes a fresh store holding copies of the fixtures: a temp
// directory, or a fresh prefix of the bucket filled through the Store API.
func (pe *proofEnv) store(t testing.TB) *proofStore {
	t.Helper()
	if pe.kind == "localfs" {
		s, loc, _ := localStore(t, "v2-appends", "branch-tag")
		return &proofStore{kind: pe.kind, s: s, loc: loc}
	}
	pe.n++
	loc := storage.Location{Scheme: "s3", Bucket: pe.bucket, Prefix: fmt.Sprintf("store-%d", pe.n)}
	ps := &proofStore{kind: pe.kind, s: openLoc(t, loc), loc: loc}
	for _, n := range []string{"v2-appends", "branch-tag"} {
		uploadFixture(t, ps.s, n, n+".lance")
	}
	return ps
}

// openLoc opens a localfs or s3 store.
func openLoc(t testing.TB, loc storage.Location) *storage.Store {
	t.Helper()
	if loc.Scheme == "file" {
		return openLocal(t, loc.Path).At(loc)
	}
	d, err := s3.Open(bg, loc)
	if err != nil {
		t.Fatal(err)
	}
	s, err := storage.NewStore(bg, "s3", d)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s.At(loc)
}

// uploadFixture copies the fixture <name>.lance to the store's folder dst.
func uploadFixture(t testing.TB, s *storage.Store, name, dst string) {
	t.Helper()
	root := filepath.Join(fixtures, name+".lance")
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		_, err = s.PutBytes(bg, dst+"/"+filepath.ToSlash(rel), b, storage.PutOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// removeFolder deletes every object under folder/.
func removeFolder(t testing.TB, s *storage.Store, folder string) {
	t.Helper()
	objs, err := s.List(bg, folder+"/", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if err := s.Delete(bg, o.Key, storage.DeleteOptions{}); err != nil && !errors.Is(err, storage.ErrNotFound) {
			t.Fatal(err)
		}
	}
}

// lanceDir is a local directory real Lance can open holding the store's
// tables: the store itself on localfs, a download of the tables for s3.
func (ps *proofStore) lanceDir(t testing.TB) string {
	t.Helper()
	if ps.kind == "localfs" {
		return ps.loc.Path
	}
	dir := t.TempDir()
	for tbl := range proofTables {
		objs, err := ps.s.List(bg, tbl+"/", 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range objs {
			b, _, err := ps.s.ReadAll(bg, o.Key)
			if err != nil {
				t.Fatal(err)
			}
			p := filepath.Join(dir, filepath.FromSlash(o.Key))
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	return dir
}

// childSpec is what a child process runs (PROOF_CHILD, JSON).
type childSpec struct {
	Loc  storage.Location `json:"loc"`
	Op   string           `json:"op"` // create, delete, reconcile
	Name string           `json:"name,omitempty"`
	// Ready and Go are a barrier: after opening the store the child
	// creates the file Ready, then waits for the file Go, so two children
	// start the operation together.
	Ready string `json:"ready,omitempty"`
	Go    string `json:"go,omitempty"`
	// RetryHeld: retry the operation (every 5 ms, at most 2,000 times) while
	// the claim is held, as a script would; the protocol itself reports
	// claim.ErrHeld.
	RetryHeld bool   `json:"retry_held,omitempty"`
	Out       string `json:"out"`
}

// childResult is what a child reports (when it did not exit at a
// failpoint).
type childResult struct {
	ID          registry.ID `json:"id,omitempty"`
	Generation  uint64      `json:"generation,omitempty"`
	Err         string      `json:"err,omitempty"`
	Held        bool        `json:"held,omitempty"`       // the final error is claim.ErrHeld
	NameTaken   bool        `json:"name_taken,omitempty"` // the final error is registry.ErrNameTaken
	HeldRetries int         `json:"held_retries,omitempty"`
	Attempts    int         `json:"attempts,omitempty"`
}

// TestProofChild is the child process of the proof tests; it does nothing
// unless PROOF_CHILD is set.
func TestProofChild(t *testing.T) {
	raw := os.Getenv("PROOF_CHILD")
	if raw == "" {
		return
	}
	var sp childSpec
	if err := json.Unmarshal([]byte(raw), &sp); err != nil {
		t.Fatal(err)
	}
	s := openLoc(t, sp.Loc)
	if sp.Ready != "" {
		if err := os.WriteFile(sp.Ready, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Microsecond) {
			if _, err := os.Stat(sp.Go); err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("no go signal")
			}
		}
	}
	var res childResult
	for {
		var err error
		switch sp.Op {
		case "create":
			var c *Created
			if c, err = Create(bg, s, sp.Name, ""); err == nil {
				res.ID, res.Generation, res.Attempts = c.ID, c.Generation, c.Attempts
			}
		case "delete":
			var d *Deleted
			if d, err = Delete(bg, s, sp.Name); err == nil {
				res.ID = d.ID
			}
		case "reconcile":
			_, err = Reconcile(bg, s)
		default:
			t.Fatalf("op %q", sp.Op)
		}
		if errors.Is(err, claim.ErrHeld) && sp.RetryHeld && res.HeldRetries < 2000 {
			res.HeldRetries++
			time.Sleep(5 * time.Millisecond)
			continue
		}
		if err != nil {
			res.Err, res.Held, res.NameTaken = err.Error(), errors.Is(err, claim.ErrHeld), errors.Is(err, registry.ErrNameTaken)
		}
		break
	}
	b, _ := json.Marshal(res)
	if err := os.WriteFile(sp.Out, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// startChild starts this test binary as a child running sp, with
// RETAIN_FAILPOINT=fp if fp is not empty.
func startChild(t testing.TB, sp childSpec, fp string) (*exec.Cmd, *strings.Builder) {
	t.Helper()
	if sp.Out == "" {
		sp.Out = filepath.Join(t.TempDir(), "result.json")
	}
	b, _ := json.Marshal(sp)
	cmd := storagetest.Child("TestProofChild", []string{"PROOF_CHILD=" + string(b), failpoint.Env + "=" + fp})
	out := &strings.Builder{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, out
}

// waitChild waits for a child; with a failpoint it must exit there,
// otherwise succeed and report.
func waitChild(t testing.TB, cmd *exec.Cmd, out *strings.Builder, sp childSpec, fp string) *childResult {
	t.Helper()
	err := cmd.Wait()
	if fp != "" {
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != failpoint.ExitCode || !strings.Contains(out.String(), "failpoint "+fp) {
			t.Fatalf("child %s at %s: %v\n%s", sp.Op, fp, err, out)
		}
		return nil
	}
	if err != nil {
		t.Fatalf("child %s: %v\n%s", sp.Op, err, out)
	}
	b, err := os.ReadFile(sp.Out)
	if err != nil {
		t.Fatalf("child %s wrote no result: %v\n%s", sp.Op, err, out)
	}
	var res childResult
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	return &res
}

// crashAt runs op in a child process that exits at failpoint fp.
func crashAt(t testing.TB, ps *proofStore, op, name, fp string) {
	t.Helper()
	sp := childSpec{Loc: ps.loc, Op: op, Name: name, Out: filepath.Join(t.TempDir(), "result.json")}
	cmd, out := startChild(t, sp, fp)
	waitChild(t, cmd, out, sp, fp)
}

// takeoverDead clears the claim a crashed child left, as an operator
// would with `retain claim takeover`: the claim must name a pid that is
// gone, and the takeover's recorded proof must say so. While the claim is
// held every protocol refuses with claim.ErrHeld.
func takeoverDead(t testing.TB, ps *proofStore) (held bool) {
	t.Helper()
	p, _, err := claim.Read(bg, ps.s)
	if errors.Is(err, storage.ErrNotFound) {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	if p.PID == os.Getpid() {
		t.Fatalf("the claim is held by this process, not a dead child: %+v", p)
	}
	if _, err := Reconcile(bg, ps.s); !errors.Is(err, claim.ErrHeld) {
		t.Fatalf("reconcile with a dead child's claim held: %v", err)
	}
	h, err := claim.Takeover(bg, ps.s, claim.TakeoverRequest{Request: claim.Request{Action: "takeover", Scope: claim.ScopeFor(ps.loc)},
		Token: p.OwnerToken, Reason: "proof test: the child process exited at a failpoint"})
	if err != nil {
		t.Fatal(err)
	}
	if tk := h.Payload().Takeover; tk == nil || tk.PreviousPID != p.PID || tk.Proof != fmt.Sprintf("pid %d is not running on %s", p.PID, p.Host) {
		t.Fatalf("takeover without proof that pid %d is gone: %+v", p.PID, tk)
	}
	if err := h.Release(bg); err != nil {
		t.Fatal(err)
	}
	return true
}

// pinRoots are the roots pin tags live in.
func pinRoots() []string {
	roots := []string{registry.RegistryPath}
	for tbl := range proofTables {
		roots = append(roots, tbl)
	}
	sort.Strings(roots[1:])
	return roots
}

// allPins returns every ogcp_ tag of the store as "root:tag".
func allPins(t testing.TB, s *storage.Store) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, root := range pinRoots() {
		for n := range pinTags(t, s, root) {
			out[root+":"+n] = true
		}
	}
	return out
}

// livePins checks that every live checkpoint has every pin, present and
// pointing where its row says (no live checkpoint lost a pin), and
// returns the checkpoints by name and their pins as "root:tag".
func livePins(t testing.TB, ps *proofStore, deep bool) (map[string]Info, map[string]bool) {
	t.Helper()
	_, infos, err := List(bg, ps.s)
	if err != nil {
		t.Fatal(err)
	}
	live := map[string]Info{}
	pins := map[string]bool{}
	for _, in := range infos {
		if in.Health != "ok" || len(in.Pins) != 1+len(proofTables) {
			t.Fatalf("live checkpoint %s (%s) lost a pin: %+v", in.Name, in.ID, in.Pins)
		}
		if deep {
			sh, err := Show(bg, ps.s, string(in.ID), true)
			if err != nil || sh.Health != "ok" || sh.Deep == nil || len(sh.Deep.Missing) != 0 || len(sh.Deep.Errors) != 0 {
				t.Fatalf("show --deep %s: %+v %v", in.Name, sh, err)
			}
		}
		live[in.Name] = in
		for _, p := range in.Pins {
			pins[p.Path+":"+p.Tag] = true
		}
	}
	return live, pins
}

// invariants runs after reconcile: no conflict, no sidecar, no claim;
// every live checkpoint healthy (deep); every ogcp_ tag is a live
// checkpoint's pin (leftovers reclaimed). It returns the live checkpoints.
func invariants(t testing.TB, ps *proofStore, rep *Report) map[string]Info {
	t.Helper()
	if len(rep.Conflicts) != 0 {
		t.Fatalf("reconcile conflicts: %+v", rep.Conflicts)
	}
	noSidecars(t, ps.s)
	if _, _, err := claim.Read(bg, ps.s); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("the claim is still held after reconcile: %v", err)
	}
	live, pins := livePins(t, ps, true)
	for p := range allPins(t, ps.s) {
		if !pins[p] {
			t.Fatalf("after reconcile %s remains, no live checkpoint's", p)
		}
	}
	return live
}

// lanceCheck has real Lance list each table's tags and check out every
// table pin of the given checkpoints, comparing the row count with the
// fixture's at the pinned version. One Node process per call. Skipped by
// -short, like every real-Lance test.
func lanceCheck(t testing.TB, ps *proofStore, cps ...Info) {
	t.Helper()
	if len(cps) == 0 || testing.Short() {
		return
	}
	dir := ps.lanceDir(t)
	type want struct {
		table, tag string
		version    uint64
		rows       int
	}
	var ops []map[string]any
	var wants []want
	for _, tbl := range pinRoots()[1:] {
		ops = append(ops, map[string]any{"op": "tags", "table": strings.TrimSuffix(tbl, ".lance")})
		wants = append(wants, want{table: tbl})
	}
	for _, in := range cps {
		for _, p := range in.Pins {
			if p.Kind != "table" {
				continue
			}
			rows, ok := proofTables[p.Path]
			if !ok || p.Version != 3 {
				t.Fatalf("pin %s of %s: unexpected table or version %d", p.Tag, p.Path, p.Version)
			}
			ops = append(ops, map[string]any{"op": "count", "ref": p.Tag, "table": strings.TrimSuffix(p.Path, ".lance")})
			wants = append(wants, want{table: p.Path, tag: p.Tag, version: p.Version, rows: rows})
		}
	}
	var res struct {
		Results []map[string]any `json:"results"`
	}
	lancetest.Node(t, "refs.cjs", map[string]any{"dir": dir, "table": "v2-appends", "naming": "v2", "ops": ops}, &res)
	listed := map[string]map[string]any{}
	for i, w := range wants {
		r := res.Results[i]
		if w.tag == "" {
			listed[w.table] = r
			continue
		}
		tg, ok := listed[w.table][w.tag].(map[string]any)
		if !ok || tg["version"].(float64) != float64(w.version) {
			t.Fatalf("%s: Lance does not list %s at version %d: %v", w.table, w.tag, w.version, listed[w.table])
		}
		if r["version"].(float64) != float64(w.version) || int(r["rows"].(float64)) != w.rows {
			t.Fatalf("%s: Lance checks out %s as %v, want version %d with %d rows", w.table, w.tag, r, w.version, w.rows)
		}
	}
}

// stray returns the ogcp_ tags that are no live checkpoint's pin; each
// must parse as a v1 pin tag (reclaimable by reconcile).
func stray(t testing.TB, ps *proofStore) []string {
	t.Helper()
	_, pins := livePins(t, ps, false)
	var out []string
	for p := range allPins(t, ps.s) {
		if pins[p] {
			continue
		}
		_, tag, _ := strings.Cut(p, ":")
		if _, err := registry.ParsePinTag(tag); err != nil {
			t.Fatalf("stray %s is not a reclaimable pin tag: %v", p, err)
		}
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// reconcileOK runs reconcile in this process and checks the invariants.
func reconcileOK(t testing.TB, ps *proofStore) (map[string]Info, *Report) {
	t.Helper()
	rep, err := Reconcile(bg, ps.s)
	if err != nil {
		t.Fatalf("reconcile: %v %+v", err, rep)
	}
	return invariants(t, ps, rep), rep
}
