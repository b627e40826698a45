package retention

import (
	"fmt"
	"time"

	"github.com/retain-dev/retain/core/checkpoint/registry"
	"github.com/retain-dev/retain/core/lance"
	"github.com/retain-dev/retain/core/lease"
	"github.com/retain-dev/retain/core/refs/refmeta"
)

// lifetimeNotes say, for a table's plan, what keeps a version only for a
// while: each reader lease and each tag or branch with an expiry, when it
// ends and what then removes it. The plan keeps them all today; these say
// which decisions the next passes will change, and by which rule.
func lifetimeNotes(tags []lance.Tag, branches []lance.Branch, now time.Time) []string {
	var out []string
	at := func(t time.Time) string { return t.UTC().Format(time.RFC3339) }
	for _, tg := range tags {
		v := lance.VersionID{Branch: tg.Branch, Version: tg.Version}
		if registry.IsLeaseTag(tg.Name) {
			l := lease.FromTag("", tg)
			switch {
			case l.Problem != "":
				out = append(out, fmt.Sprintf("reader lease %s keeps %s until released (`retain lease release`): %s, so it never expires", tg.Name, v, l.Problem))
			case now.After(l.Expires):
				out = append(out, fmt.Sprintf("reader lease %s (holder %q) expired at %s but keeps %s until it is reaped (by the daemon, or `retain lease reap STORE`, once past the reaper's margin: expiry_margin, default %s)",
					tg.Name, l.Holder, at(l.Expires), v, lease.DefaultMargin))
			default:
				out = append(out, fmt.Sprintf("reader lease %s (holder %q) keeps %s until %s, by the reaper's clock plus its margin (expiry_margin, default %s); then it is reaped and a later cleanup may remove the version",
					tg.Name, l.Holder, v, at(l.Expires), lease.DefaultMargin))
			}
			continue
		}
		exp, ok, err := refmeta.Expiry(tg.Metadata)
		switch {
		case err != nil:
			out = append(out, fmt.Sprintf("tag %s keeps %s and is never removed by expiry: %v", tg.Name, v, err))
		case ok && now.After(exp):
			out = append(out, fmt.Sprintf("tag %s expired at %s but keeps %s until the daemon removes it, on its first pass past the margin (expiry_margin)", tg.Name, at(exp), v))
		case ok:
			out = append(out, fmt.Sprintf("tag %s keeps %s until it expires at %s; then the daemon removes it (past its expiry_margin)", tg.Name, v, at(exp)))
		}
	}
	for _, b := range branches {
		exp, ok, err := refmeta.Expiry(b.Metadata)
		const how = "through the branch delete protocol (refused, and the branch kept, while a checkpoint, tag or child branch is on it)"
		switch {
		case err != nil:
			out = append(out, fmt.Sprintf("branch %s is never deleted by expiry: %v", b.Name, err))
		case ok && now.After(exp):
			out = append(out, fmt.Sprintf("branch %s expired at %s: the daemon deletes it, on its first pass past the margin (expiry_margin), %s", b.Name, at(exp), how))
		case ok:
			out = append(out, fmt.Sprintf("branch %s expires at %s; then the daemon deletes it (past its expiry_margin) %s", b.Name, at(exp), how))
		}
	}
	return out
}
