package checkpoint

import (
	"context"
	"errors"
	"fmt"

	"github.com/retain-dev/retain/core/checkpoint/registry"
	"github.com/retain-dev/retain/core/storage"
)

// VerifyReport is what `retain registry verify` found: whether the
// registry still accounts for every pin in the store. It changes nothing.
type VerifyReport struct {
	// Head is the registry's head version; HeadError says why it does
	// not read, if it does not.
	Head      registry.Version `json:"head"`
	HeadError string           `json:"head_error,omitempty"`
	// Versions is how many stored versions were read; Unreadable the ones
	// that do not read.
	Versions   int                `json:"versions"`
	Unreadable []registry.Version `json:"unreadable"`
	// ChainBreaks are versions that do not name their predecessor's
	// bytes: history below the head was rewritten. Nothing is refused for
	// it (the head is held to its commit record and every version a live
	// checkpoint was published in to its registry pin), but verify fails:
	// it is damage, kept as evidence.
	ChainBreaks []registry.ChainBreak `json:"chain_breaks"`
	// Problems are the conflicts reconcile would report, without acting;
	// AuthorityLost is true when one of them refuses every deletion.
	Problems      []Conflict `json:"problems"`
	AuthorityLost bool       `json:"authority_lost"`
	// Next is the one command that gets the store out, if any.
	Next string `json:"next,omitempty"`
}

// OK reports whether nothing is wrong. Unreadable versions below a head
// that reads are reported but harmless: the head is the authority, and
// every version a live checkpoint was published in is checked through its
// registry pin (a problem if it does not verify). They are what `registry
// recover` leaves behind when it builds over a head that did not read.
func (r *VerifyReport) OK() bool {
	return r.HeadError == "" && len(r.Problems) == 0 && len(r.ChainBreaks) == 0
}

// Verify checks, read-only and without the claim, that the registry
// proves its history and accounts for every pin: every stored version
// reads (History: the one check whose cost grows with the depth), and
// reconcile's reading of the store finds nothing it could not explain.
// A damaged registry is ErrRegistryDamaged with the report.
func Verify(ctx context.Context, s *storage.Store) (*VerifyReport, error) {
	return Options{}.Verify(ctx, s)
}

// Verify is Verify with o's scope.
func (o Options) Verify(ctx context.Context, s *storage.Store) (*VerifyReport, error) {
	reg := registry.Open(s, registry.Options{Scope: o.scope(s)})
	out := &VerifyReport{Unreadable: []registry.Version{}, Problems: []Conflict{}}
	var breaks []registry.ChainBreak
	var err error
	out.Versions, out.Unreadable, breaks, err = reg.VerifyChain(ctx)
	if err != nil {
		return nil, err
	}
	if out.Unreadable == nil {
		out.Unreadable = []registry.Version{}
	}
	out.ChainBreaks = append([]registry.ChainBreak{}, breaks...)
	rep := &Report{Sidecars: []SidecarResult{}, Repaired: []PinEvent{}, Reclaimed: []PinEvent{}, Conflicts: []Conflict{}}
	err = reconcile(ctx, s, reg, o.scope(s), rep, true)
	if err == nil && authorityLost(rep) {
		// Verify holds no claim: a create that committed between the
		// head read and the sidecar listing looks like unknown pins.
		// Only what a fresh read still finds is reported.
		rep = &Report{Sidecars: []SidecarResult{}, Repaired: []PinEvent{}, Reclaimed: []PinEvent{}, Conflicts: []Conflict{}}
		err = reconcile(ctx, s, reg, o.scope(s), rep, true)
	}
	out.Head = rep.RegistryVersion
	switch {
	case errors.Is(err, registry.ErrCorruptRegistry):
		out.HeadError = err.Error()
	case err != nil:
		return nil, err
	}
	out.Problems = rep.Conflicts
	out.AuthorityLost = authorityLost(rep)
	if out.OK() {
		return out, nil
	}
	switch {
	case out.HeadError != "" || out.AuthorityLost:
		out.Next = "retain registry recover STORE"
	case len(out.Problems) > 0:
		out.Next = "retain reconcile STORE"
	default:
		return out, errorf("verify", "", ErrRegistryDamaged, "%s", out.summary())
	}
	return out, errorf("verify", "", ErrRegistryDamaged, "%s; run `%s`", out.summary(), out.Next)
}

func (r *VerifyReport) summary() string {
	switch {
	case r.HeadError != "":
		return "the head does not read: " + r.HeadError
	case len(r.Problems) == 0 && len(r.ChainBreaks) > 0:
		return fmt.Sprintf("%d registry version(s) below the head do not name their predecessor's bytes (first %d): history was rewritten; the head and the pinned versions verify, so nothing is refused", len(r.ChainBreaks), r.ChainBreaks[0].Version)
	case r.AuthorityLost:
		return fmt.Sprintf("%d problem(s): pins the registry cannot account for", len(r.Problems))
	}
	return fmt.Sprintf("%d problem(s) reconcile can settle or report", len(r.Problems))
}
