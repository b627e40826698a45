package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"

	"github.com/retain-dev/retain/core"
	"github.com/retain-dev/retain/core/checkpoint/protocol"
	"github.com/retain-dev/retain/core/claim"
	"github.com/retain-dev/retain/core/maintenance"
	"github.com/retain-dev/retain/core/retention"
	"github.com/retain-dev/retain/internal/duration"
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
			cfg, err := maintenance.LoadConfig(config)
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
			m := maintenance.NewMetrics()
			d := &maintenance.Daemon{Store: s, Location: loc, Config: cfg, Logger: log, Metrics: m}
			if once {
				r := d.Pass(cmd.Context())
				if a.jsonOut {
					return a.printJSON(r)
				}
				return r.Err()
			}
			if metricsAddr != "" {
				stop, err := serveMetrics(metricsAddr, m, log)
				if err != nil {
					return err
				}
				defer stop()
			}
			a.ownsSignals = true
			ctx, cancel := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer cancel()
			return d.Run(ctx)
		},
	}
	cmd.Flags().StringVar(&config, "config", "", "the daemon's config file (YAML or JSON); without it: defaults, no retention window")
	cmd.Flags().StringVar(&metricsAddr, "metrics-addr", defaultMetricsAddr, "serve Prometheus metrics on HOST:PORT at /metrics (\"\" turns them off; port 0 picks one, logged)")
	cmd.Flags().BoolVar(&once, "once", false, "run one pass and exit (status 1 if its retention failed or its record was not written)")
	return cmd
}

// serveMetrics listens on addr and serves /metrics until stop.
func serveMetrics(addr string, m *maintenance.Metrics, log hclog.Logger) (func(), error) {
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
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	log.Info("metrics_listening", "addr", ln.Addr().String())
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	}, nil
}

// statusJSON is the JSON of `retain status`.
type statusJSON struct {
	Store  string             `json:"store"`
	Daemon *maintenance.State `json:"daemon"`
	Claim  *claim.Payload     `json:"claim_holder"`
	// ClaimUnreadable is set when the claim object exists but cannot be
	// read: the store is claimed by nothing that names an owner.
	ClaimUnreadable *claim.Unreadable `json:"claim_unreadable,omitempty"`
	OpenRuns        []string          `json:"unfinished_cleanup_runs"`
	Pins            protocol.Health   `json:"pin_health"`
	// LanceCleanup: pinned tables whose own Lance cleanup (LanceDB's
	// optimize(), a lance.auto_cleanup config) trips over the pins.
	LanceCleanup []retention.LanceCleanupHazard `json:"lance_cleanup"`
	ReportedAt   time.Time                      `json:"reported_at"`
}

func (a *app) statusCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "status STORE",
		Short: "Show the retention window, the last completed retention pass, the next one due, the claim holder and pin health",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			s, _, err := a.openStoreReadOnly(ctx, args[0])
			if err != nil {
				return err
			}
			defer s.Close()
			st := statusJSON{Store: args[0], ReportedAt: time.Now().UTC(), OpenRuns: []string{}}
			if st.Daemon, err = maintenance.ReadState(ctx, s); err != nil {
				return err
			}
			p, _, err := claim.Read(ctx, s)
			var ue *claim.UnreadableError
			switch {
			case errors.Is(err, core.ErrNotFound):
			case errors.As(err, &ue):
				st.ClaimUnreadable = &ue.Unreadable
			case err != nil:
				return err
			default:
				st.Claim = p
			}
			if runs, err := retention.OpenRuns(ctx, s); err != nil {
				return err
			} else if runs != nil {
				st.OpenRuns = runs
			}
			_, infos, err := protocol.List(ctx, s)
			if err != nil {
				return err
			}
			st.Pins = protocol.Summarize(infos)
			st.LanceCleanup = retention.LanceCleanupHazards(ctx, s, infos)
			if a.jsonOut {
				return a.printJSON(st)
			}
			a.printStatus(st)
			return nil
		},
	}
}

func (a *app) printStatus(st statusJSON) {
	tw := tabwriter.NewWriter(a.stdout, 2, 4, 2, ' ', 0)
	when := func(t *time.Time) string {
		if t == nil {
			return "never"
		}
		return t.UTC().Format(time.RFC3339) + " (" + time.Since(*t).Round(time.Second).String() + " ago)"
	}
	fmt.Fprintf(tw, "store\t%s\n", st.Store)
	if d := st.Daemon; d == nil {
		fmt.Fprintf(tw, "daemon\tnever ran on this store: no retention window is enforced\n")
	} else {
		win := d.Window
		if win == "" {
			win = "none configured: retention is not enforced"
		}
		if !d.Enabled {
			win += " (maintenance DISABLED: not enforced)"
		}
		fmt.Fprintf(tw, "window\t%s\n", win)
		fmt.Fprintf(tw, "interval\t%s (retention at most every %s)\n", d.Interval, d.Every)
		fmt.Fprintf(tw, "last pass\t%s by %s\n", when(d.LastPass), d.Daemon)
		fmt.Fprintf(tw, "last retention\t%s %s\n", when(d.LastRetention), d.LastRetentionOperation)
		if d.NextRetentionDue != nil {
			fmt.Fprintf(tw, "next due\t%s\n", d.NextRetentionDue.UTC().Format(time.RFC3339))
		}
		if d.RetentionFailures > 0 {
			fmt.Fprintf(tw, "failures\t%d retention pass(es) failed since the last completed one: %s\n", d.RetentionFailures, d.LastError)
		}
	}
	if u := st.ClaimUnreadable; u != nil {
		fmt.Fprintf(tw, "claim\theld by an UNREADABLE claim object (version %s): it %s; clear it with `%s`\n", u.Version, u.Why, u.TakeoverCommand(st.Store))
	} else if st.Claim == nil {
		fmt.Fprintf(tw, "claim\tfree\n")
	} else {
		fmt.Fprintf(tw, "claim\theld by %s (%s, operation %s) on %s pid %d since %s\n", st.Claim.Actor, st.Claim.Action, st.Claim.OperationID,
			st.Claim.Host, st.Claim.PID, st.Claim.CreatedAt.Format(time.RFC3339))
	}
	for _, op := range st.OpenRuns {
		fmt.Fprintf(tw, "unfinished\tcleanup run %s: `retain cleanup run --resume` finishes it\n", op)
	}
	p := st.Pins
	fmt.Fprintf(tw, "pins\t%d live checkpoints, %d pins: %d ok, %d missing, %d other; %d degraded, %d invalid checkpoints\n",
		p.LiveCheckpoints, p.Pins, p.OK, p.Missing, p.Other, p.Degraded, p.Invalid)
	// One line per table reads well for a few tables; a store of hundreds
	// gets the optimize() warning once, for the table it hits first
	// (--json has every table), and a line only for what is particular.
	const perTable = 3
	if n := len(st.LanceCleanup); n > perTable {
		first := st.LanceCleanup[0]
		for _, h := range st.LanceCleanup {
			if h.OptimizeThrowsFrom != nil && (first.OptimizeThrowsFrom == nil || h.OptimizeThrowsFrom.Before(*first.OptimizeThrowsFrom)) {
				first = h
			}
		}
		if len(first.Warnings) > 0 {
			fmt.Fprintf(tw, "lance cleanup\t%d pinned tables; first %s: %s\n", n, first.Table, first.Warnings[0])
		}
	}
	for _, h := range st.LanceCleanup {
		for i, w := range h.Warnings {
			if i == 0 && len(st.LanceCleanup) > perTable {
				continue // the optimize() warning, said once above
			}
			fmt.Fprintf(tw, "lance cleanup\t%s: %s\n", h.Table, w)
		}
		if h.Error != "" {
			fmt.Fprintf(tw, "lance cleanup\t%s: could not read all of it (%s)\n", h.Table, h.Error)
		}
	}
	tw.Flush()
}

func (a *app) auditCmd() *cobra.Command {
	var since time.Duration
	cmd := &cobra.Command{
		Use:   "audit STORE [--since D]",
		Short: "Print the store's audit log: every removal retention made, one line each",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, _, err := a.openStoreReadOnly(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			defer s.Close()
			var from time.Time
			if since > 0 {
				from = time.Now().Add(-since)
			}
			lines, err := retention.ReadAudit(cmd.Context(), s, from)
			if err != nil {
				return err
			}
			if a.jsonOut {
				if lines == nil {
					lines = []retention.AuditRecord{}
				}
				return a.printJSON(lines)
			}
			tw := tabwriter.NewWriter(a.stdout, 2, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "AT\tEVENT\tTABLE\tVERSIONS\tFILES\tBYTES\tOPERATION\tACTOR")
			for _, l := range lines {
				files, bytes, versions := l.FilesRemoved, l.BytesRemoved, l.VersionsRemoved
				if l.Event == retention.AuditRemoving {
					files, bytes, versions = l.FilesPlanned, l.BytesPlanned, len(l.Versions)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%s\t%s\n", l.At.Format(time.RFC3339), l.Event, l.Table, versions, files, bytes, l.OperationID, l.Actor)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().Var((*duration.Value)(&since), "since", "only lines of the last D (e.g. 24h or 7d)")
	return cmd
}
