//go:build linux

package localfs

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/storage/storagetest"
	"github.com/retain-dev/retain/internal/adapterbench"
)

// The multi-process tests re-execute this test binary as workers: with
// RETAIN_LOCALFS_WORKER set, TestMain runs a worker instead of the tests.
const (
	envWorker = "RETAIN_LOCALFS_WORKER"
	envRoot   = "RETAIN_LOCALFS_ROOT"
	envID     = "RETAIN_LOCALFS_ID"
	envIncs   = "RETAIN_LOCALFS_INCS"
)

func TestMain(m *testing.M) {
	// A plugin of this binary (localfs, or a broken localfs the suite must
	// fail), for the benchmarks and the conformance suite through the plugin
	// boundary; a conformance worker; or the echo process of
	// BenchmarkRawUnixSocketRoundTrip/processes.
	adapterbench.Dispatch(testAdapters()...)
	if mode := os.Getenv(envWorker); mode != "" {
		os.Exit(runWorker(mode))
	}
	os.Exit(m.Run())
}

func runWorker(mode string) int {
	d, err := Open(os.Getenv(envRoot))
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker open:", err)
		return 2
	}
	defer d.Close()
	id := os.Getenv(envID)
	switch mode {
	case "create":
		// One line per round on stdin (the round number, sent to every
		// worker at once: the start barrier), one answer line per round.
		in := bufio.NewScanner(os.Stdin)
		for in.Scan() {
			round := in.Text()
			_, err := d.Put(bg, "race/"+round, strings.NewReader(createBody(id, round)),
				storage.PutOptions{Mode: storage.PutCreateIfAbsent})
			if err == nil {
				fmt.Printf("%s won\n", round)
			} else {
				fmt.Printf("%s lost %d %s\n", round, storage.KindOf(err), strings.ReplaceAll(err.Error(), "\n", " "))
			}
		}
		return 0
	case "incr":
		n, _ := strconv.Atoi(os.Getenv(envIncs))
		for i := 0; i < n; i++ {
			if err := increment(d, "counter"); err != nil {
				fmt.Fprintln(os.Stderr, "worker increment:", err)
				return 1
			}
		}
		return 0
	}
	fmt.Fprintln(os.Stderr, "unknown worker mode", mode)
	return 2
}

func createBody(id, round string) string { return "worker " + id + " round " + round }

type worker struct {
	id     string
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *bufio.Scanner
	stderr *bytes.Buffer
}

func startWorkers(t *testing.T, mode, root string, n int, env ...string) []*worker {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var ws []*worker
	for i := 0; i < n; i++ {
		w := &worker{id: strconv.Itoa(i), stderr: &bytes.Buffer{}}
		w.cmd = exec.Command(exe, "-test.run=^$")
		w.cmd.Env = append(os.Environ(), envWorker+"="+mode, envRoot+"="+root, envID+"="+w.id)
		w.cmd.Env = append(w.cmd.Env, env...)
		w.cmd.Stderr = w.stderr
		if w.in, err = w.cmd.StdinPipe(); err != nil {
			t.Fatal(err)
		}
		out, err := w.cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		w.out = bufio.NewScanner(out)
		if err := w.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		ws = append(ws, w)
	}
	t.Cleanup(func() {
		for _, w := range ws {
			w.in.Close()
			if w.cmd.ProcessState == nil {
				w.cmd.Process.Kill()
				w.cmd.Wait()
			}
		}
	})
	return ws
}

func waitWorkers(t *testing.T, ws []*worker) {
	t.Helper()
	for _, w := range ws {
		w.in.Close()
		if err := w.cmd.Wait(); err != nil {
			t.Fatalf("worker %s: %v\n%s", w.id, err, w.stderr)
		}
	}
}

// create-if-absent across 4 OS processes: in every round exactly one wins,
// the others get ErrAlreadyExists, and the stored body is the winner's.
func TestCreateIfAbsentAcrossProcesses(t *testing.T) {
	const procs, rounds = 4, 200
	root := t.TempDir()
	d := openT(t, root, openOptions{})
	ws := startWorkers(t, "create", root, procs)
	winners := make([]string, rounds)
	start := time.Now()
	for r := 0; r < rounds; r++ {
		for _, w := range ws {
			if _, err := fmt.Fprintf(w.in, "%d\n", r); err != nil {
				t.Fatalf("worker %s: %v\n%s", w.id, err, w.stderr)
			}
		}
		won := []string{}
		for _, w := range ws {
			if !w.out.Scan() {
				t.Fatalf("worker %s ended: %v\n%s", w.id, w.out.Err(), w.stderr)
			}
			f := strings.Fields(w.out.Text())
			if len(f) < 2 || f[0] != strconv.Itoa(r) {
				t.Fatalf("worker %s answered %q in round %d", w.id, w.out.Text(), r)
			}
			switch {
			case f[1] == "won":
				won = append(won, w.id)
			case f[1] == "lost" && len(f) > 2 && f[2] == strconv.Itoa(int(storage.ErrAlreadyExists)):
			default:
				t.Fatalf("round %d: worker %s: %q, want won or lost with already exists", r, w.id, w.out.Text())
			}
		}
		if len(won) != 1 {
			t.Fatalf("round %d: winners %v, want exactly one", r, won)
		}
		winners[r] = won[0]
	}
	waitWorkers(t, ws)
	t.Logf("%d rounds x %d processes in %v", rounds, procs, time.Since(start))
	for r, w := range winners {
		k := fmt.Sprintf("race/%d", r)
		if s, _ := mustRead(t, d, k); s != createBody(w, strconv.Itoa(r)) {
			t.Fatalf("%s holds %q, but worker %s won", k, s, w)
		}
	}
	if keys := listAll(t, d, "race/"); len(keys) != rounds {
		t.Fatalf("list shows %d keys, want %d", len(keys), rounds)
	}
	if ents, _ := os.ReadDir(root + "/race"); len(ents) != rounds {
		t.Fatalf("race/ holds %d entries (temp files left behind?), want %d", len(ents), rounds)
	}
}

// No lost update: 4 processes x 100 increments through Get +
// replace-if-version, retrying on ErrPreconditionFailed.
func TestLostUpdateAcrossProcesses(t *testing.T) {
	const procs, incs = 4, 100
	root := t.TempDir()
	d := openT(t, root, openOptions{})
	storagetest.MustPut(t, d, "counter", "0")
	start := time.Now()
	ws := startWorkers(t, "incr", root, procs, envIncs+"="+strconv.Itoa(incs))
	waitWorkers(t, ws)
	t.Logf("%d increments in %v", procs*incs, time.Since(start))
	if s, _ := mustRead(t, d, "counter"); s != strconv.Itoa(procs*incs) {
		t.Fatalf("counter = %s, want %d", s, procs*incs)
	}
}
