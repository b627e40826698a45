package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/retain-dev/retain/core/authz"
	"github.com/retain-dev/retain/core/storage"
)

// policyEnv names the policy file when --policy is not given.
const policyEnv = "RETAIN_POLICY"

// policyFile is --policy, else RETAIN_POLICY; "" for none.
func (a *app) policyFile(cmd *cobra.Command) string {
	if f := cmd.Flags().Lookup("policy"); f != nil && f.Changed {
		return a.policyFlag
	}
	return os.Getenv(policyEnv)
}

// setupPolicy puts the CLI's gate in cmd's context when a policy is
// given, so every library call the command makes is authorized. The file
// is loaded at once (a bad one fails every command, naming the file); the
// actor only at the first check, so commands that only look never need
// one. Without a policy nothing changes.
func (a *app) setupPolicy(cmd *cobra.Command) error {
	file := a.policyFile(cmd)
	if file == "" {
		return nil
	}
	p, err := authz.LoadFile(file)
	if err != nil {
		return usageError{err}
	}
	cmd.SetContext(authz.WithGate(cmd.Context(), a.policyGate(cmd, p)))
	return nil
}

// policyGate is the CLI's gate for p: the command's actor (resolved at the
// first check) and every decision written to stderr as one audit line.
func (a *app) policyGate(cmd *cobra.Command, p *authz.Policy) *authz.Gate {
	return authz.NewLazyGate(p, func() (string, error) { return a.actor(cmd) }, func(d authz.Decision, r authz.Request) {
		fmt.Fprintln(a.stderr, authzLine(p.File(), a.gateActor(cmd), d, r))
	})
}

// gateActor is the actor for the audit line; the check itself reports a
// failure to resolve it.
func (a *app) gateActor(cmd *cobra.Command) string {
	v, err := a.actor(cmd)
	if err != nil {
		return "(unknown)"
	}
	return v
}

// authzLine is one decision, in the style of the CLI's other stderr
// lines: `authz: deny checkpoint delete on checkpoint "n" in store
// "file:///x" for actor "alice" by policy file F: deny by forbid "policy1"`.
func authzLine(file, actor string, d authz.Decision, r authz.Request) string {
	verdict := "deny"
	if d.Allowed {
		verdict = "allow"
	}
	cmdNote := ""
	if r.Command != "" && r.Command != string(r.Action) {
		cmdNote = " (" + r.Command + ")"
	}
	// A decision carries policy text and messages; keep it one line.
	why := strings.ReplaceAll(d.String(), "\n", " ")
	return fmt.Sprintf("authz: %s %s%s on %s for actor %s by policy file %s: %s",
		verdict, r.Action, cmdNote, r.Resource(), storage.Quote(actor), file, why)
}
