package branch

import (
	"encoding/json"
	"errors"
	"maps"
	"os/exec"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/retain-dev/retain/core/lance"
	"github.com/retain-dev/retain/core/refs/lifecycle"
	"github.com/retain-dev/retain/core/refs/refmeta"
	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/storage/claim"
	"github.com/retain-dev/retain/core/storage/memstore"
	"github.com/retain-dev/retain/internal/lancetest"
)

// lanceView is branchmeta.cjs's view of one branch: what Lance lists and
// whether it opens.
type lanceView struct {
	Exposed map[string]any `json:"exposed"`
	Version uint64         `json:"version"`
	Rows    int            `json:"rows"`
	Error   string         `json:"error"`
}

func lanceBranchMeta(t testing.TB, dir, table string) map[string]lanceView {
	t.Helper()
	var out struct {
		Branches map[string]lanceView `json:"branches"`
	}
	lancetest.Node(t, "branchmeta.cjs", map[string]any{"dir": dir, "table": table}, &out)
	return out.Branches
}

// me is this process as a lifecycle owner (the identity a claim records).
func me(t testing.TB) lifecycle.Owner {
	t.Helper()
	s, err := storage.NewStore(bg, "memory", memstore.New())
	if err != nil {
		t.Fatal(err)
	}
	h, err := claim.Acquire(bg, s, claim.Request{Action: "test"})
	if err != nil {
		t.Fatal(err)
	}
	p := h.Payload()
	return lifecycle.Owner{Host: p.Host, PID: p.PID, BootID: p.BootID, ProcessStart: p.ProcessStart}
}

// deadOwner is an owner on this host whose process has exited.
func deadOwner(t testing.TB) lifecycle.Owner {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	o := me(t)
	o.PID, o.ProcessStart = cmd.Process.Pid, "1"
	return o
}

// setLifecycle rewrites branch name's file with a lifecycle, as a crashed
// operation would have left it.
func setLifecycle(t testing.TB, ds *lance.Dataset, name string, state lifecycle.State, op string, owner *lifecycle.Owner, user map[string]string) {
	t.Helper()
	b, err := ds.ReadBranch(bg, name)
	if err != nil {
		t.Fatal(err)
	}
	src := lifecycle.Source{Branch: b.ParentBranch, Version: b.ParentVersion}
	if _, err := ds.ReplaceBranchMetadata(bg, name, b.Info.Version, lifecycle.Meta(user, state, op, owner, src, time.Now())); err != nil {
		t.Fatal(err)
	}
}

func lifecycleOf(t testing.TB, ds *lance.Dataset, name string) (lifecycle.Record, map[string]string) {
	t.Helper()
	b, err := ds.ReadBranch(bg, name)
	if err != nil {
		t.Fatal(err)
	}
	l, err := lifecycle.Parse(b.Metadata)
	if err != nil {
		t.Fatal(err)
	}
	return l, refmeta.User(b.Metadata)
}

// Create adopts a branch real Lance made: creating → ready with the source
// and metadata recorded; Lance still lists and opens it. A retry with the
// same source is "already ready"; another source, or other metadata, is a
// conflict; a branch Lance did not create is not found; nothing is
// written by a refusal and the claim is always released.
func TestBranchCreateAdoptsLanceBranch(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real Lance (Node)")
	}
	dir := t.TempDir()
	branchedTable(t, dir, "t", "exp")
	lanceOps(t, dir, "t", op{"op": "branchCreate", "name": "exp/kid", "from": "exp", "version": 3})
	s, _ := localStore(t, dir)
	before := lanceBranchMeta(t, dir, "t")

	res, err := Create(bg, s, "exp", CreateOptions{Table: "t", From: "main@2", Meta: map[string]string{"session": "s1", "agent": "a1"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != OutcomeAdopted || res.Source != "main@2" || res.ParentBranch != "main" || res.ParentVersion != 2 || res.Head != 3 ||
		res.Table != "t.lance" || res.TookOver != nil || res.Lifecycle.State != lifecycle.Ready || res.Lifecycle.Op != res.OperationID ||
		!maps.Equal(res.Metadata, map[string]string{"session": "s1", "agent": "a1"}) {
		t.Fatalf("created: %+v", res)
	}
	noClaim(t, s)
	ds, _ := lance.Open(s, "t.lance")
	if l, user := lifecycleOf(t, ds, "exp"); l.State != lifecycle.Ready || l.Owner != nil || l.Source != "main@2" || user["session"] != "s1" {
		t.Fatalf("file: %+v %v", l, user)
	}
	if after := lanceBranchMeta(t, dir, "t"); !reflect.DeepEqual(after, before) || after["exp"].Rows != 6 || after["exp"].Error != "" {
		t.Fatalf("Lance after adoption:\n%+v\nbefore\n%+v", after, before)
	}
	// Without @version the recorded fork point is accepted.
	res, err = Create(bg, s, "exp/kid", CreateOptions{Table: "t.lance", From: "exp"})
	if err != nil || res.Outcome != OutcomeAdopted || res.Source != "exp@3" {
		t.Fatalf("kid: %+v %v", res, err)
	}

	files0 := files(t, dir, "t")
	for _, from := range []string{"main@2", "main"} {
		res, err = Create(bg, s, "exp", CreateOptions{Table: "t", From: from, Meta: map[string]string{"session": "s1"}})
		if err != nil || res.Outcome != OutcomeAlreadyReady || res.Head != 3 || res.Metadata["agent"] != "a1" {
			t.Fatalf("retry from %s: %+v %v", from, res, err)
		}
	}
	for _, c := range []CreateOptions{
		{Table: "t", From: "main@1"},
		{Table: "t", From: "exp/kid"},
		{Table: "t", From: "main@2", Meta: map[string]string{"session": "s2"}},
	} {
		_, err = Create(bg, s, "exp", c)
		var ce *ConflictError
		if !errors.As(err, &ce) || !errors.Is(err, ErrBranchConflict) || !errors.Is(err, storage.ErrAlreadyExists) || ce.Have != "main@2" {
			t.Fatalf("conflict %+v: %v", c, err)
		}
	}
	_, err = Create(bg, s, "nope", CreateOptions{Table: "t", From: "main"})
	if !errors.Is(err, lance.ErrBranchNotFound) || !strings.Contains(err.Error(), "create it with Lance first") {
		t.Fatalf("missing: %v", err)
	}
	for _, c := range []struct {
		name string
		o    CreateOptions
	}{
		{"main", CreateOptions{Table: "t", From: "main"}},
		{"exp", CreateOptions{Table: "t"}},
		{"exp", CreateOptions{Table: "t", From: "main@x"}},
		{"exp", CreateOptions{Table: "t", From: "main", Meta: map[string]string{"retain.state": "ready"}}},
	} {
		if _, err := Create(bg, s, c.name, c.o); !errors.Is(err, storage.ErrInvalidArgument) {
			t.Fatalf("%s %+v: %v", c.name, c.o, err)
		}
	}
	if _, err := Create(bg, s, "exp", CreateOptions{Table: "u", From: "main"}); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("missing table: %v", err)
	}
	if !reflect.DeepEqual(files(t, dir, "t"), files0) {
		t.Fatal("a retry or refusal changed the table")
	}
	noClaim(t, s)
}

// A transition a dead process left is taken over, with the proof
// recorded; one whose owner is alive (this process) is refused by create
// and delete alike, changing nothing; an owner on another host needs the
// operator's attestation.
func TestBranchLifecycleTakeoverNeedsProof(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real Lance (Node)")
	}
	dir := t.TempDir()
	branchedTable(t, dir, "t", "a", "b", "c")
	s, _ := localStore(t, dir)
	ds, _ := lance.Open(s, "t.lance")
	dead, alive := deadOwner(t), me(t)
	far := lifecycle.Owner{Host: "elsewhere", PID: 7, BootID: "x", ProcessStart: "1"}

	// A crashed create: resumed, the dead owner's metadata kept, ours added.
	setLifecycle(t, ds, "a", lifecycle.Creating, "branch-create-old", &dead, map[string]string{"session": "s0"})
	res, err := Create(bg, s, "a", CreateOptions{Table: "t", From: "main@2", Meta: map[string]string{"agent": "a1"}})
	if err != nil || res.Outcome != OutcomeResumed || res.TookOver == nil || res.TookOver.PreviousOperation != "branch-create-old" ||
		!strings.Contains(res.TookOver.Proof, "not running") || res.TookOver.PreviousOwner != dead ||
		!maps.Equal(res.Metadata, map[string]string{"session": "s0", "agent": "a1"}) {
		t.Fatalf("resume: %+v %v", res, err)
	}

	// A live owner: refused, nothing changed.
	setLifecycle(t, ds, "b", lifecycle.Creating, "branch-create-live", &alive, nil)
	before := files(t, dir, "t")
	_, err = Create(bg, s, "b", CreateOptions{Table: "t", From: "main"})
	var oa *OwnerAliveError
	if !errors.As(err, &oa) || !errors.Is(err, ErrLifecycleOwned) || !errors.Is(err, claim.ErrNoProof) || oa.Operation != "branch-create-live" ||
		!strings.Contains(err.Error(), "still running") {
		t.Fatalf("live owner, create: %v", err)
	}
	_, err = Delete(bg, s, "b", Options{})
	if !errors.Is(err, ErrRefused) || !errors.Is(err, ErrLifecycleOwned) {
		t.Fatalf("live owner, delete: %v", err)
	}
	if !reflect.DeepEqual(files(t, dir, "t"), before) {
		t.Fatal("a refusal changed the table")
	}
	noClaim(t, s)

	// Another host: only an attestation counts.
	setLifecycle(t, ds, "c", lifecycle.Deleting, "branch-delete-far", &far, nil)
	if _, err = Delete(bg, s, "c", Options{}); !errors.Is(err, ErrLifecycleOwned) || !strings.Contains(err.Error(), "owner-dead-attested") {
		t.Fatalf("other host without attestation: %v", err)
	}
	if _, err = Create(bg, s, "c", CreateOptions{Table: "t", From: "main", OwnerDeadAttested: "host retired"}); !errors.Is(err, ErrBranchBeingDeleted) {
		t.Fatalf("create of a deleting branch: %v", err)
	}
	del, err := Delete(bg, s, "c", Options{OwnerDeadAttested: "host elsewhere was retired"})
	if err != nil || len(del.Tables) != 1 || del.Tables[0].StateBefore != lifecycle.Deleting || del.Tables[0].TookOver == nil ||
		!strings.Contains(del.Tables[0].TookOver.Proof, "host elsewhere was retired") {
		t.Fatalf("attested delete: %+v %v", del, err)
	}
	if got := lanceBranches(t, dir, "t"); !reflect.DeepEqual(got, []string{"a", "b"}) {
		t.Fatalf("Lance lists %v", got)
	}
	noClaim(t, s)
}

// A delete that stopped after marking the branch deleting (its process
// died) is resumed by the next delete. If the branch must stay by then — a
// child was forked from it meanwhile — the resumed delete is refused and
// the branch goes back to ready, listed again; nothing is deleted.
func TestBranchDeleteResumeOrRollBack(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real Lance (Node)")
	}
	dir := t.TempDir()
	branchedTable(t, dir, "t", "x", "y")
	s, _ := localStore(t, dir)
	ds, _ := lance.Open(s, "t.lance")
	dead := deadOwner(t)

	setLifecycle(t, ds, "x", lifecycle.Deleting, "branch-delete-old", &dead, map[string]string{"session": "s1"})
	if l, err := List(bg, ds, ListOptions{}); err != nil || len(l.Branches) != 1 || l.Branches[0].Name != "y" || l.Hidden != 1 {
		t.Fatalf("a deleting branch is listed: %+v %v", l, err)
	}
	lanceOps(t, dir, "t", op{"op": "branchCreate", "name": "x2", "from": "x", "version": 3})
	before := files(t, dir, "t")
	_, err := Delete(bg, s, "x", Options{})
	var refused *RefusedError
	if !errors.As(err, &refused) || !errors.Is(err, lance.ErrBranchHasChildren) || !reflect.DeepEqual(refused.RolledBack, []string{"t.lance"}) ||
		!strings.Contains(err.Error(), "ready again") {
		t.Fatalf("resumed delete with a child: %v", err)
	}
	if l, user := lifecycleOf(t, ds, "x"); l.State != lifecycle.Ready || l.Owner != nil || l.Source != "main@2" || user["session"] != "s1" {
		t.Fatalf("rolled back: %+v %v", l, user)
	}
	after := files(t, dir, "t")
	for k := range before {
		if _, ok := after[k]; !ok {
			t.Fatalf("%s deleted by a refused delete", k)
		}
	}
	noClaim(t, s)

	// No child: the resumed delete finishes, taking the dead owner's
	// transition over.
	setLifecycle(t, ds, "y", lifecycle.Deleting, "branch-delete-old", &dead, nil)
	res, err := Delete(bg, s, "y", Options{})
	if err != nil || len(res.Tables) != 1 || !res.Tables[0].RefDeleted || res.Tables[0].StateBefore != lifecycle.Deleting ||
		res.Tables[0].TookOver == nil || res.Tables[0].TookOver.PreviousOperation != "branch-delete-old" {
		out, _ := json.Marshal(res)
		t.Fatalf("resumed delete: %s %v", out, err)
	}
	if got := lanceBranches(t, dir, "t"); !reflect.DeepEqual(got, []string{"x", "x2"}) {
		t.Fatalf("Lance lists %v", got)
	}
	noClaim(t, s)
}
