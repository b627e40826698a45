package daemon

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"path"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/retain-dev/retain/core/storage"
)

// Fleet runs the daemon's passes over many stores with bounded
// concurrency: `retain daemon STORE... --identity NAME`. K replicas may
// keep the same stores. Each store's pass runs on one replica at a time
// because every mutating part takes the store's own retention claim (a
// replica that finds it held skips the store until its next round; there
// is no lease and no coordinator). Replicas spread the work by visiting
// the stores in an order hashed from their identity and by skipping a
// store another replica finished within the interval (the store's record,
// Daemon.Shared).
type Fleet struct {
	// Config applies to every store. Its Stores and Discover add to
	// Stores below.
	Config Config
	// Stores are store URIs, kept in every round.
	Stores []string
	// Identity names this replica (Daemon.Identity); "" is the host name.
	Identity string
	// Open opens a store URI for one pass, at its location (Store.At) and
	// with the operator's request bounds; the fleet closes it after the
	// pass, so at most Config.Concurrency stores (and adapter plugins) are
	// open at once.
	Open   func(ctx context.Context, uri string) (*storage.Store, error)
	Logger hclog.Logger
	// Registry serves the metrics; nil: NewRegistry(). Every store's
	// series carry its URI as the label store.
	Registry *prometheus.Registry

	mu          sync.Mutex
	daemons     map[string]*Daemon
	last        map[string]*StoreReport
	discoverErr []string // the last round's
	rounds      atomic.Int64
}

// StoreReport is one store's part of a round.
type StoreReport struct {
	Store string      `json:"store"`
	Pass  *PassReport `json:"pass,omitempty"`
	// OpenError is why the store could not be opened for the pass.
	OpenError string `json:"open_error,omitempty"`
}

// Err is why the store's pass failed, nil when it did not. A pass that
// found the claim held by another replica did not fail: waiting for it is
// how replicas share a store.
func (r *StoreReport) Err() error {
	if r.OpenError != "" {
		return fmt.Errorf("%s: %s", r.Store, r.OpenError)
	}
	if r.Pass != nil && r.Pass.ClaimHolder != "" && r.Pass.StateError == "" {
		return nil
	}
	if err := r.Pass.Err(); err != nil {
		return fmt.Errorf("%s: %w", r.Store, err)
	}
	return nil
}

// RoundReport is what one round over the stores did.
type RoundReport struct {
	Started  time.Time      `json:"started"`
	Finished time.Time      `json:"finished"`
	Stores   []*StoreReport `json:"stores"`
	// NotStarted are stores a stop signal kept this round from reaching.
	NotStarted []string `json:"not_started,omitempty"`
	// DiscoverErrors are discovery prefixes that could not be listed.
	DiscoverErrors []string `json:"discover_errors,omitempty"`
}

// Err joins the failed stores' errors (and discovery's).
func (r *RoundReport) Err() error {
	var errs []error
	for _, s := range r.Stores {
		if err := s.Err(); err != nil {
			errs = append(errs, err)
		}
	}
	for _, e := range r.DiscoverErrors {
		errs = append(errs, errors.New(e))
	}
	return errors.Join(errs...)
}

func (f *Fleet) init() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.daemons == nil {
		f.daemons, f.last = map[string]*Daemon{}, map[string]*StoreReport{}
	}
	if f.Registry == nil {
		f.Registry = NewRegistry()
	}
	if f.Logger == nil {
		f.Logger = hclog.NewNullLogger()
	}
}

// daemon is the store's daemon, made on first use: its stamp, retry flag
// and metrics live as long as the fleet.
func (f *Fleet) daemon(uri string) *Daemon {
	f.mu.Lock()
	defer f.mu.Unlock()
	d := f.daemons[uri]
	if d == nil {
		d = &Daemon{Config: f.Config, Identity: f.Identity, Shared: true, Logger: f.Logger.With("store", uri),
			Metrics: NewStoreMetrics(prometheus.WrapRegistererWith(prometheus.Labels{"store": uri}, f.Registry))}
		f.daemons[uri] = d
	}
	return d
}

// Order is the order in which identity visits stores: by a hash of the
// identity and the store, so replicas start on different stores, each
// replica's order is stable from round to round, and a store added or
// removed does not reshuffle the rest.
func Order(identity string, stores []string) []string {
	out := append([]string(nil), stores...)
	key := func(s string) string {
		h := sha256.Sum256([]byte(identity + "\x00" + s))
		return string(h[:])
	}
	sort.SliceStable(out, func(i, j int) bool { return key(out[i]) < key(out[j]) })
	return out
}

// stores are the round's stores: Stores and the config's, then those
// discovered, each once.
func (f *Fleet) stores(ctx context.Context, rep *RoundReport) []string {
	seen := map[string]bool{}
	var out []string
	// One store spelled two ways (a path and file://, a trailing '/') is
	// one store: its passes would otherwise race each other for its claim.
	add := func(u string) {
		if loc, err := storage.ParseLocation(u); err == nil {
			u = loc.String()
		}
		if !seen[u] {
			seen[u] = true
			out = append(out, u)
		}
	}
	for _, u := range f.Stores {
		add(u)
	}
	for _, u := range f.Config.Stores {
		add(u)
	}
	for _, prefix := range f.Config.Discover {
		found, err := f.discover(ctx, prefix)
		if err != nil {
			rep.DiscoverErrors = append(rep.DiscoverErrors, fmt.Sprintf("discover %s: %v", prefix, err))
			f.Logger.Error("discovery_failed", "prefix", prefix, "error", err)
			continue
		}
		for _, u := range found {
			add(u)
		}
	}
	return out
}

func (f *Fleet) discover(ctx context.Context, prefix string) ([]string, error) {
	s, err := f.Open(ctx, prefix)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	names, err := DiscoverStores(ctx, s)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(names))
	for _, n := range names {
		u, err := ChildURI(prefix, n)
		if err != nil {
			return nil, err
		}
		out = append(out, u)
	}
	return out, nil
}

// ChildURI is the URI of the store named name under the store URI prefix.
func ChildURI(prefix, name string) (string, error) {
	loc, err := storage.ParseLocation(prefix)
	if err != nil {
		return "", err
	}
	if loc.Scheme == "file" {
		loc.Path = filepath.Join(loc.Path, name)
	} else {
		loc.Prefix = path.Join(loc.Prefix, name)
	}
	return loc.String(), nil
}

// Round runs one pass on every store, at most Config.Concurrency at once,
// in this replica's order. Once ctx ends no further store is started; the
// passes in flight finish (their context is not cancelled, as in
// Daemon.Run) and the rest are listed in NotStarted.
func (f *Fleet) Round(ctx context.Context) *RoundReport {
	f.init()
	rep := &RoundReport{Started: time.Now().UTC()}
	order := Order(f.Identity, f.stores(ctx, rep))
	reports := make([]*StoreReport, len(order))
	sem := make(chan struct{}, f.Config.concurrency())
	var wg sync.WaitGroup
	for i, uri := range order {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			rep.NotStarted = append(rep.NotStarted, order[i:]...)
			break
		}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			reports[i] = f.pass(context.WithoutCancel(ctx), uri)
		}()
	}
	wg.Wait()
	for _, r := range reports {
		if r != nil {
			rep.Stores = append(rep.Stores, r)
		}
	}
	rep.Finished = time.Now().UTC()
	f.mu.Lock()
	f.discoverErr = rep.DiscoverErrors
	f.mu.Unlock()
	f.rounds.Add(1)
	return rep
}

func (f *Fleet) pass(ctx context.Context, uri string) *StoreReport {
	d := f.daemon(uri)
	r := &StoreReport{Store: uri}
	s, err := f.Open(ctx, uri)
	if err != nil {
		r.OpenError = err.Error()
		d.Metrics.LastPassSuccess.Set(0)
		d.Metrics.LastPassTime.Set(float64(time.Now().Unix()))
		d.Metrics.PassFailures.WithLabelValues("open").Inc()
		d.Logger.Error("store_open_failed", "error", err)
	} else {
		d.Store = s
		r.Pass = d.Pass(ctx)
		s.Close()
	}
	f.mu.Lock()
	f.last[uri] = r
	f.mu.Unlock()
	return r
}

// Run runs a round at once and then one every interval until ctx ends,
// then returns the joined errors of each store's last pass, so a
// supervisor sees a failed store.
func (f *Fleet) Run(ctx context.Context) error {
	if err := f.Config.Validate(); err != nil {
		return err
	}
	f.init()
	f.Logger.Info("daemon started", "identity", f.Identity, "stores", len(f.Stores)+len(f.Config.Stores), "discover", f.Config.Discover,
		"concurrency", f.Config.concurrency(), "interval", f.Config.interval(), "enabled", f.Config.IsEnabled())
	ticker := time.NewTicker(f.Config.interval())
	defer ticker.Stop()
	for {
		rep := f.Round(ctx)
		f.Logger.Info("round_finished", "stores", len(rep.Stores), "failed", failed(rep), "not_started", len(rep.NotStarted),
			"seconds", rep.Finished.Sub(rep.Started).Seconds())
		if ctx.Err() == nil {
			select {
			case <-ctx.Done():
			case <-ticker.C:
				continue
			}
		}
		err := f.lastErr()
		if len(rep.NotStarted) > 0 {
			f.Logger.Info("stopped before these stores' passes; they run on the next start", "stores", rep.NotStarted)
		}
		if err != nil {
			f.Logger.Error("daemon stopped after failed passes", "reason", context.Cause(ctx), "error", err)
			return err
		}
		f.Logger.Info("daemon stopped", "reason", context.Cause(ctx))
		return nil
	}
}

func failed(rep *RoundReport) int {
	n := 0
	for _, s := range rep.Stores {
		if s.Err() != nil {
			n++
		}
	}
	return n
}

func (f *Fleet) lastErr() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	keys := make([]string, 0, len(f.last))
	for k := range f.last {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var errs []error
	for _, k := range keys {
		if err := f.last[k].Err(); err != nil {
			errs = append(errs, err)
		}
	}
	for _, e := range f.discoverErr {
		errs = append(errs, errors.New(e))
	}
	return errors.Join(errs...)
}

// Handler serves /metrics, /healthz and /readyz for the fleet. /readyz is
// 200 once a round has finished unless every store's last pass failed
// (bad credentials or an unreachable endpoint: a rollout should stop
// there); a few failing stores do not make the replica unready, they
// show in retain_last_pass_success{store}.
func (f *Fleet) Handler() http.Handler {
	f.init()
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(f.Registry, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if f.rounds.Load() == 0 {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintln(w, "not ready: no round over the stores has finished yet")
			return
		}
		f.mu.Lock()
		total, bad := len(f.last), 0
		var one error
		for _, r := range f.last {
			if err := r.Err(); err != nil {
				bad++
				one = err
			}
		}
		disc := f.discoverErr
		f.mu.Unlock()
		if total == 0 && len(disc) > 0 {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintf(w, "not ready: no store found; %s\n", disc[0])
			return
		}
		if total > 0 && bad == total {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintf(w, "not ready: every store's last pass failed (%d), e.g. %v\n", bad, one)
			return
		}
		fmt.Fprintf(w, "ready: %d store(s), %d failing\n", total, bad)
	})
	return mux
}
