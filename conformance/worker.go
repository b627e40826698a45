package conformance

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/storage/claim"
)

// WorkerSubcommand is the hidden subcommand under which a conformance
// binary (or test binary) runs as one of the racing worker processes.
const WorkerSubcommand = "__conformance-worker"

const workerEnv = "RETAIN_CONFORMANCE_WORKER"

// Dispatch runs this process as an adapter plugin or a conformance worker
// when its arguments say so, and exits; otherwise it returns. Call it first
// in main (or TestMain) of any binary that runs the suite.
func Dispatch(adapters []storage.Adapter) {
	if len(os.Args) >= 3 && os.Args[1] == pluginSubcommand {
		if err := self.Serve(adapters, os.Args[2]); err != nil {
			fmt.Fprintln(os.Stderr, "conformance:", err)
			os.Exit(2)
		}
		os.Exit(0)
	}
	if len(os.Args) >= 2 && os.Args[1] == WorkerSubcommand {
		if err := workerMain(adapters); err != nil {
			fmt.Fprintln(os.Stderr, "conformance worker:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
}

// workerSpec is what a worker needs to open the same store as its parent.
type workerSpec struct {
	ID        int    `json:"id"`
	Adapter   string `json:"adapter"`
	SHA256    string `json:"sha256,omitempty"`
	InProcess bool   `json:"in_process,omitempty"`
	Store     string `json:"store"`
}

// request is one command to a worker. At, when set, is the wall-clock time
// (Unix ns) to start at, so all workers of a round fire together.
type request struct {
	Op      string `json:"op"`
	Prefix  string `json:"prefix"`
	Key     string `json:"key,omitempty"`
	Body    string `json:"body,omitempty"`
	Version string `json:"version,omitempty"`
	Token   string `json:"token,omitempty"`
	Host    string `json:"host,omitempty"`
	Gate    string `json:"gate,omitempty"`
	N       int    `json:"n,omitempty"`
	At      int64  `json:"at,omitempty"`
}

// histOp is one operation as a worker saw it, for the linearizability check.
type histOp struct {
	Client  int    `json:"client"`
	Kind    string `json:"kind"` // create, read, cas, put, cdelete
	Key     string `json:"key"`
	Call    int64  `json:"call"`
	Ret     int64  `json:"ret"`
	Value   string `json:"value,omitempty"`   // body written (create, cas) or read
	Expect  string `json:"expect,omitempty"`  // cas: expected version
	Version string `json:"version,omitempty"` // version written or read
	OK      bool   `json:"ok"`
	ErrKind string `json:"err_kind,omitempty"`
}

type response struct {
	Worker  int      `json:"worker"`
	OK      bool     `json:"ok"`
	ErrKind string   `json:"err_kind,omitempty"`
	Err     string   `json:"err,omitempty"`
	Version string   `json:"version,omitempty"`
	Token   string   `json:"token,omitempty"`
	Body    string   `json:"body,omitempty"`
	History []histOp `json:"history,omitempty"`
	Retries int      `json:"retries,omitempty"`
	// TransientReads: reads answered transient and read again.
	TransientReads int `json:"transient_reads,omitempty"`
}

func kindName(err error) string {
	if err == nil {
		return ""
	}
	switch {
	case errors.Is(err, claim.ErrHeld):
		return "held"
	case errors.Is(err, claim.ErrLost):
		return "lost"
	case errors.Is(err, claim.ErrNoProof):
		return "no proof"
	}
	return storage.KindOf(err).String()
}

func workerMain(adapters []storage.Adapter) error {
	var spec workerSpec
	if err := json.Unmarshal([]byte(os.Getenv(workerEnv)), &spec); err != nil {
		return fmt.Errorf("bad %s: %v", workerEnv, err)
	}
	cfg := Config{Adapter: spec.Adapter, SHA256: spec.SHA256, InProcess: spec.InProcess, Adapters: adapters}
	cfg.setDefaults()
	loc, err := storage.ParseLocation(spec.Store)
	if err != nil {
		return err
	}
	ctx := context.Background()
	root, err := cfg.Open(ctx, loc)
	if err != nil {
		return err
	}
	defer root.Close()
	w := &workerState{id: spec.ID, root: root, scope: claim.ScopeFor(loc), stores: map[string]*storage.Store{}, claims: map[string]*claim.Handle{}}
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 16<<20)
	out := json.NewEncoder(os.Stdout)
	for in.Scan() {
		var req request
		if err := json.Unmarshal(in.Bytes(), &req); err != nil {
			return err
		}
		if req.Op == "exit" {
			return nil
		}
		resp := w.do(ctx, req)
		resp.Worker = spec.ID
		if err := out.Encode(resp); err != nil {
			return err
		}
	}
	return in.Err()
}

type workerState struct {
	id     int
	scope  storage.Scope
	root   storage.Driver
	stores map[string]*storage.Store
	claims map[string]*claim.Handle
}

func (w *workerState) store(ctx context.Context, prefix string) (*storage.Store, error) {
	if s, ok := w.stores[prefix]; ok {
		return s, nil
	}
	d, err := storage.Sub(w.root, prefix)
	if err != nil {
		return nil, err
	}
	s, err := storage.NewStore(ctx, "worker", d)
	if err != nil {
		return nil, err
	}
	w.stores[prefix] = s
	return s, nil
}

func now() int64 { return time.Now().UnixNano() }

func fail(err error) response {
	return response{ErrKind: kindName(err), Err: err.Error()}
}

func (w *workerState) do(ctx context.Context, req request) response {
	s, err := w.store(ctx, req.Prefix)
	if err != nil {
		return fail(err)
	}
	if req.At > 0 {
		time.Sleep(time.Until(time.Unix(0, req.At)))
	}
	switch req.Op {
	case "create":
		op := histOp{Client: w.id, Kind: "create", Key: req.Key, Value: req.Body, Call: now()}
		info, err := s.PutBytes(ctx, req.Key, []byte(req.Body), storage.PutOptions{Mode: storage.PutCreateIfAbsent})
		op.Ret = now()
		op.OK, op.ErrKind, op.Version = err == nil, kindName(err), info.Version
		r := response{OK: err == nil, ErrKind: kindName(err), Version: info.Version, History: []histOp{op}}
		if err != nil {
			r.Err = err.Error()
		}
		return r
	case "put":
		// A write that fails is tried again, up to N times in all: its
		// outcome is unknown, so the caller leaves the round out of the
		// history (Retries says so) and checks only what survived.
		var r response
		var first error // the first failure, which Err reports
		for attempt := 0; attempt < max(1, req.N); attempt++ {
			op := histOp{Client: w.id, Kind: "put", Key: req.Key, Value: req.Body, Call: now()}
			info, err := s.PutBytes(ctx, req.Key, []byte(req.Body), storage.PutOptions{})
			op.Ret = now()
			op.OK, op.ErrKind, op.Version = err == nil, kindName(err), info.Version
			if first == nil {
				first = err
			}
			r = response{OK: err == nil, ErrKind: kindName(err), Version: info.Version, History: []histOp{op}, Retries: attempt}
			if first != nil {
				r.Err = first.Error()
			}
			if err == nil {
				break
			}
		}
		return r
	case "list":
		objs, err := s.List(ctx, req.Key, 0)
		if err != nil {
			return fail(err)
		}
		entries := make([]string, len(objs))
		for i, o := range objs {
			entries[i] = o.Key + "@" + o.Version
		}
		return response{OK: true, Body: strings.Join(entries, ",")}
	case "cdelete":
		// N deletes one after another, all expecting Version: each is
		// recorded; the caller judges them from the history.
		r := response{OK: true}
		for range max(1, req.N) {
			op := histOp{Client: w.id, Kind: "cdelete", Key: req.Key, Expect: req.Version, Call: now()}
			err := s.Delete(ctx, req.Key, storage.DeleteOptions{IfVersion: req.Version})
			op.Ret = now()
			op.OK, op.ErrKind = err == nil, kindName(err)
			r.History = append(r.History, op)
			if err != nil && r.Err == "" {
				r.Err = err.Error()
			}
		}
		return r
	case "incr":
		return w.incr(ctx, s, req)
	case "gate-incr":
		return w.gateIncr(ctx, s, req)
	case "claim-acquire":
		h, err := claim.Acquire(ctx, s, claim.Request{Action: "conformance", Actor: fmt.Sprintf("worker-%d", w.id), Host: req.Host, Scope: w.scope})
		if err != nil {
			return fail(err)
		}
		w.claims[h.Token()] = h
		return response{OK: true, Token: h.Token(), Version: h.Version()}
	case "claim-verify", "claim-release":
		h, ok := w.claims[req.Token]
		if !ok {
			return response{ErrKind: "invalid argument", Err: "no claim handle with token " + req.Token}
		}
		if req.Op == "claim-verify" {
			err = h.Verify(ctx)
		} else {
			err = h.Release(ctx)
			delete(w.claims, req.Token)
		}
		if err != nil {
			return fail(err)
		}
		return response{OK: true}
	case "pid":
		return response{OK: true, Body: strconv.Itoa(os.Getpid())}
	}
	return response{ErrKind: "invalid argument", Err: "unknown op " + req.Op}
}

// incr adds 1 to the decimal counter at Key N times through read +
// replace-if-version, retrying on precondition failed, recording history.
func (w *workerState) incr(ctx context.Context, s *storage.Store, req request) response {
	var hist []histOp
	retries, transientReads := 0, 0
	for done := 0; done < req.N; {
		rd := histOp{Client: w.id, Kind: "read", Key: req.Key, Call: now()}
		b, info, err := s.ReadAll(ctx, req.Key)
		rd.Ret = now()
		if errors.Is(err, storage.ErrTransient) && transientReads < 20 {
			// A read changes nothing, so reading again is safe; the
			// count is reported (an adapter that refuses a torn read
			// answers transient).
			transientReads++
			continue
		}
		if err != nil {
			return response{ErrKind: kindName(err), Err: err.Error(), History: hist}
		}
		rd.OK, rd.Value, rd.Version = true, string(b), info.Version
		hist = append(hist, rd)
		n, err := strconv.Atoi(string(b))
		if err != nil {
			return response{ErrKind: "unknown", Err: fmt.Sprintf("counter body %q: %v", b, err), History: hist}
		}
		next := strconv.Itoa(n + 1)
		cas := histOp{Client: w.id, Kind: "cas", Key: req.Key, Expect: info.Version, Value: next, Call: now()}
		ni, err := s.PutBytes(ctx, req.Key, []byte(next), storage.PutOptions{Mode: storage.PutReplaceIfVersion, IfVersion: info.Version})
		cas.Ret = now()
		cas.OK, cas.ErrKind, cas.Version = err == nil, kindName(err), ni.Version
		hist = append(hist, cas)
		switch {
		case err == nil:
			done++
		case errors.Is(err, storage.ErrPreconditionFailed):
			retries++
		default:
			return response{ErrKind: kindName(err), Err: err.Error(), History: hist}
		}
	}
	return response{OK: true, History: hist, Retries: retries, TransientReads: transientReads}
}

// gateIncr adds 1 to the counter at Key N times with plain reads and
// overwrites inside the named gate: exact only if the gate excludes.
func (w *workerState) gateIncr(ctx context.Context, s *storage.Store, req request) response {
	for range req.N {
		err := s.WithGates(ctx, storage.ScopeProcess, []string{req.Gate}, func(ctx context.Context) error {
			b, _, err := s.ReadAll(ctx, req.Key)
			if err != nil {
				return err
			}
			n, err := strconv.Atoi(string(b))
			if err != nil {
				return err
			}
			time.Sleep(200 * time.Microsecond) // widen the window a broken gate leaves open
			_, err = s.PutBytes(ctx, req.Key, []byte(strconv.Itoa(n+1)), storage.PutOptions{})
			return err
		})
		if err != nil {
			return fail(err)
		}
	}
	return response{OK: true}
}

// pool is the set of worker processes of one run.
type pool struct {
	workers []*workerProc
}

type workerProc struct {
	id   int
	cmd  *exec.Cmd
	in   io.WriteCloser
	enc  *json.Encoder
	dec  *json.Decoder
	mu   sync.Mutex
	errb *tailBuffer
}

// tailBuffer keeps the last bytes a worker wrote to stderr, for messages.
type tailBuffer struct {
	mu sync.Mutex
	b  []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	t.b = append(t.b, p...)
	if len(t.b) > 4096 {
		t.b = t.b[len(t.b)-4096:]
	}
	t.mu.Unlock()
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}

func startPool(cfg *Config, store string, n int) (*pool, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	p := &pool{}
	for i := range n {
		spec, _ := json.Marshal(workerSpec{ID: i, Adapter: cfg.Adapter, SHA256: cfg.SHA256, InProcess: cfg.InProcess, Store: store})
		cmd := exec.Command(exe, WorkerSubcommand)
		cmd.Env = append(os.Environ(), workerEnv+"="+string(spec))
		dieWithParent(cmd)
		wp := &workerProc{id: i, cmd: cmd, errb: &tailBuffer{}}
		cmd.Stderr = wp.errb
		if wp.in, err = cmd.StdinPipe(); err != nil {
			p.close()
			return nil, err
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			p.close()
			return nil, err
		}
		if err := cmd.Start(); err != nil {
			p.close()
			return nil, fmt.Errorf("starting worker %d: %w", i, err)
		}
		wp.enc, wp.dec = json.NewEncoder(wp.in), json.NewDecoder(out)
		p.workers = append(p.workers, wp)
	}
	// Each worker opens its store (and starts its plugin) before its first
	// answer: a pid round trip proves all are ready.
	if _, err := p.all(context.Background(), request{Op: "pid", Prefix: "ready"}); err != nil {
		p.close()
		return nil, err
	}
	return p, nil
}

// call sends req to worker i and waits for its answer.
func (p *pool) call(i int, req request) (response, error) {
	w := p.workers[i]
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.enc.Encode(req); err != nil {
		return response{}, fmt.Errorf("worker %d: %v (stderr: %s)", i, err, w.errb)
	}
	var r response
	if err := w.dec.Decode(&r); err != nil {
		return response{}, fmt.Errorf("worker %d died: %v (stderr: %s)", i, err, w.errb)
	}
	return r, nil
}

// each sends reqs[i] to worker i concurrently and returns the answers in order.
func (p *pool) each(ctx context.Context, reqs []request) ([]response, error) {
	out := make([]response, len(reqs))
	errs := make([]error, len(reqs))
	var wg sync.WaitGroup
	for i, r := range reqs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i], errs[i] = p.call(i, r)
		}()
	}
	wg.Wait()
	return out, errors.Join(errs...)
}

// all sends the same request to every worker.
func (p *pool) all(ctx context.Context, req request) ([]response, error) {
	reqs := make([]request, len(p.workers))
	for i := range reqs {
		reqs[i] = req
	}
	return p.each(ctx, reqs)
}

// pids returns the worker process ids.
func (p *pool) pids() []int {
	var out []int
	for _, w := range p.workers {
		if w.cmd.Process != nil {
			out = append(out, w.cmd.Process.Pid)
		}
	}
	return out
}

func (p *pool) close() {
	for _, w := range p.workers {
		if w.in != nil {
			w.enc.Encode(request{Op: "exit"})
			w.in.Close()
		}
	}
	for _, w := range p.workers {
		if w.cmd.Process == nil {
			continue
		}
		done := make(chan struct{})
		go func() { w.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			w.cmd.Process.Kill()
			<-done
		}
	}
}
