//go:build linux

package registry

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/retain-dev/retain/adapters/localfs"
	"github.com/retain-dev/retain/core/storage"
)

// The two-process tests re-execute this test binary as workers: with
// RETAIN_CHECKPOINT_WORKER set, TestMain runs a worker instead of the
// tests. A worker reads commands from stdin, one per line, sent to every
// worker at once (the start barrier), and answers with lines ending in
// "done".
const (
	envWorker = "RETAIN_CHECKPOINT_WORKER"
	envRoot   = "RETAIN_CHECKPOINT_ROOT"
)

func TestMain(m *testing.M) {
	if id := os.Getenv(envWorker); id != "" {
		os.Exit(runWorker(id))
	}
	os.Exit(m.Run())
}

// runWorker commands:
//
//	distinct K      reserve K names w<id>/<i>, retrying each on conflict
//	same NAME       reserve NAME unless it is reserved, retrying on conflict
//	revive NAME G   revive NAME from tombstoned generation G (as read
//	                before the race), retrying on conflict
//
// Answers: "won <version> <name> <id>" for each commit, "taken <name>
// <error kind>" for a refusal, then "done <conflicts>".
func runWorker(wid string) int {
	d, err := localfs.Open(os.Getenv(envRoot))
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker open:", err)
		return 2
	}
	defer d.Close()
	s, err := storage.NewStore(bg, "localfs", d)
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker store:", err)
		return 2
	}
	reg := Open(s, Options{Scope: storage.ScopeHost})
	out := bufio.NewWriter(os.Stdout)
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		f := strings.Fields(in.Text())
		conflicts := 0
		// publish retries one change until it commits or is refused.
		publish := func(name string, edit func(*Snapshot, NewCheckpoint) error) error {
			id := NewID()
			for {
				v, snap, err := reg.Head(bg)
				if err != nil {
					return err
				}
				draft := snap.Next()
				c := NewCheckpoint{ID: id, Name: name, SourceBranch: MainBranch, CreatedAt: time.Now().UTC(),
					Actor: "worker-" + wid, Pins: pinsOf(snap, 7)}
				if err := edit(draft, c); err != nil {
					fmt.Fprintf(out, "taken %s %d\n", name, storage.KindOf(err))
					return nil
				}
				_, err = reg.Commit(bg, v, draft)
				if errors.Is(err, ErrConflict) {
					conflicts++
					continue
				}
				if err != nil {
					return err
				}
				fmt.Fprintf(out, "won %d %s %s\n", v+1, name, id)
				return nil
			}
		}
		reserve := func(d *Snapshot, c NewCheckpoint) error { _, err := d.Reserve(c); return err }
		var err error
		switch f[0] {
		case "distinct":
			n, _ := strconv.Atoi(f[1])
			for i := 0; i < n && err == nil; i++ {
				err = publish(fmt.Sprintf("w%s/%d", wid, i), reserve)
			}
		case "same":
			err = publish(f[1], reserve)
		case "revive":
			g, _ := strconv.ParseUint(f[2], 10, 64)
			err = publish(f[1], func(d *Snapshot, c NewCheckpoint) error { _, err := d.Revive(g, c); return err })
		default:
			err = fmt.Errorf("unknown command %q", f[0])
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "worker:", err)
			return 1
		}
		fmt.Fprintf(out, "done %d\n", conflicts)
		out.Flush()
	}
	return 0
}

type proc struct {
	id     string
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *bufio.Scanner
	stderr *bytes.Buffer
}

func startProcs(t *testing.T, root string, n int) []*proc {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var ps []*proc
	for i := 0; i < n; i++ {
		p := &proc{id: strconv.Itoa(i), stderr: &bytes.Buffer{}}
		p.cmd = exec.Command(exe, "-test.run=^$")
		p.cmd.Env = append(os.Environ(), envWorker+"="+p.id, envRoot+"="+root)
		p.cmd.Stderr = p.stderr
		if p.in, err = p.cmd.StdinPipe(); err != nil {
			t.Fatal(err)
		}
		o, err := p.cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		p.out = bufio.NewScanner(o)
		if err := p.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	t.Cleanup(func() {
		for _, p := range ps {
			p.in.Close()
			if p.cmd.ProcessState == nil {
				p.cmd.Process.Kill()
				p.cmd.Wait()
			}
		}
	})
	return ps
}

type win struct {
	version Version
	name    string
	id      ID
	proc    string
}

// run sends cmd to every process at once and collects their answers.
func run(t *testing.T, ps []*proc, cmd string) (wins []win, taken []string, conflicts int) {
	t.Helper()
	for _, p := range ps {
		if _, err := fmt.Fprintln(p.in, cmd); err != nil {
			t.Fatalf("worker %s: %v\n%s", p.id, err, p.stderr)
		}
	}
	for _, p := range ps {
		for {
			if !p.out.Scan() {
				t.Fatalf("worker %s ended during %q: %v\n%s", p.id, cmd, p.out.Err(), p.stderr)
			}
			f := strings.Fields(p.out.Text())
			switch f[0] {
			case "won":
				v, _ := strconv.ParseUint(f[1], 10, 64)
				wins = append(wins, win{Version(v), f[2], ID(f[3]), p.id})
				continue
			case "taken":
				if f[2] != strconv.Itoa(int(storage.ErrAlreadyExists)) && f[2] != strconv.Itoa(int(storage.ErrPreconditionFailed)) {
					t.Fatalf("worker %s: %q: refused with kind %s", p.id, cmd, f[2])
				}
				taken = append(taken, p.id)
				continue
			case "done":
				n, _ := strconv.Atoi(f[1])
				conflicts += n
			default:
				t.Fatalf("worker %s: %q", p.id, p.out.Text())
			}
			break
		}
	}
	return wins, taken, conflicts
}

// Two OS processes commit to one registry on localfs. Every commit either
// wins or gets ErrConflict and is retried; the history has no gaps; every
// version was written by exactly one reported winner and holds its change;
// racing reservations of one name and racing revivals of one tombstoned
// name each end with exactly one live reservation and one fresh id.
func TestTwoProcessesCommitting(t *testing.T) {
	const procs, distinct, sameRounds, reviveRounds = 2, 40, 25, 15
	root := t.TempDir()
	fs, err := localfs.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	s, err := storage.NewStore(bg, "localfs", fs)
	if err != nil {
		t.Fatal(err)
	}
	reg := Open(s, Options{Scope: storage.ScopeHost})

	// Version 1: two tables; then reviveRounds names, each reserved and
	// tombstoned, for the revival race.
	d := newDraft(t)
	oldIDs := map[string]ID{}
	for r := 0; r < reviveRounds; r++ {
		name := fmt.Sprintf("rev/%d", r)
		c := reserveT(t, d, name)
		if _, err := d.Tombstone(c.ID, Deletion{OperationID: "op-setup-" + strconv.Itoa(r), At: t0, Actor: "setup"}); err != nil {
			t.Fatal(err)
		}
		oldIDs[name] = c.ID
	}
	if _, err := reg.Commit(bg, 0, d); err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	ps := startProcs(t, root, procs)
	var all []win
	totalConflicts := 0

	wins, _, conflicts := run(t, ps, "distinct "+strconv.Itoa(distinct))
	if len(wins) != procs*distinct {
		t.Fatalf("distinct: %d wins, want %d", len(wins), procs*distinct)
	}
	all, totalConflicts = append(all, wins...), totalConflicts+conflicts
	distinctConflicts := conflicts

	for r := 0; r < sameRounds; r++ {
		name := fmt.Sprintf("same/%d", r)
		wins, taken, conflicts := run(t, ps, "same "+name)
		if len(wins) != 1 || len(taken) != procs-1 {
			t.Fatalf("%s: %d winners and %d refused, want 1 and %d", name, len(wins), len(taken), procs-1)
		}
		all, totalConflicts = append(all, wins...), totalConflicts+conflicts
	}
	for r := 0; r < reviveRounds; r++ {
		name := fmt.Sprintf("rev/%d", r)
		wins, taken, conflicts := run(t, ps, "revive "+name+" 1")
		if len(wins) != 1 || len(taken) != procs-1 {
			t.Fatalf("%s: %d winners and %d refused, want 1 and %d", name, len(wins), len(taken), procs-1)
		}
		if wins[0].id == oldIDs[name] {
			t.Fatalf("%s revived with its old id", name)
		}
		all, totalConflicts = append(all, wins...), totalConflicts+conflicts
	}
	for _, p := range ps {
		p.in.Close()
		if err := p.cmd.Wait(); err != nil {
			t.Fatalf("worker %s: %v\n%s", p.id, err, p.stderr)
		}
	}
	t.Logf("%d commits by %d processes in %v: %d conflicts retried (%d in the free-running phase)",
		len(all), procs, time.Since(start), totalConflicts, distinctConflicts)

	v, head, err := reg.Head(bg)
	if err != nil {
		t.Fatal(err)
	}
	if int(v) != 1+len(all) {
		t.Fatalf("head %d, want %d (version 1 plus one per win)", v, 1+len(all))
	}
	checkHistory(t, reg, v)
	// Every version 2..head was written by exactly one reported winner,
	// and holds that winner's checkpoint.
	byVersion := map[Version]win{}
	for _, w := range all {
		if other, dup := byVersion[w.version]; dup {
			t.Fatalf("version %d reported won by %+v and %+v", w.version, other, w)
		}
		byVersion[w.version] = w
		s, err := reg.Read(bg, w.version)
		if err != nil {
			t.Fatal(err)
		}
		c, err := s.ByName(w.name)
		if err != nil || c.ID != w.id || c.RegistryVersion != w.version || c.Actor != "worker-"+w.proc {
			t.Fatalf("version %d: %+v %v, want %+v", w.version, c, err, w)
		}
	}
	// The head: every name live once, at the right generation, by its
	// winner's id.
	for _, w := range all {
		c, err := head.ByName(w.name)
		if err != nil || c.ID != w.id {
			t.Fatalf("head: %s is %+v %v, want id %s", w.name, c, err, w.id)
		}
		r, _ := head.Reservation(w.name)
		wantGen := uint64(1)
		if strings.HasPrefix(w.name, "rev/") {
			wantGen = 2
			if old, err := head.ByID(oldIDs[w.name]); err != nil || old.State != Tombstoned {
				t.Fatalf("%s: the old checkpoint is %+v %v", w.name, old, err)
			}
		}
		if r.State != Live || r.Generation != wantGen {
			t.Fatalf("%s: reservation %+v", w.name, r)
		}
	}
	if n := len(head.Live()); n != len(all) {
		t.Fatalf("%d live checkpoints, want %d", n, len(all))
	}
}
