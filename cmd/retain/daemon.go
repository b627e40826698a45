package main

import (
	"context"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/spf13/cobra"

	"github.com/retain-dev/retain/daemon"
	"github.com/retain-dev/retain/sdk/core"
)

// defaultMetricsAddr is loopback: metrics are not published beyond the
// host unless the operator says so.
const defaultMetricsAddr = "127.0.0.1:9464"

func (a *app) daemonCmd() *cobra.Command {
	var config, metricsAddr string
	var once bool
	cmd := &cobra.Command{
		Use:   "daemon STORE [--config F] [--metrics-addr HOST:PORT]",
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

SIGINT/SIGTERM wait for the pass in flight, then exit: status 1 when that
last pass failed (its retention did not complete or its record was not
written), else 0. The adapter plugin ignores them and ends with the daemon.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := daemon.LoadConfig(config)
			if err != nil {
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
			if !cmd.Flags().Changed("log-level") && os.Getenv("RETAIN_LOG") == "" {
				a.logLevel = "info"
			}
			log := a.logger().Named("daemon")
			s, loc, err := a.openStore(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			defer s.Close()
			m := daemon.NewMetrics()
			// The config's bounds, each unless the flag or its variable set it.
			setBy := func(flag, env string) bool { return cmd.Flags().Changed(flag) || os.Getenv(env) != "" }
			if setBy("parallelism", "RETAIN_PARALLELISM") {
				cfg.Parallelism = 0
			}
			if setBy("max-rps", "RETAIN_MAX_RPS") {
				cfg.MaxRPS = 0
			}
			s = paced(s, cfg.Parallelism, cfg.MaxRPS)
			d := &daemon.Daemon{Store: s.At(loc), Config: cfg, Logger: log, Metrics: m}
			if once {
				r := d.Pass(cmd.Context())
				if a.jsonOut {
					return a.printJSON(r)
				}
				return r.Err()
			}
			if metricsAddr != "" {
				stop, err := serveMetrics(metricsAddr, d.Handler(), log)
				if err != nil {
					return err
				}
				defer stop()
			}
			a.ownsSignals.Store(true)
			ctx, cancel := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer cancel()
			return d.Run(ctx)
		},
	}
	cmd.Flags().StringVar(&config, "config", "", "the daemon's config file (YAML or JSON); without it: defaults, no retention window")
	cmd.Flags().StringVar(&metricsAddr, "metrics-addr", defaultMetricsAddr, "serve Prometheus metrics on HOST:PORT at /metrics, and /healthz and /readyz (\"\" turns them off; port 0 picks one, logged)")
	cmd.Flags().BoolVar(&once, "once", false, "run one pass and exit (status 1 if its retention failed or its record was not written)")
	return cmd
}

// serveMetrics listens on addr and serves the daemon's endpoints
// (/metrics, /healthz, /readyz: daemon.Handler) until stop.
func serveMetrics(addr string, h http.Handler, log hclog.Logger) (func(), error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, core.Errorf("daemon", addr, core.ErrInvalidArgument, "cannot listen for metrics on %s: %v (choose another --metrics-addr, or \"\" for none)", addr, err)
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
