package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/spf13/cobra"

	"github.com/retain-dev/retain/core/authz"
	"github.com/retain-dev/retain/core/daemon"
	"github.com/retain-dev/retain/core/storage"
)

// defaultMetricsAddr is loopback: metrics are not published beyond the
// host unless the operator says so.
const defaultMetricsAddr = "127.0.0.1:9464"

func (a *app) daemonCmd() *cobra.Command {
	var config, metricsAddr, identity string
	var once bool
	cmd := &cobra.Command{
		Use:   "daemon [STORE...] [--config F] [--identity NAME] [--metrics-addr HOST:PORT]",
		Short: "Run maintenance passes: reconcile pins every interval and enforce the retention window daily",
		Long: `Runs a maintenance pass at start and then every interval (default 1h): the
pass reconciles the store's pins (online, no deletions) and, on its tail, when
due, enforces the configured retention window with a cleanup under the
retention claim — on the first pass after start, then at most once per 24h.
A failed retention pass retries on the next tick. Every removal leaves durable
lines in the store's audit log (_retain/audit/, see 'retain audit').

The config (YAML or JSON; docs/daemon.md):

  interval: 1h
  retention:
    older_than: 336h    # online cleanup needs at least 1h
    keep_last: 10
  # enabled: false      # stops all background mutation, retention included

Many stores: name them on the command line, under stores: in the config,
and/or under discover: (every child of a prefix holding _retain/ or a Lance
table, found again each round); concurrency: bounds the stores in flight
(default 4). Replicas with distinct --identity may keep the same stores:
the store's retention claim lets one at a time work on it, and a replica
restarted under its identity finishes what it left (docs/production.md).

SIGINT/SIGTERM wait for the pass in flight, then exit: status 1 when that
last pass failed (its retention did not complete or its record was not
written), else 0. The adapter plugin ignores them and ends with the daemon.`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := daemon.LoadConfig(config)
			if err != nil {
				return err
			}
			if len(args) == 0 && len(cfg.Stores) == 0 && len(cfg.Discover) == 0 {
				return usageError{fmt.Errorf("no store to keep: name one (retain daemon STORE), or list them under stores: or discover: in --config")}
			}
			if cmd.Flags().Changed("identity") {
				cfg.Identity = identity
			}
			if err := cfg.Validate(); err != nil {
				return err
			}
			// --actor or RETAIN_ACTOR over the config's actor; without any
			// the daemon acts as retain-daemon@host.
			if v, from, ok := a.explicitActor(cmd); ok {
				if err := checkActor(from, v); err != nil {
					return err
				}
				cfg.Actor = v
			}
			// Under a policy the daemon is authorized as itself (its actor,
			// else its identity), not as the shell user that started it.
			if file := a.policyFile(cmd); file != "" {
				p, err := authz.LoadFile(file)
				if err != nil {
					return usageError{err}
				}
				actor := daemon.ActorOf(cfg, cfg.Identity)
				cmd.SetContext(authz.WithGate(cmd.Context(), authz.NewGate(p, actor, func(d authz.Decision, r authz.Request) {
					fmt.Fprintln(a.stderr, authzLine(p.File(), actor, d, r))
				})))
			}
			if !cmd.Flags().Changed("log-level") && os.Getenv("RETAIN_LOG") == "" {
				a.logLevel = "info"
			}
			log := a.logger().Named("daemon")
			// The config's bounds, each unless the flag or its variable set it.
			setBy := func(flag, env string) bool { return cmd.Flags().Changed(flag) || os.Getenv(env) != "" }
			if setBy("parallelism", "RETAIN_PARALLELISM") {
				cfg.Parallelism = 0
			}
			if setBy("max-rps", "RETAIN_MAX_RPS") {
				cfg.MaxRPS = 0
			}
			if len(args) == 1 && len(cfg.Stores) == 0 && len(cfg.Discover) == 0 && cfg.Identity == "" {
				return a.runOneStore(cmd, args[0], cfg, log, metricsAddr, once)
			}
			f := &daemon.Fleet{Config: cfg, Stores: args, Identity: cfg.Identity, Logger: log,
				Open: func(ctx context.Context, uri string) (*storage.Store, error) {
					s, loc, err := a.openStore(ctx, uri)
					if err != nil {
						return nil, err
					}
					return paced(s, cfg.Parallelism, cfg.MaxRPS).At(loc), nil
				}}
			if once {
				r := f.Round(cmd.Context())
				if a.jsonOut {
					if err := a.printJSON(r); err != nil {
						return err
					}
				}
				return r.Err()
			}
			return a.serveUntilSignal(cmd, metricsAddr, f.Handler(), log, f.Run)
		},
	}
	cmd.Flags().StringVar(&config, "config", "", "the daemon's config file (YAML or JSON); without it: defaults, no retention window")
	cmd.Flags().StringVar(&metricsAddr, "metrics-addr", defaultMetricsAddr, "serve Prometheus metrics on HOST:PORT at /metrics, and /healthz and /readyz (\"\" turns them off; port 0 picks one, logged)")
	cmd.Flags().StringVar(&identity, "identity", "", "this replica's name, recorded in its claims (a StatefulSet pod name: at most one process may run under it at a time)")
	cmd.Flags().BoolVar(&once, "once", false, "run one pass (one round over the stores) and exit (status 1 if a retention failed or a record was not written)")
	return cmd
}

// runOneStore is the daemon on one store without an identity: the store
// stays open between passes and the metrics carry no store label.
func (a *app) runOneStore(cmd *cobra.Command, uri string, cfg daemon.Config, log hclog.Logger, metricsAddr string, once bool) error {
	s, loc, err := a.openStore(cmd.Context(), uri)
	if err != nil {
		return err
	}
	defer s.Close()
	m := daemon.NewMetrics()
	s = paced(s, cfg.Parallelism, cfg.MaxRPS)
	d := &daemon.Daemon{Store: s.At(loc), Config: cfg, Logger: log, Metrics: m}
	if once {
		r := d.Pass(cmd.Context())
		if a.jsonOut {
			return a.printJSON(r)
		}
		return r.Err()
	}
	return a.serveUntilSignal(cmd, metricsAddr, d.Handler(), log, d.Run)
}

// serveUntilSignal serves h on metricsAddr (unless "") and runs run until
// SIGINT or SIGTERM, which the daemon then owns: run finishes the pass in
// flight and returns.
func (a *app) serveUntilSignal(cmd *cobra.Command, metricsAddr string, h http.Handler, log hclog.Logger, run func(context.Context) error) error {
	if metricsAddr != "" {
		stop, err := serveMetrics(metricsAddr, h, log)
		if err != nil {
			return err
		}
		defer stop()
	}
	a.ownsSignals.Store(true)
	ctx, cancel := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
	defer cancel()
	return run(ctx)
}

// serveMetrics listens on addr and serves the daemon's endpoints
// (/metrics, /healthz, /readyz: daemon.Handler) until stop.
func serveMetrics(addr string, h http.Handler, log hclog.Logger) (func(), error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, storage.Errorf("daemon", addr, storage.ErrInvalidArgument, "cannot listen for metrics on %s: %v (choose another --metrics-addr, or \"\" for none)", addr, err)
	}
	if host, _, _ := net.SplitHostPort(addr); host != "" {
		if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
			log.Warn("metrics are served beyond loopback", "addr", ln.Addr().String())
		}
	} else {
		log.Warn("metrics are served on every interface", "addr", ln.Addr().String())
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	log.Info("metrics_listening", "addr", ln.Addr().String())
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	}, nil
}
