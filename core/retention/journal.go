package retention

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/retain-dev/retain/core/checkpoint/registry"
	"github.com/retain-dev/retain/core/lance"
	"github.com/retain-dev/retain/core/retention/runs"
	"github.com/retain-dev/retain/core/storage"
)

// The run journal makes a cleanup run durably resumable (issue 7, section
// 3.6). Before the gc_boundary commit, Run writes every table's exact plan
// and a journal naming them; it updates the journal as tables finish. A
// crashed or part-failed run is finished by Resume from those plans — the
// same root digests, never a recomputed (possibly broader) plan.
//
//	_retain/cleanup/<op>/run.json          the journal (state, tables, stats)
//	_retain/cleanup/<op>/tables/0000.json  the plans of the first tables, as planned
//	_retain/cleanup/open/<op>              present while the run is unfinished
//
// The plans are written together, about planGroupBytes an object (a plan
// larger than that alone): a run of 1,000 small tables writes a few
// objects, not 1,000. Format 1 journals (before 2026-12-02) name one
// plan per object; both are read.
//
// The open marker lets a new run find an unfinished one in one listing
// request. A complete or abandoned run keeps run.json as its record and
// drops its plans and marker.
const (
	JournalPrefix = runs.Prefix
	journalFormat = runs.Format
	// planGroupBytes is about how many bytes of plans one object holds.
	planGroupBytes = 1 << 20
)

// JournalKey is the key of the run journal of operation op.
func JournalKey(op string) string { return runs.JournalKey(op) }

func planKey(op string, i int) string {
	return fmt.Sprintf("%s%s/tables/%04d.json", JournalPrefix, op, i)
}

func openKey(op string) string { return runs.OpenKey(op) }

// corruptKey keeps the bytes of a journal that did not parse when its run
// is abandoned.
func corruptKey(op string) string { return JournalPrefix + op + "/run.json.corrupt" }

// RunState is where a cleanup run stands.
type RunState string

const (
	// StateRunning: the run holds (or held, if it crashed) the claim.
	StateRunning RunState = "running"
	// StateIncomplete: the run stopped part-way and released the claim;
	// `cleanup run --resume` finishes it.
	StateIncomplete RunState = "incomplete"
	// StateComplete: every table was carried out or found stale.
	StateComplete RunState = runs.Complete
	// StateAbandoned: the operator dropped the run (`--abandon`), or its
	// boundary was never published (nothing was deleted).
	StateAbandoned RunState = runs.Abandoned
)

// RunMode is how a run was planned.
type RunMode string

const (
	ModeWriteOutage RunMode = "write-outage"
	ModeOnline      RunMode = "online"
)

// TableState is where one table of a run stands.
type TableState string

const (
	TablePending TableState = "pending"
	TableDone    TableState = "done"
	// TableFailed: the table's cleanup failed; resume retries its plan.
	TableFailed TableState = "failed"
	// TableStale: the table changed since planning (a commit, a tag, a
	// branch); its plan is dropped unexecuted or part-executed, and only a
	// new run plans it again. Terminal.
	TableStale TableState = "stale"
	// TableSkipped: nothing to plan (no manifest).
	TableSkipped TableState = "skipped"
	// TableRefused: the table's cleanup was refused at planning (a kept
	// version of it is broken, TableRefusedError): nothing of it was
	// planned or deleted. Terminal: the next run plans it again.
	TableRefused TableState = "refused"
)

// Journal is the durable record of one cleanup run.
type Journal struct {
	Format      int      `json:"format"`
	OperationID string   `json:"operation_id"`
	State       RunState `json:"state"`
	// Mode is how the run was planned: ModeWriteOutage (writers
	// stopped) or ModeOnline (writers may commit; older-than >=
	// MinOnlineAge). An online resume carries out only online plans.
	Mode      RunMode    `json:"mode"`
	Actor     string     `json:"actor,omitempty"`
	StartedAt time.Time  `json:"started_at"`
	UpdatedAt time.Time  `json:"updated_at"`
	Policy    PolicyEcho `json:"policy"`
	// BoundaryVersion is the registry version that publishes the run's
	// gc_boundary rows (0: nothing planned, nothing published).
	BoundaryVersion uint64          `json:"boundary_version"`
	Tables          []JournalTable  `json:"tables"`
	Registry        RegistryCleanup `json:"registry"`
	// Resumes counts the resumptions of the run.
	Resumes int    `json:"resumes,omitempty"`
	Note    string `json:"note,omitempty"`
}

// JournalTable is one table of a run.
type JournalTable struct {
	Table       string      `json:"table"`
	TableID     registry.ID `json:"table_id,omitempty"`
	Incarnation uint64      `json:"incarnation,omitempty"`
	RootDigest  string      `json:"root_digest,omitempty"`
	Cutoff      string      `json:"cutoff,omitempty"`
	PlanKey     string      `json:"plan_key,omitempty"`
	State       TableState  `json:"state"`
	Error       string      `json:"error,omitempty"`
	Attempts    int         `json:"attempts,omitempty"`
	// Stats of the attempts so far: deletes the store confirmed.
	VersionsRemoved int   `json:"versions_removed"`
	FilesDeleted    int   `json:"files_deleted"`
	BytesDeleted    int64 `json:"bytes_deleted"`
	// Retry: the objects of the plan the last attempt that deleted did not
	// get confirmed (failed, unknown, not reached); a resume carries out
	// only these. Empty: the whole plan (an attempt that crashed leaves no
	// list; re-deleting what is gone is a no-op, counted again).
	Retry []string `json:"retry,omitempty"`
}

// RegistryCleanup is the registry's own part of a run: the old registry
// versions no registry pin (`_m_` tag) or live checkpoint keeps and the
// window allows, listed at planning time.
type RegistryCleanup struct {
	Remove  []uint64   `json:"remove"`
	Kept    int        `json:"kept"`
	State   TableState `json:"state"`
	Deleted int        `json:"deleted"`
	Error   string     `json:"error,omitempty"`
	// SegmentsDeleted counts the registry segments (format 3) only the
	// removed versions referenced, deleted after them; SegmentsError says
	// why some were left (garbage, never needed: a later run does not find
	// them again, which only costs space).
	SegmentsDeleted int    `json:"segments_deleted,omitempty"`
	SegmentsError   string `json:"segments_error,omitempty"`
}

func (j *Journal) finished() bool {
	for _, t := range j.Tables {
		if t.State == TablePending || t.State == TableFailed {
			return false
		}
	}
	return j.Registry.State != TablePending && j.Registry.State != TableFailed
}

// journalWriter keeps the journal object's version for compare-and-swap
// updates: two processes can never both advance one run.
type journalWriter struct {
	s   *storage.Store
	j   *Journal
	ver string
}

func (w *journalWriter) create(ctx context.Context) error {
	w.j.UpdatedAt = time.Now().UTC()
	b, err := json.MarshalIndent(w.j, "", "  ")
	if err != nil {
		return err
	}
	info, err := w.s.PutBytes(ctx, JournalKey(w.j.OperationID), b, storage.PutOptions{Mode: storage.PutCreateIfAbsent})
	if err != nil {
		return fmt.Errorf("writing the cleanup journal: %w", err)
	}
	w.ver = info.Version
	return nil
}

func (w *journalWriter) save(ctx context.Context) error {
	b, err := w.encode()
	if err != nil {
		return err
	}
	return w.put(ctx, b)
}

// encode is the journal as save writes it.
func (w *journalWriter) encode() ([]byte, error) {
	w.j.UpdatedAt = time.Now().UTC()
	return json.MarshalIndent(w.j, "", "  ")
}

// put replaces the journal object with b, if it is still the version this
// writer last wrote.
func (w *journalWriter) put(ctx context.Context, b []byte) error {
	info, err := w.s.PutBytes(ctx, JournalKey(w.j.OperationID), b, storage.PutOptions{Mode: storage.PutReplaceIfVersion, IfVersion: w.ver})
	if err != nil {
		return fmt.Errorf("updating the cleanup journal %s: %w", JournalKey(w.j.OperationID), err)
	}
	w.ver = info.Version
	return nil
}

// ErrCorruptJournal: a cleanup run's journal does not parse (torn,
// truncated, edited, or from another build). Nothing is resumed from it;
// `retain cleanup run STORE --abandon OP` closes the run without reading it.
var ErrCorruptJournal = errors.New("the cleanup journal does not parse")

// ReadJournal reads the journal of operation op. A journal that does not
// parse is refused (ErrCorruptJournal): nothing is resumed from a record
// this build cannot fully read.
func ReadJournal(ctx context.Context, s *storage.Store, op string) (*Journal, string, error) {
	if err := checkOp(op); err != nil {
		return nil, "", err
	}
	b, info, err := s.ReadAll(ctx, JournalKey(op))
	if err != nil {
		return nil, "", err
	}
	var j Journal
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&j); err != nil || j.Format < 1 || j.Format > journalFormat || j.OperationID != op {
		if err == nil {
			err = fmt.Errorf("format %d, operation %q", j.Format, j.OperationID)
		}
		return nil, "", fmt.Errorf("%w: %w", ErrCorruptJournal, storage.Errorf("cleanup-journal", JournalKey(op), storage.ErrUnknown,
			"the cleanup journal does not parse (%v): nothing was resumed; inspect the object, and abandon the run (`retain cleanup run STORE --abandon %s`) only once you know what it did", err, op))
	}
	return &j, info.Version, nil
}

// checkOp refuses an operation id that is not one path segment.
func checkOp(op string) error { return runs.CheckOp(op) }

// tidy drops the plans and the open marker of a closed run.
func tidy(ctx context.Context, s *storage.Store, j *Journal) error {
	keys := make([]string, 0, len(j.Tables))
	for _, t := range j.Tables {
		keys = append(keys, t.PlanKey)
	}
	return runs.Tidy(ctx, s, j.OperationID, keys)
}

// planGroup is one object of journaled plans, by table.
type planGroup struct {
	Plans map[string]json.RawMessage `json:"plans"`
}

// planReader reads journaled plans for a resume, each object once however
// many tables' plans it holds.
type planReader struct {
	s  *storage.Store
	mu sync.Mutex
	m  map[string]*planObject
}

type planObject struct {
	once sync.Once
	b    []byte
	err  error
}

func newPlanReader(s *storage.Store) *planReader {
	return &planReader{s: s, m: map[string]*planObject{}}
}

// read reads a table's journaled plan and checks it is the plan the
// journal (and the published boundary) names by its root digest.
func (pr *planReader) read(ctx context.Context, t JournalTable) (*lance.Plan, error) {
	pr.mu.Lock()
	o := pr.m[t.PlanKey]
	if o == nil {
		o = &planObject{}
		pr.m[t.PlanKey] = o
	}
	pr.mu.Unlock()
	o.once.Do(func() { o.b, _, o.err = pr.s.ReadAll(ctx, t.PlanKey) })
	if o.err != nil {
		return nil, fmt.Errorf("reading the journaled plan of %s: %w", t.Table, o.err)
	}
	b := o.b
	var g planGroup
	if err := json.Unmarshal(b, &g); err == nil && g.Plans != nil {
		raw, ok := g.Plans[t.Table]
		if !ok {
			return nil, storage.Errorf("cleanup-journal", t.PlanKey, storage.ErrUnknown, "the journaled plans there hold none of %s; it is not executed", t.Table)
		}
		b = raw
	} // else one plan alone, as format 1 journals wrote it
	var lp lance.Plan
	if err := json.Unmarshal(b, &lp); err != nil {
		return nil, storage.Errorf("cleanup-journal", t.PlanKey, storage.ErrUnknown, "the journaled plan of %s does not parse (%v); it is not executed", t.Table, err)
	}
	if d := RootDigest(&lp); d != t.RootDigest {
		return nil, storage.Errorf("cleanup-journal", t.PlanKey, storage.ErrPreconditionFailed,
			"the journaled plan of %s has root digest %s, the run published %s: it is not executed", t.Table, d, t.RootDigest)
	}
	return &lp, nil
}

// groupPlans encodes the plans (nil: none, by journal table) into
// objects of about planGroupBytes, sets each table's PlanKey to its
// object, and returns the objects by key, in order.
func groupPlans(op string, tables []JournalTable, plans []*lance.Plan) (keys []string, bodies [][]byte, err error) {
	var cur planGroup
	size := 0
	flush := func() error {
		if len(cur.Plans) == 0 {
			return nil
		}
		b, err := json.Marshal(cur)
		if err != nil {
			return err
		}
		keys, bodies = append(keys, planKey(op, len(keys))), append(bodies, b)
		cur, size = planGroup{}, 0
		return nil
	}
	for i, lp := range plans {
		if lp == nil {
			continue
		}
		raw, err := json.Marshal(lp)
		if err != nil {
			return nil, nil, err
		}
		if size > 0 && size+len(raw) > planGroupBytes {
			if err := flush(); err != nil {
				return nil, nil, err
			}
		}
		if cur.Plans == nil {
			cur.Plans = map[string]json.RawMessage{}
		}
		if _, dup := cur.Plans[tables[i].Table]; dup {
			return nil, nil, fmt.Errorf("two plans of table %s", tables[i].Table)
		}
		cur.Plans[tables[i].Table] = raw
		size += len(raw)
		tables[i].PlanKey = planKey(op, len(keys))
	}
	if err := flush(); err != nil {
		return nil, nil, err
	}
	return keys, bodies, nil
}

// ErrRunIncomplete: the cleanup run stopped part-way with its plans
// journaled and its boundaries published; `retain cleanup run --resume`
// finishes it under the same root digests. Nothing pinned was touched.
var ErrRunIncomplete = errors.New("cleanup run incomplete")

// IncompleteError is a run that stopped part-way; it matches
// ErrRunIncomplete and its cause.
type IncompleteError struct {
	OperationID string
	Done        int // tables carried out
	Left        int // tables pending or failed
	// FirstFailure is the first failed table and its error.
	FirstFailure string
	Cause        error
}

func (e *IncompleteError) Error() string {
	msg := fmt.Sprintf("cleanup run %s stopped part-way (%d table(s) done, %d left); nothing pinned was touched; finish it with `retain cleanup run STORE --resume --confirm-write-outage`, which carries out the same plans", e.OperationID, e.Done, e.Left)
	if e.FirstFailure != "" {
		msg += "; first failure: " + e.FirstFailure
	}
	if e.Cause != nil {
		msg += ": " + e.Cause.Error()
	}
	return msg
}

func (e *IncompleteError) Unwrap() []error {
	if e.Cause == nil {
		return []error{ErrRunIncomplete}
	}
	return []error{ErrRunIncomplete, e.Cause}
}
