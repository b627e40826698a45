package conformance

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/retain-dev/retain/core/storage"
)

// Case is one behaviour the suite proves. Cases live one file per behaviour.
type Case struct {
	Name string
	// Op names the operation whose latency the case reports, if any.
	Op  string
	Run func(t T, e *Env)
}

// Env is what a case works with.
type Env struct {
	Ctx    context.Context
	Config *Config
	// Store is a fresh sub-store for this case only.
	Store *storage.Store
	// Prefix is Store's prefix in the real store, for workers.
	Prefix  string
	Loc     storage.Location
	Latency *Latency
	s       *suite
}

// Shared reports whether other processes can see this store; a mem:// store
// lives in one process, so cross-process cases skip on it.
func (e *Env) Shared() bool { return e.Loc.Scheme != "mem" }

// Pool returns the worker processes of the run, starting them on first use.
// It skips the case when the store cannot be shared between processes.
func (e *Env) Pool(t T) *pool {
	t.Helper()
	if !e.Shared() {
		t.Skipf("store %s lives inside one process: cross-process cases need a shared store", e.Loc)
	}
	if e.s.pool == nil {
		p, err := startPool(e.Config, e.Loc.String(), e.Config.Processes)
		if err != nil {
			t.Fatalf("starting %d worker processes: %v", e.Config.Processes, err)
		}
		e.s.pool = p
	}
	return e.s.pool
}

// history keeps the operations a case observed, for the linearizability case.
type history struct {
	name    string
	model   string // "create" or "cas"
	ops     []histOp
	initial histOp // cas: the counter's initial state
}

type suite struct {
	cfg       *Config
	loc       storage.Location
	root      storage.Driver
	caps      storage.Capabilities
	runPrefix string
	pool      *pool
	histories []history
	artifacts []string
}

// Cases returns the suite's cases in the order they run.
func Cases() []Case {
	var cs []Case
	for _, c := range contractCases {
		c := c
		cs = append(cs, Case{Name: "contract/" + c.name, Run: func(t T, e *Env) { c.run(t, e.Store) }})
	}
	return append(cs,
		Case{Name: "create-if-absent-race", Op: "create", Run: caseCreateRace},
		Case{Name: "compare-and-swap", Op: "replace", Run: caseCompareAndSwap},
		Case{Name: "conditional-delete", Run: caseConditionalDelete},
		Case{Name: "conditional-delete-race", Op: "delete", Run: caseConditionalDeleteRace},
		Case{Name: "list-after-write", Run: caseListAfterWrite},
		Case{Name: "claim", Op: "release", Run: caseClaim},
		Case{Name: "capability-honesty", Run: caseHonesty},
		Case{Name: "declared-limits", Run: caseDeclaredLimits},
		Case{Name: "read-only", Run: caseReadOnly},
		Case{Name: "gates", Run: caseGates},
		Case{Name: "linearizability", Run: caseLinearizability},
		Case{Name: "hygiene", Run: caseHygiene},
	)
}

func newRunPrefix() string {
	var b [4]byte
	rand.Read(b[:])
	return "conformance-" + time.Now().UTC().Format("20060102T150405") + "-" + hex.EncodeToString(b[:])
}

func setup(ctx context.Context, cfg *Config) (*suite, *regexp.Regexp, error) {
	loc, re, err := cfg.validate()
	if err != nil {
		return nil, nil, err
	}
	d, err := cfg.Open(ctx, loc)
	if err != nil {
		return nil, nil, fmt.Errorf("opening adapter %s on %s: %w", cfg.Adapter, loc, err)
	}
	caps, err := d.Capabilities(ctx)
	if err != nil {
		d.Close()
		return nil, nil, fmt.Errorf("adapter %s capabilities: %w", cfg.Adapter, err)
	}
	return &suite{cfg: cfg, loc: loc, root: d, caps: caps, runPrefix: newRunPrefix()}, re, nil
}

func (s *suite) env(ctx context.Context, c Case) (*Env, error) {
	prefix := s.runPrefix + "/" + strings.ReplaceAll(c.Name, "/", "-")
	d, err := storage.Sub(s.root, prefix)
	if err != nil {
		return nil, err
	}
	st, err := storage.NewStore(ctx, s.cfg.Adapter, d)
	if err != nil {
		return nil, err
	}
	return &Env{Ctx: ctx, Config: s.cfg, Store: st, Prefix: prefix, Loc: s.loc, Latency: &Latency{}, s: s}, nil
}

// teardown removes what the run made, stops workers and the adapter.
func (s *suite) teardown() {
	s.removeAll(context.Background())
	if s.pool != nil {
		s.pool.close()
		s.pool = nil
	}
	s.root.Close()
	if s.cfg.tempDir != "" {
		os.RemoveAll(s.cfg.tempDir)
	}
}

// removeAll deletes every object under the run prefix and reports how many
// remain afterwards.
func (s *suite) removeAll(ctx context.Context) (left []string, err error) {
	d, err := storage.Sub(s.root, s.runPrefix)
	if err != nil {
		return nil, err
	}
	st, err := storage.NewStore(ctx, s.cfg.Adapter, d)
	if err != nil {
		return nil, err
	}
	objs, err := st.List(ctx, "", 0)
	if err != nil {
		return nil, err
	}
	keys := make([]string, len(objs))
	for i, o := range objs {
		keys[i] = o.Key
	}
	res, err := st.DeleteMany(ctx, keys)
	if err != nil {
		return nil, err
	}
	var errs []error
	for _, r := range res {
		if r.Err != nil {
			errs = append(errs, r.Err)
		}
	}
	objs, err = st.List(ctx, "", 0)
	if err != nil {
		return nil, err
	}
	for _, o := range objs {
		left = append(left, o.Key)
	}
	return left, errors.Join(errs...)
}

// Run runs the suite and returns its report. The error is for a run that
// could not start (bad configuration, adapter that does not launch); case
// failures are in the report.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	exitIfNotDispatched()
	ctx, cancel := context.WithTimeout(ctx, timeoutOf(cfg))
	defer cancel()
	start := time.Now()
	s, re, err := setup(ctx, &cfg)
	if err != nil {
		return nil, err
	}
	defer s.teardown()
	bin, digest := cfg.binaryDigest()
	caps := s.caps
	backend := cfg.Backend
	if backend == "" {
		backend = s.loc.Scheme
	}
	rep := &Report{Adapter: cfg.Adapter, AdapterBinary: bin, AdapterSHA256: digest, Protocol: cfg.protocol(),
		Backend: backend, Store: s.loc.String(), RunPrefix: s.runPrefix, Processes: cfg.Processes, Rounds: cfg.Rounds,
		Capabilities: &caps, Started: start.UTC()}
	for _, c := range Cases() {
		if re != nil && !re.MatchString(c.Name) {
			continue
		}
		if why, ok := cfg.Skip[c.Name]; ok {
			rep.Cases = append(rep.Cases, CaseResult{Name: c.Name, Result: Skip, Reason: skippedBy(why), KnownBroken: true})
			continue
		}
		cstart := time.Now()
		ct := &caseT{}
		var e *Env
		ct.run(func(t T) {
			var err error
			if e, err = s.env(ctx, c); err != nil {
				t.Fatalf("setting up the case: %v", err)
			}
			c.Run(t, e)
		})
		res := CaseResult{Name: c.Name, Result: Pass, Reason: ct.reason, Duration: time.Since(cstart), Logs: ct.logs}
		switch {
		case ct.failed:
			res.Result = Fail
		case ct.skipped:
			res.Result = Skip
		}
		if e != nil {
			if p50, p99, n := e.Latency.Percentiles(); n > 0 {
				res.Op, res.P50, res.P99, res.Samples = c.Op, p50, p99, n
			}
		}
		rep.Cases = append(rep.Cases, res)
	}
	rep.Artifacts = s.artifacts
	rep.Duration = time.Since(start)
	ran := map[string]bool{}
	for _, c := range rep.Cases {
		ran[c.Name] = c.Result != Skip
	}
	rep.Unchecked = unchecked(ran)
	return rep, nil
}

func skippedBy(why string) string { return "known broken on this backend: " + why }

func timeoutOf(cfg Config) time.Duration {
	if cfg.Timeout > 0 {
		return cfg.Timeout
	}
	return 15 * time.Minute
}

// RunTests runs the suite as subtests of t, for an adapter's own `go test`.
// The test binary must call Dispatch in TestMain first, so that it can serve
// as the adapter plugin and as the worker processes.
func RunTests(t *testing.T, cfg Config) {
	ctx, cancel := context.WithTimeout(context.Background(), timeoutOf(cfg))
	defer cancel()
	s, re, err := setup(ctx, &cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.teardown()
	for _, c := range Cases() {
		if re != nil && !re.MatchString(c.Name) {
			continue
		}
		t.Run(c.Name, func(t *testing.T) {
			if why, ok := cfg.Skip[c.Name]; ok {
				t.Skip(skippedBy(why))
			}
			e, err := s.env(ctx, c)
			if err != nil {
				t.Fatal(err)
			}
			c.Run(t, e)
			if p50, p99, n := e.Latency.Percentiles(); n > 0 {
				t.Logf("%s latency over %d: p50 %s p99 %s", c.Op, n, ms(p50), ms(p99))
			}
		})
	}
}

// JSONDirEnv names a directory where Check writes each report as JSON, for
// the support matrix (see `conformance matrix`).
const JSONDirEnv = "RETAIN_CONFORMANCE_JSON_DIR"

// Check runs the suite like Run, from a test: it fails t for a setup error
// and for every failed case (with its reason), logs the table, and writes
// the JSON report into $RETAIN_CONFORMANCE_JSON_DIR as <name>.json when
// that is set. It returns the report for further assertions.
func Check(t *testing.T, cfg Config, name string) *Report {
	t.Helper()
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatalf("conformance %s: %v", name, err)
	}
	var sb strings.Builder
	rep.WriteTable(&sb)
	t.Logf("conformance %s:\n%s", name, sb.String())
	for _, c := range rep.Cases {
		if c.Result == Fail {
			t.Errorf("case %s failed: %s", c.Name, c.Reason)
		}
	}
	if dir := os.Getenv(JSONDirEnv); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := rep.WriteJSON(filepath.Join(dir, name+".json")); err != nil {
			t.Fatal(err)
		}
	}
	return rep
}
