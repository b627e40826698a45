package retention

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/retain-dev/retain/core/authz"
	"github.com/retain-dev/retain/core/lance"
	"github.com/retain-dev/retain/core/storage"
)

// The audit log (issue 8): every removal leaves durable JSON lines in the
// store itself, append-only. Object stores cannot append, so lines are
// written as objects of their own, create-if-absent and never rewritten:
//
//	_retain/audit/2026-11-30/<unix nanos, 20 digits>-<operation>-<seq>.json
//
// An object holds one line or, when the tables of a run write theirs at
// the same moment, several (one JSON record per line, each with its own
// time): a run of 1,000 tables writes a few dozen objects, not 2,000.
// (Builds before 2026-12-02 wrote one line per object and read only that.)
//
// Before a table's deletions the run writes a "removing" line (what the
// plan removes); after them a "removed" line with the exact counts, or
// "remove_failed" with what was done and why. A removal never starts
// without its "removing" line being durable (fail closed: no line, no
// deletion); a pass that removes nothing writes nothing.
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
	Table  string `json:"table"`
	Cutoff string `json:"cutoff,omitempty"`
	// Policy is the keep policy of a checkpoint prune ("keep 24 hourly").
	Policy     string `json:"policy,omitempty"`
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
	// Authz is the policy decision that let the operation run, e.g.
	// `allow by policy "policy0" (/etc/retain/policy.cedar)`; absent
	// without a policy, so older records read the same.
	Authz string `json:"authz,omitempty"`
}

// auditFailedKeys is how many failed keys an audit line names.
const auditFailedKeys = 100

// auditor writes the lines of one run. Lines written at the same time
// share an object: a write joins the next object not yet on the wire
// (starting it at once while fewer than auditWrites are), and returns
// once that object is written, so a line is durable before its caller
// goes on, as with an object of its own.
type auditor struct {
	s      *storage.Store
	op     string
	actor  string
	cutoff string
	seq    atomic.Int64

	mu      sync.Mutex
	writing int         // objects on the wire
	next    *auditBatch // the object lines join; nil: none waiting
}

// auditWrites is how many audit objects one run writes at once.
const auditWrites = 2

// auditBatch is one audit object: the lines that joined it, and the
// outcome its writers wait for.
type auditBatch struct {
	lines [][]byte
	done  chan struct{}
	err   error
}

func (a *auditor) write(ctx context.Context, r AuditRecord) error {
	r.Format, r.OperationID, r.Actor = 1, a.op, a.actor
	r.Authz = authz.Note(ctx)
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
	a.mu.Lock()
	bt := a.next
	if bt == nil {
		bt = &auditBatch{done: make(chan struct{})}
		a.next = bt
	}
	bt.lines = append(bt.lines, append(b, '\n'))
	if a.writing < auditWrites {
		a.flush(context.WithoutCancel(ctx))
	}
	a.mu.Unlock()
	select {
	case <-bt.done:
		return bt.err
	case <-ctx.Done():
		// The object may still be written: the line is then in the log
		// although its caller went on without it, which an audit log may
		// show (it never shows a deletion without its "removing" line).
		return fmt.Errorf("writing an audit line: %w", context.Cause(ctx))
	}
}

// flush writes a.next as one object; a.mu is held. The write is not any
// one caller's, so it runs to its end whoever stops waiting.
func (a *auditor) flush(ctx context.Context) {
	bt := a.next
	a.next = nil
	a.writing++
	go func() {
		at := time.Now().UTC()
		key := fmt.Sprintf("%s%s/%020d-%s-%04d.json", AuditPrefix, at.Format("2006-01-02"), at.UnixNano(), a.op, a.seq.Add(1))
		var body []byte
		for _, l := range bt.lines {
			body = append(body, l...)
		}
		if _, err := a.s.PutBytes(ctx, key, body, storage.PutOptions{Mode: storage.PutCreateIfAbsent}); err != nil {
			bt.err = fmt.Errorf("writing the audit line %s: %w", key, err)
		}
		close(bt.done)
		a.mu.Lock()
		a.writing--
		if a.next != nil {
			a.flush(ctx)
		}
		a.mu.Unlock()
	}()
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
func ReadAudit(ctx context.Context, s *storage.Store, since time.Time) ([]AuditRecord, error) {
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
		n := 0
		for line := range bytes.Lines(b) {
			if len(bytes.TrimSpace(line)) == 0 {
				continue
			}
			n++
			var r AuditRecord
			if err := json.Unmarshal(line, &r); err != nil {
				return nil, storage.Errorf("audit", o.Key, storage.ErrUnknown, "line %d of an audit object does not parse: %v", n, err)
			}
			if !since.IsZero() && r.At.Before(since) {
				continue
			}
			out = append(out, r)
		}
		if n == 0 {
			return nil, storage.Errorf("audit", o.Key, storage.ErrUnknown, "an audit object holds no line")
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].At.Before(out[j].At) })
	return out, nil
}
