package retention

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/retain-dev/retain/lance"
	"github.com/retain-dev/retain/sdk/core"
)

// The audit log (issue 8): every removal leaves durable JSON lines in the
// store itself, append-only. Object stores cannot append, so each line is
// its own object, written create-if-absent and never rewritten:
//
//	_retain/audit/2026-11-30/<unix nanos, 20 digits>-<operation>-<seq>.json
//
// Before a table's deletions the run writes a "removing" line (what the
// plan removes); after them a "removed" line with the exact counts, or
// "remove_failed" with what was done and why. A removal never starts
// without its "removing" line (fail closed: no line, no deletion); a pass
// that removes nothing writes nothing.
const AuditPrefix = "_retain/audit/"

// Audit events.
const (
	AuditRemoving     = "removing"
	AuditRemoved      = "removed"
	AuditRemoveFailed = "remove_failed"
)

// AuditRecord is one line of the audit log.
type AuditRecord struct {
	Format      int       `json:"format"`
	Event       string    `json:"event"`
	At          time.Time `json:"at"`
	OperationID string    `json:"operation_id"`
	Actor       string    `json:"actor"`
	// Table is the table folder, or "_retain/registry" for the registry's
	// own versions.
	Table      string `json:"table"`
	Cutoff     string `json:"cutoff,omitempty"`
	RootDigest string `json:"root_digest,omitempty"`
	// Versions are the versions removed ("main v3", "exp v2"), as planned.
	Versions []string `json:"versions"`
	// Planned: what the plan removes; the counts of "removed" and
	// "remove_failed" lines are what was deleted.
	FilesPlanned    int   `json:"files_planned"`
	BytesPlanned    int64 `json:"bytes_planned"`
	VersionsRemoved int   `json:"versions_removed"`
	FilesRemoved    int   `json:"files_removed"`
	BytesRemoved    int64 `json:"bytes_removed"`
	// FilesFailed counts the deletes the store did not confirm; Failed
	// names the first auditFailedKeys of them. Only "remove_failed" lines
	// have them.
	FilesFailed int      `json:"files_failed,omitempty"`
	Failed      []string `json:"failed,omitempty"`
	Error       string   `json:"error,omitempty"`
}

// auditFailedKeys is how many failed keys an audit line names.
const auditFailedKeys = 100

// auditor writes the lines of one run.
type auditor struct {
	s      *core.Store
	op     string
	actor  string
	cutoff string
	seq    atomic.Int64
}

func (a *auditor) write(ctx context.Context, r AuditRecord) error {
	r.Format, r.OperationID, r.Actor = 1, a.op, a.actor
	if r.Cutoff == "" {
		r.Cutoff = a.cutoff
	}
	r.At = time.Now().UTC()
	if r.Versions == nil {
		r.Versions = []string{}
	}
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	key := fmt.Sprintf("%s%s/%020d-%s-%04d.json", AuditPrefix, r.At.Format("2006-01-02"), r.At.UnixNano(), a.op, a.seq.Add(1))
	if _, err := a.s.PutBytes(ctx, key, append(b, '\n'), core.PutOptions{Mode: core.PutCreateIfAbsent}); err != nil {
		return fmt.Errorf("writing the audit line %s: %w", key, err)
	}
	return nil
}

// planned describes what a plan (or what is left of it to retry) removes:
// the versions whose manifests it deletes, its files and their bytes.
func planned(lp *lance.Plan) (versions []string, files int, bytes int64) {
	deletes := make(map[string]bool, len(lp.Files))
	for _, f := range lp.Files {
		deletes[f.Key] = true
		bytes += f.Size
	}
	for _, v := range lp.Versions {
		if !v.Keep && deletes[v.Key] {
			versions = append(versions, lance.VersionID{Branch: v.Branch, Version: v.Version}.String())
		}
	}
	return versions, len(lp.Files), bytes
}

// ReadAudit returns the audit lines written at or after since (zero: all),
// oldest first. A line that does not parse is returned as an error naming
// its key: the log is evidence and is never guessed at.
func ReadAudit(ctx context.Context, s *core.Store, since time.Time) ([]AuditRecord, error) {
	objs, err := s.List(ctx, AuditPrefix, 0)
	if err != nil {
		return nil, fmt.Errorf("listing the audit log: %w", err)
	}
	day := ""
	if !since.IsZero() {
		day = since.UTC().Format("2006-01-02")
	}
	var out []AuditRecord
	for _, o := range objs {
		rest := strings.TrimPrefix(o.Key, AuditPrefix)
		if d, _, ok := strings.Cut(rest, "/"); !ok || d < day {
			continue
		}
		b, _, err := s.ReadAll(ctx, o.Key)
		if err != nil {
			return nil, err
		}
		var r AuditRecord
		if err := json.Unmarshal(b, &r); err != nil {
			return nil, core.Errorf("audit", o.Key, core.ErrUnknown, "an audit line does not parse: %v", err)
		}
		if !since.IsZero() && r.At.Before(since) {
			continue
		}
		out = append(out, r)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].At.Before(out[j].At) })
	return out, nil
}
