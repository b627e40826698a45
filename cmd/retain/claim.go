package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/retain-dev/retain/adapters/bundled"
	"github.com/retain-dev/retain/core"
	"github.com/retain-dev/retain/core/claim"
	"github.com/retain-dev/retain/pluginproto"
)

// openStore opens the store at uri writable (through its bundled adapter,
// out of process, or the --adapter binary) and returns its parsed location
// too. A store that is a Lance table, or lies inside one, is refused first
// (openStoreChecked).
func (a *app) openStore(ctx context.Context, uri string) (*core.Store, core.Location, error) {
	return a.openStoreChecked(ctx, uri, false)
}

// openStoreReadOnly opens the store for a command that only looks: the
// adapter writes nothing, not even at open, and every write is refused.
func (a *app) openStoreReadOnly(ctx context.Context, uri string) (*core.Store, core.Location, error) {
	return a.openStoreChecked(ctx, uri, true)
}

// open is where every command opens its store (table commands directly, on
// the table's own URI; store commands through openStoreChecked): through
// the bundled adapter for the URI's scheme, or, with --adapter PATH
// (RETAIN_ADAPTER), through that vendor plugin binary whatever the scheme.
func (a *app) open(ctx context.Context, uri string, readOnly bool) (*core.Store, core.Location, error) {
	loc, err := core.ParseLocation(uri)
	if err != nil {
		return nil, loc, err
	}
	if a.adapterPath == "" {
		if a.adapterSHA256 != "" {
			return nil, loc, usageError{errors.New("--adapter-sha256 (env RETAIN_ADAPTER_SHA256) is the digest of an --adapter binary, and no --adapter (env RETAIN_ADAPTER) was given")}
		}
		open := bundled.Open
		if readOnly {
			open = bundled.OpenReadOnly
		}
		s, err := open(ctx, uri, a.logger())
		return s, loc, err
	}
	s, err := a.openVendor(ctx, uri, loc, readOnly)
	return s, loc, err
}

// openVendor launches the --adapter binary as a plugin on loc, the way
// `conformance run --adapter PATH --sha256 D` does (pluginproto.Launch),
// and wraps it as a portable Store. Read-only opens pass Location.ReadOnly
// to the plugin, as bundled.OpenReadOnly does.
func (a *app) openVendor(ctx context.Context, uri string, loc core.Location, readOnly bool) (*core.Store, error) {
	path, logger := a.adapterPath, a.logger()
	name := filepath.Base(path)
	if a.adapterSHA256 == "" {
		logger.Warn("running the adapter binary without a digest check: pass --adapter-sha256 (env RETAIN_ADAPTER_SHA256) with the digest its vendor published",
			"adapter", path)
	}
	loc.ReadOnly = readOnly
	c, err := pluginproto.Launch(ctx, pluginproto.LaunchConfig{
		Adapter: name, Path: path, SHA256: a.adapterSHA256, Location: loc, Logger: logger,
	})
	if err != nil {
		return nil, vendorOpenError(uri, path, err)
	}
	s, err := core.NewStore(ctx, name, c)
	if err != nil {
		c.Close()
		return nil, vendorOpenError(uri, path, fmt.Errorf("adapter %s: %w", name, err))
	}
	return s, nil
}

// vendorOpenError explains an --adapter binary that could not open the
// store. A binary that cannot serve at all (missing, wrong digest, not a
// retain storage plugin, another protocol version, crashed) is a setup
// error, exit 2, with the next step; the adapter's own refusal to open the
// store (not found, permission denied, …) passes through as from a bundled
// adapter.
func vendorOpenError(uri, path string, err error) error {
	var ce *core.Error
	launch := errors.As(err, &ce) && ce.Op == "launch"
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) ||
		(!launch && !errors.Is(err, core.ErrUnavailable)) {
		return err
	}
	next := "check that --adapter (env RETAIN_ADAPTER) names the vendor's plugin binary; run with --log-level debug to see the plugin's own output"
	switch {
	case errors.Is(err, core.ErrPermissionDenied):
		next = fmt.Sprintf("give --adapter-sha256 (env RETAIN_ADAPTER_SHA256) the digest the vendor published for this release, and compare it with `sha256sum %s`", path)
	case errors.Is(err, core.ErrInvalidArgument):
		next = "check the path given to --adapter (env RETAIN_ADAPTER) and that --adapter-sha256 is 64 hex digits"
	case errors.Is(err, core.ErrUnsupported):
		next = "install a build of the adapter for this retain's plugin protocol version (`retain version`)"
	case errors.Is(err, core.ErrUnavailable) && !launch:
		next = "the plugin started but exited while opening the store: run with --log-level debug to see its output, and report it to the adapter's vendor"
	case errors.Is(err, core.ErrUnavailable):
		next = "a retain adapter binary is a program whose main calls pluginproto.Serve (docs/adapters.md); run with --log-level debug to see its output"
	}
	return &adapterSetupError{cause: err, msg: fmt.Sprintf(
		"cannot open %s through adapter binary %s: %v\nnext: %s", uri, path, err, next)}
}

// adapterSetupError is a usage or setup error (exit 2) that still matches
// its cause: errors.Is(err, core.ErrUnavailable) holds through it.
type adapterSetupError struct {
	msg   string
	cause error
}

func (e *adapterSetupError) Error() string   { return e.msg }
func (e *adapterSetupError) Unwrap() []error { return []error{usageError{e.cause}, e.cause} }

// claimStatus is the JSON of `retain claim status`.
type claimStatus struct {
	Store   string         `json:"store"`
	Held    bool           `json:"held"`
	Holder  *claim.Payload `json:"holder,omitempty"`
	Version string         `json:"version,omitempty"`
	Age     string         `json:"age,omitempty"`
	// Unreadable is set, with Held, when the claim object exists but
	// cannot be read: nothing names its owner.
	Unreadable *unreadableClaim `json:"unreadable,omitempty"`
	// Dead is the proof that the holder, on this host, no longer runs;
	// Next the commands that continue, in order.
	Dead string   `json:"dead,omitempty"`
	Next []string `json:"next,omitempty"`
}

type unreadableClaim struct {
	claim.Unreadable
	// Next is the one command that clears it.
	Next string `json:"next"`
}

func (a *app) claimCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "claim", Short: "The retention claim: at most one retention operation owns a store"}
	status := &cobra.Command{
		Use:   "status STORE",
		Short: "Show who holds the store's retention claim, or that it is free",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, _, err := a.openStoreReadOnly(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			defer s.Close()
			st := claimStatus{Store: args[0]}
			p, info, err := claim.Read(cmd.Context(), s)
			var ue *claim.UnreadableError
			switch {
			case errors.Is(err, core.ErrNotFound):
			case errors.As(err, &ue):
				// Reported, not failed on: status is how the operator
				// learns the version the way out needs.
				st.Held, st.Version = true, ue.Version
				st.Unreadable = &unreadableClaim{Unreadable: ue.Unreadable, Next: ue.TakeoverCommand(args[0])}
			case err != nil:
				return err
			default:
				st.Held, st.Holder, st.Version = true, p, info.Version
				st.Age = time.Since(p.CreatedAt).Round(time.Second).String()
				if d := claim.DeadHere("", p); d != "" {
					st.Dead, st.Next = d, claim.NextCommands(args[0], p)
				}
			}
			if a.jsonOut {
				return a.printJSON(st)
			}
			if !st.Held {
				fmt.Fprintf(a.stdout, "%s: free (no %s)\n", args[0], claim.Key)
				return nil
			}
			if u := st.Unreadable; u != nil {
				fmt.Fprintf(a.stdout, "%s: held by an UNREADABLE claim object\n  object     %s, version %s, %d bytes, sha256 %s\n  problem    it %s; nothing in it names an owner\n  way out    once you have made sure no retention operation is running on this store:\n             %s\n",
					args[0], claim.Key, u.Version, u.Size, u.SHA256, u.Why, u.Next)
				return nil
			}
			fmt.Fprintf(a.stdout, "%s: held\n  operation  %s (%s)\n  actor      %s\n  since      %s (%s ago)\n  host       %s pid %d\n  token      %s\n",
				args[0], p.OperationID, p.Action, p.Actor, p.CreatedAt.Format(time.RFC3339), st.Age, p.Host, p.PID, p.OwnerToken)
			if p.Takeover != nil {
				fmt.Fprintf(a.stdout, "  took over  %s: %s (%s)\n", p.Takeover.PreviousOperationID, p.Takeover.Reason, p.Takeover.Proof)
			}
			if st.Dead != "" {
				fmt.Fprintf(a.stdout, "  NOT RUNNING the holder is gone (%s)\n", st.Dead)
				for _, n := range st.Next {
					fmt.Fprintf(a.stdout, "  next       %s\n", n)
				}
			}
			return nil
		},
	}
	var token, reason, attested, unreadable string
	takeover := &cobra.Command{
		Use:   "takeover STORE (--token T | --unreadable VERSION) --reason R [--owner-dead-attested WHY]",
		Short: "Replace a stale claim whose owner provably cannot resume, or clear an unreadable one",
		Long: `Takes over the retention claim of a dead owner. It needs the claim's exact
owner token (see 'retain claim status') and proof that the owner cannot
resume. On the owner's own host the tool proves it (the host rebooted, or the
pid is gone or belongs to another process); for an owner on another host you
attest it with --owner-dead-attested and a reason, which is recorded in the
new claim and the log. A claim is never taken over for its age.

A claim object that cannot be read at all (torn, empty, not a claim, another
format) names no owner and no token: 'retain claim status' reports it with
its version token, and --unreadable VERSION clears exactly that object. Then
nothing can prove the owner dead, so --owner-dead-attested is required: your
statement that no retention operation is running on this store. The cleared
object's version, size and SHA-256 and your attestation are recorded in the
new claim, the log and the output.

The takeover is conditional: it deletes exactly the stale claim object (by
version) and then creates its own; the new claim is released at once, so the
store is free for the next operation.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			switch {
			case (token == "") == (unreadable == ""):
				return usageError{errors.New("give --token T (the claim's owner token) or, for a claim object that cannot be read, --unreadable VERSION (its version token); `retain claim status STORE` shows which, and the value")}
			case reason == "":
				return usageError{errors.New("--reason is required")}
			case unreadable != "" && attested == "":
				return usageError{errors.New("--unreadable needs --owner-dead-attested WHY: your statement that no retention operation is running on this store (nothing in an unreadable claim names an owner retain could check)")}
			}
			actor, err := a.actor(cmd)
			if err != nil {
				return err
			}
			s, loc, err := a.openStore(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			defer s.Close()
			req := claim.Request{Action: "takeover", Actor: actor, Scope: claim.ScopeFor(loc), Logger: a.logger()}
			var h *claim.Handle
			if unreadable != "" {
				h, err = claim.TakeoverUnreadable(cmd.Context(), s, claim.UnreadableTakeoverRequest{
					Request: req, Version: unreadable, Reason: reason, Attested: attested,
				})
			} else {
				h, err = claim.Takeover(cmd.Context(), s, claim.TakeoverRequest{
					Request: req, Token: token, Reason: reason, OwnerDeadAttested: attested,
				})
			}
			if err != nil {
				return err
			}
			rec := h.Payload().Takeover
			if err := h.Release(cmd.Context()); err != nil {
				return fmt.Errorf("took over, but releasing the new claim failed: %w", err)
			}
			if a.jsonOut {
				return a.printJSON(map[string]any{"store": args[0], "taken_over": rec, "released": true})
			}
			if u := rec.Unreadable; u != nil {
				fmt.Fprintf(a.stdout, "cleared the unreadable claim object (version %s, %d bytes, sha256 %s): %s\nproof: %s\nthe store is free\n",
					u.Version, u.Size, u.SHA256, rec.Reason, rec.Proof)
				return nil
			}
			fmt.Fprintf(a.stdout, "took over %s from %s pid %d: %s\nproof: %s\nthe store is free\n",
				rec.PreviousOperationID, rec.PreviousHost, rec.PreviousPID, rec.Reason, rec.Proof)
			return nil
		},
	}
	takeover.Flags().StringVar(&token, "token", "", "the stale claim's exact owner token")
	takeover.Flags().StringVar(&reason, "reason", "", "why, recorded in the claim and the log")
	takeover.Flags().StringVar(&attested, "owner-dead-attested", "", "your statement that the owner on another host cannot resume (with --unreadable: that no retention operation is running on this store)")
	takeover.Flags().StringVar(&unreadable, "unreadable", "", "clear the claim object that cannot be read, of exactly this version token (as `retain claim status` prints it), instead of --token")
	cmd.AddCommand(status, takeover)
	return cmd
}
