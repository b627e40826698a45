package registry

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/retain-dev/retain/core/lance"
	"github.com/retain-dev/retain/core/storage"
)

// Format is the snapshot format this build writes. Format 2 adds prev, the
// digest of the predecessor's exact bytes, so the versions form a chain;
// format 1 (no prev) is still read. A snapshot of any other format is
// refused (ErrCorruptRegistry): a newer writer that adds anything bumps it,
// so an older build never drops what it does not understand when it writes
// the next version.
const Format = 2

// formatUnchained is the first format, without prev: read, never written.
const formatUnchained = 1

// Version is a registry version number. Version 0 is the empty registry (no
// object); the first commit writes version 1. In JSON a Version is a string
// of exactly 20 decimal digits, so a snapshot's size does not grow with the
// depth of the history.
type Version uint64

// MarshalJSON writes the 20-digit form.
func (v Version) MarshalJSON() ([]byte, error) {
	return []byte(fmt.Sprintf(`"%020d"`, uint64(v))), nil
}

// UnmarshalJSON reads the 20-digit form, and only it.
func (v *Version) UnmarshalJSON(b []byte) error {
	if len(b) != 22 || b[0] != '"' || b[21] != '"' {
		return fmt.Errorf("a registry version is a string of 20 digits, not %s", b)
	}
	for _, c := range b[1:21] {
		if c < '0' || c > '9' {
			return fmt.Errorf("a registry version is a string of 20 digits, not %s", b)
		}
	}
	n, err := strconv.ParseUint(string(b[1:21]), 10, 64)
	if err != nil {
		return fmt.Errorf("registry version %s: %v", b, err)
	}
	*v = Version(n)
	return nil
}

// State of a name reservation, a checkpoint header or a row.
type State string

const (
	Live       State = "live"
	Tombstoned State = "tombstoned"
)

// Reservation holds a checkpoint name. Its generation starts at 1 and grows
// by one each time a tombstoned name is revived; tombstoning keeps it. The
// reservation of a name is never removed, so generations never repeat.
type Reservation struct {
	Name       string `json:"name"`
	State      State  `json:"state"`
	Generation uint64 `json:"generation"`
	// CheckpointID is the checkpoint holding (live) or that last held
	// (tombstoned) the name.
	CheckpointID ID `json:"checkpoint_id"`
}

// Header describes one checkpoint.
type Header struct {
	ID         ID     `json:"id"`
	Name       string `json:"name"`
	Generation uint64 `json:"generation"` // of the name, when this checkpoint got it
	State      State  `json:"state"`
	// SourceBranch is the branch the checkpoint was taken from ("main").
	SourceBranch string `json:"source_branch"`
	// RegistryVersion is the registry version that published the
	// checkpoint: the snapshot that describes it, which its registry pin
	// keeps.
	RegistryVersion Version   `json:"registry_version"`
	CreatedAt       time.Time `json:"created_at"`
	Actor           string    `json:"actor"`
	// Lost lists the table pins this checkpoint gave up because the
	// version they pinned is provably gone (DropLostRow), oldest first.
	Lost []LostPin `json:"lost,omitempty"`
}

// Row is one pinned table of one checkpoint.
type Row struct {
	CheckpointID ID `json:"checkpoint_id"`
	Pin
	State State `json:"state"` // always the checkpoint's state
}

// Tombstone records the deletion of a checkpoint.
type Tombstone struct {
	CheckpointID      ID        `json:"checkpoint_id"`
	Name              string    `json:"name"`
	Generation        uint64    `json:"generation"`
	DeleteOperationID string    `json:"delete_operation_id"`
	DeletedAt         time.Time `json:"deleted_at"`
	Actor             string    `json:"actor"`
}

// Table is one entry of the table catalog: a Lance dataset at Path, with a
// stable id and an incarnation that grows when the dataset is deleted and
// recreated at the same path. FirstSeen is when this incarnation was first
// catalogued.
type Table struct {
	ID          ID        `json:"id"`
	Path        string    `json:"path"`
	Incarnation uint64    `json:"incarnation"`
	FirstSeen   time.Time `json:"first_seen"`
}

// Snapshot is one whole version of the registry. Snapshots returned by
// Head or Read are shared and must be treated as read-only; change the
// registry by editing a draft from Next with its methods (Reserve, Revive,
// Tombstone, Purge, AddTable, NewIncarnation) and committing it. Every slice
// is kept sorted by its key (names by name, checkpoints and tombstones by
// id, rows by checkpoint then table id, tables by id) and Validate checks
// that, so lookups are binary searches and the encoding is deterministic.
type Snapshot struct {
	Format  int     `json:"format"`
	Version Version `json:"version"`
	// Prev is "sha256:<hex>" of the exact bytes of version Version-1 as
	// they were when this version was committed ("" for version 1, and in
	// format 1): a rewritten predecessor no longer matches.
	Prev        string        `json:"prev,omitempty"`
	Names       []Reservation `json:"names"`
	Checkpoints []Header      `json:"checkpoints"`
	Rows        []Row         `json:"rows"`
	Tombstones  []Tombstone   `json:"tombstones"`
	Tables      []Table       `json:"tables"`
	// GCBoundary is reserved for the cleanup protocol and empty for now.
	// Its rows are carried from version to version verbatim.
	GCBoundary []json.RawMessage `json:"gc_boundary"`

	draft bool
	ref   Ref
	// stored is how this version is stored in segments (format 3; nil
	// otherwise); base is the predecessor's, for a draft: a commit writes
	// only the segments base lacks, and a bucket or rows object that did
	// not change keeps the version it was written at (segments.go).
	stored, base *segState
}

// Empty is the snapshot of the empty registry (version 0).
func Empty() *Snapshot {
	s := &Snapshot{Format: Format}
	s.normalize()
	return s
}

func (s *Snapshot) normalize() {
	if s.Names == nil {
		s.Names = []Reservation{}
	}
	if s.Checkpoints == nil {
		s.Checkpoints = []Header{}
	}
	if s.Rows == nil {
		s.Rows = []Row{}
	}
	if s.Tombstones == nil {
		s.Tombstones = []Tombstone{}
	}
	if s.Tables == nil {
		s.Tables = []Table{}
	}
	if s.GCBoundary == nil {
		s.GCBoundary = []json.RawMessage{}
	}
}

// Ref is the registry ref of the object this snapshot was read from or
// committed as; zero for a draft that is not committed yet and for Empty.
func (s *Snapshot) Ref() Ref { return s.ref }

// Chained reports whether s names its predecessor (every format but the
// first): a head record that is not current is then settled by a commit.
func (s *Snapshot) Chained() bool { return s.Format != formatUnchained }

// IsDraft reports whether s came from Next and may be edited.
func (s *Snapshot) IsDraft() bool { return s.draft }

// Next returns a draft of the next version: a deep copy of s with Version
// s.Version+1. s itself is never changed.
func (s *Snapshot) Next() *Snapshot {
	n := &Snapshot{
		Format:      Format,
		Version:     s.Version + 1,
		Prev:        s.digest(),
		Names:       append([]Reservation(nil), s.Names...),
		Checkpoints: append([]Header(nil), s.Checkpoints...),
		Rows:        append([]Row(nil), s.Rows...),
		Tombstones:  append([]Tombstone(nil), s.Tombstones...),
		Tables:      append([]Table(nil), s.Tables...),
		draft:       true,
		base:        s.stored,
	}
	for _, g := range s.GCBoundary {
		n.GCBoundary = append(n.GCBoundary, append(json.RawMessage(nil), g...))
	}
	n.normalize()
	return n
}

// Encode returns the exact bytes Commit writes for s and their Ref. It is
// deterministic: encoding the same snapshot again gives the same bytes, so
// the create protocol can name the registry pin (RegistryPinTag of
// RegistryTarget(ref)) before it commits.
func (s *Snapshot) Encode() ([]byte, Ref, error) {
	b, _, _, ref, err := s.encode()
	return b, ref, err
}

// encode is Encode plus the segments a format 3 version references, by
// key (nil when the snapshot is written whole).
func (s *Snapshot) encode() ([]byte, map[string][]byte, *segState, Ref, error) {
	if s.Version == 0 {
		return nil, nil, nil, Ref{}, errorf("encode", "", ErrInvalidSnapshot, "version 0 is the empty registry and is never written")
	}
	if err := s.Validate(); err != nil {
		return nil, nil, nil, Ref{}, &Error{Op: "encode", Err: ErrInvalidSnapshot, Msg: err.Error()}
	}
	c := *s
	c.normalize()
	if c.Format == formatSegmented {
		c.Format = Format
	}
	b, err := json.Marshal(&c)
	if err != nil {
		return nil, nil, nil, Ref{}, &Error{Op: "encode", Err: ErrInvalidSnapshot, Cause: err}
	}
	b = append(b, '\n')
	if len(b) <= spillThreshold() || c.Format == formatUnchained {
		return b, nil, nil, refOf(s.Version, b), nil
	}
	b, segs, st, err := c.encodeSegmented()
	if err != nil {
		return nil, nil, nil, Ref{}, &Error{Op: "encode", Err: ErrInvalidSnapshot, Cause: err}
	}
	return b, segs, st, refOf(s.Version, b), nil
}

// decode parses a stored version strictly: unknown fields, trailing data, a
// format other than Format, a version other than want or a broken
// invariant are ErrCorruptRegistry.
func decode(key string, body []byte, want Version) (*Snapshot, error) {
	if f := peekFormat(body); f > formatSegmented {
		return nil, newer(key, want, f)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	var s Snapshot
	if err := dec.Decode(&s); err != nil {
		return nil, corrupt("read", key, err, "registry version %d is not a snapshot this build can read", want)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, corrupt("read", key, nil, "registry version %d has data after the snapshot", want)
	}
	if s.Format > formatSegmented {
		return nil, newer(key, want, s.Format)
	}
	if s.Format != Format && s.Format != formatUnchained {
		return nil, corrupt("read", key, nil, "registry version %d has format %d; this build reads formats %d to %d", want, s.Format, formatUnchained, formatSegmented)
	}
	if s.Version != want {
		return nil, corrupt("read", key, nil, "the object of registry version %d says it is version %d", want, s.Version)
	}
	if err := s.Validate(); err != nil {
		return nil, corrupt("read", key, nil, "registry version %d breaks an invariant: %v", want, err)
	}
	s.normalize()
	s.ref = refOf(want, body)
	return &s, nil
}

// Limits on free-form text.
const (
	maxActorBytes = 256
	maxOpIDBytes  = 128
)

func checkText(what, s string, max int) error {
	switch {
	case s == "":
		return fmt.Errorf("%s must not be empty", what)
	case len(s) > max:
		return fmt.Errorf("%s is at most %d bytes, this one is %d", what, max, len(s))
	case !utf8.ValidString(s):
		return fmt.Errorf("%s must be UTF-8", what)
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return fmt.Errorf("%s must not contain control character %U", what, r)
		}
	}
	return nil
}

// checkOpID: printable ASCII without spaces, so it can go into logs and
// object names as is.
func checkOpID(s string) error {
	if err := checkText("a delete operation id", s, maxOpIDBytes); err != nil {
		return err
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] >= 0x7f {
			return fmt.Errorf("a delete operation id is printable ASCII without spaces (byte %d is %#02x)", i, s[i])
		}
	}
	return nil
}

func checkTime(what string, t time.Time) error {
	if t.IsZero() {
		return fmt.Errorf("%s must be set", what)
	}
	return nil
}

func checkState(st State) error {
	if st != Live && st != Tombstoned {
		return fmt.Errorf("state %q is neither %q nor %q", st, Live, Tombstoned)
	}
	return nil
}

// checkPin validates one pin: ids, incarnation, path, branch, and a
// physical-ref token that is a canonical lance.PhysRef of the same version
// (a format-1 token's key under the table's path).
func checkPin(p Pin) error {
	if err := p.TableID.Validate(); err != nil {
		return err
	}
	if p.Incarnation == 0 {
		return fmt.Errorf("table %s: incarnations start at 1", p.TableID)
	}
	if err := p.Target.check(); err != nil {
		return fmt.Errorf("table %s: %v", p.TableID, err)
	}
	ref, err := lance.ParsePhysRef(p.PhysicalRef)
	if err != nil {
		return fmt.Errorf("table %s: %v", p.TableID, err)
	}
	if ref.Version != p.Version {
		return fmt.Errorf("table %s: the physical ref names version %d, the row version %d", p.TableID, ref.Version, p.Version)
	}
	if ref.Format == 1 && !strings.HasPrefix(ref.Key, p.Path+"/") {
		return fmt.Errorf("table %s: the physical ref's manifest %q is not under the table's path %q", p.TableID, ref.Key, p.Path)
	}
	return nil
}

// Validate checks every invariant of a snapshot: formats and sort orders;
// every reservation, header, row, tombstone and table well-formed; a live
// reservation names a live header of the same name and generation and a
// tombstoned one a tombstoned header (or a purged one); at most one live
// header per name; a header is tombstoned exactly when a tombstone records
// it; rows belong to a header, share its state, name a catalogued table at
// its path with an incarnation it has had; table ids and paths unique.
func (s *Snapshot) Validate() error {
	if err := s.validateFormat(); err != nil {
		return err
	}
	tables, err := s.validateTables()
	if err != nil {
		return err
	}
	headers, err := s.validateHeaders()
	if err != nil {
		return err
	}
	if err := s.validateNames(headers); err != nil {
		return err
	}
	if err := s.validateTombstones(headers); err != nil {
		return err
	}
	if err := s.validateRows(headers, tables); err != nil {
		return err
	}
	return s.validateGCBoundaries()
}

// validateFormat checks the format and its chain link.
func (s *Snapshot) validateFormat() error {
	switch {
	case s.Format != Format && s.Format != formatUnchained && s.Format != formatSegmented:
		return fmt.Errorf("format %d, want %d", s.Format, Format)
	case s.Format == formatUnchained && s.Prev != "":
		return fmt.Errorf("format %d carries no prev", formatUnchained)
	case s.Prev != "" && !validDigest(s.Prev):
		return fmt.Errorf("prev %q is not sha256:<64 lower-case hex>", s.Prev)
	}
	return nil
}

// validateTables checks the table catalog: sorted unique ids, unique paths,
// and returns it by id.
func (s *Snapshot) validateTables() (map[ID]Table, error) {
	tables := map[ID]Table{}
	paths := map[string]ID{}
	for i, t := range s.Tables {
		if i > 0 && s.Tables[i-1].ID >= t.ID {
			return nil, fmt.Errorf("tables are not sorted by id with unique ids at %s", t.ID)
		}
		if err := t.ID.Validate(); err != nil {
			return nil, err
		}
		if err := storage.ValidateKey("table", t.Path); err != nil {
			return nil, fmt.Errorf("table %s: %v", t.ID, err)
		}
		if other, dup := paths[t.Path]; dup {
			return nil, fmt.Errorf("tables %s and %s share the path %q", other, t.ID, t.Path)
		}
		if t.Incarnation == 0 {
			return nil, fmt.Errorf("table %s: incarnations start at 1", t.ID)
		}
		if err := checkTime("table "+string(t.ID)+" first_seen", t.FirstSeen); err != nil {
			return nil, err
		}
		paths[t.Path] = t.ID
		tables[t.ID] = t
	}
	return tables, nil
}

// validateHeaders checks each checkpoint header, at most one live per name,
// and returns them by id.
func (s *Snapshot) validateHeaders() (map[ID]Header, error) {
	headers := map[ID]Header{}
	liveByName := map[string]ID{}
	for i, h := range s.Checkpoints {
		if i > 0 && s.Checkpoints[i-1].ID >= h.ID {
			return nil, fmt.Errorf("checkpoints are not sorted by id with unique ids at %s", h.ID)
		}
		if err := h.ID.Validate(); err != nil {
			return nil, err
		}
		if err := ValidateName(h.Name); err != nil {
			return nil, fmt.Errorf("checkpoint %s: %v", h.ID, err)
		}
		if err := checkState(h.State); err != nil {
			return nil, fmt.Errorf("checkpoint %s: %v", h.ID, err)
		}
		if h.Generation == 0 {
			return nil, fmt.Errorf("checkpoint %s: generations start at 1", h.ID)
		}
		if err := validateBranch(h.SourceBranch); err != nil {
			return nil, fmt.Errorf("checkpoint %s: source branch: %v", h.ID, err)
		}
		if h.RegistryVersion == 0 || h.RegistryVersion > s.Version {
			return nil, fmt.Errorf("checkpoint %s: registry version %d is not between 1 and this snapshot's version %d", h.ID, h.RegistryVersion, s.Version)
		}
		if err := checkTime("checkpoint "+string(h.ID)+" created_at", h.CreatedAt); err != nil {
			return nil, err
		}
		if err := checkText("checkpoint "+string(h.ID)+" actor", h.Actor, maxActorBytes); err != nil {
			return nil, err
		}
		for _, l := range h.Lost {
			if err := l.check(); err != nil {
				return nil, fmt.Errorf("checkpoint %s: lost pin of %s: %v", h.ID, l.Path, err)
			}
		}
		if h.State == Live {
			if other, dup := liveByName[h.Name]; dup {
				return nil, fmt.Errorf("checkpoints %s and %s are both live under the name %q", other, h.ID, h.Name)
			}
			liveByName[h.Name] = h.ID
		}
		headers[h.ID] = h
	}
	return headers, nil
}

// validateNames checks the name reservations against the headers, both
// ways: every header's name is reserved, and a reservation agrees with the
// header it names.
func (s *Snapshot) validateNames(headers map[ID]Header) error {
	reserved := map[string]Reservation{}
	for i, r := range s.Names {
		if i > 0 && s.Names[i-1].Name >= r.Name {
			return fmt.Errorf("names are not sorted with unique names at %q", r.Name)
		}
		if err := ValidateName(r.Name); err != nil {
			return err
		}
		if err := checkState(r.State); err != nil {
			return fmt.Errorf("name %q: %v", r.Name, err)
		}
		if r.Generation == 0 {
			return fmt.Errorf("name %q: generations start at 1", r.Name)
		}
		if err := r.CheckpointID.Validate(); err != nil {
			return fmt.Errorf("name %q: %v", r.Name, err)
		}
		h, ok := headers[r.CheckpointID]
		switch {
		case r.State == Live && !ok:
			return fmt.Errorf("live name %q names checkpoint %s, which has no header", r.Name, r.CheckpointID)
		case ok && (h.Name != r.Name || h.Generation != r.Generation || h.State != r.State):
			return fmt.Errorf("name %q (%s, generation %d) and checkpoint %s (%q, %s, generation %d) disagree",
				r.Name, r.State, r.Generation, h.ID, h.Name, h.State, h.Generation)
		}
		reserved[r.Name] = r
	}
	for _, h := range s.Checkpoints {
		r, ok := reserved[h.Name]
		switch {
		case !ok:
			return fmt.Errorf("checkpoint %s has the name %q, which is not reserved", h.ID, h.Name)
		case h.Generation > r.Generation:
			return fmt.Errorf("checkpoint %s has generation %d of %q, beyond the name's generation %d", h.ID, h.Generation, h.Name, r.Generation)
		case h.State == Live && r.CheckpointID != h.ID:
			return fmt.Errorf("checkpoint %s is live but the name %q belongs to %s", h.ID, h.Name, r.CheckpointID)
		case h.State == Tombstoned && h.Generation == r.Generation && r.CheckpointID != h.ID:
			return fmt.Errorf("checkpoint %s and %s share generation %d of %q", h.ID, r.CheckpointID, h.Generation, h.Name)
		}
	}
	return nil
}

// validateTombstones checks the tombstone records against the headers,
// both ways: every tombstoned header has one.
func (s *Snapshot) validateTombstones(headers map[ID]Header) error {
	tombs := map[ID]bool{}
	for i, t := range s.Tombstones {
		if i > 0 && s.Tombstones[i-1].CheckpointID >= t.CheckpointID {
			return fmt.Errorf("tombstones are not sorted by checkpoint id with unique ids at %s", t.CheckpointID)
		}
		h, ok := headers[t.CheckpointID]
		switch {
		case !ok:
			return fmt.Errorf("tombstone of checkpoint %s, which has no header", t.CheckpointID)
		case h.State != Tombstoned:
			return fmt.Errorf("tombstone of checkpoint %s, which is live", t.CheckpointID)
		case h.Name != t.Name || h.Generation != t.Generation:
			return fmt.Errorf("tombstone of checkpoint %s says %q generation %d, the header %q generation %d", t.CheckpointID, t.Name, t.Generation, h.Name, h.Generation)
		}
		if err := checkOpID(t.DeleteOperationID); err != nil {
			return fmt.Errorf("tombstone of %s: %v", t.CheckpointID, err)
		}
		if err := checkTime("tombstone of "+string(t.CheckpointID)+" deleted_at", t.DeletedAt); err != nil {
			return err
		}
		if err := checkText("tombstone of "+string(t.CheckpointID)+" actor", t.Actor, maxActorBytes); err != nil {
			return err
		}
		tombs[t.CheckpointID] = true
	}
	for _, h := range s.Checkpoints {
		if h.State == Tombstoned && !tombs[h.ID] {
			return fmt.Errorf("checkpoint %s is tombstoned without a tombstone record", h.ID)
		}
	}
	return nil
}

// validateRows checks each row against its checkpoint's header and the
// table catalog.
func (s *Snapshot) validateRows(headers map[ID]Header, tables map[ID]Table) error {
	for i, r := range s.Rows {
		if i > 0 {
			p := s.Rows[i-1]
			if p.CheckpointID > r.CheckpointID || (p.CheckpointID == r.CheckpointID && p.TableID >= r.TableID) {
				return fmt.Errorf("rows are not sorted by checkpoint and table with one row per table at %s/%s", r.CheckpointID, r.TableID)
			}
		}
		h, ok := headers[r.CheckpointID]
		if !ok {
			return fmt.Errorf("row of checkpoint %s, which has no header", r.CheckpointID)
		}
		if r.State != h.State {
			return fmt.Errorf("row %s/%s is %s, its checkpoint %s", r.CheckpointID, r.TableID, r.State, h.State)
		}
		if err := checkPin(r.Pin); err != nil {
			return fmt.Errorf("row of checkpoint %s: %v", r.CheckpointID, err)
		}
		t, ok := tables[r.TableID]
		switch {
		case !ok:
			return fmt.Errorf("row %s/%s names a table missing from the catalog", r.CheckpointID, r.TableID)
		case t.Path != r.Path:
			return fmt.Errorf("row %s/%s has path %q, the catalog %q", r.CheckpointID, r.TableID, r.Path, t.Path)
		case r.Incarnation > t.Incarnation:
			return fmt.Errorf("row %s/%s has incarnation %d, beyond the catalog's %d", r.CheckpointID, r.TableID, r.Incarnation, t.Incarnation)
		}
	}
	return nil
}

// validateGCBoundaries checks that each gc_boundary row is JSON.
func (s *Snapshot) validateGCBoundaries() error {
	for i, g := range s.GCBoundary {
		if !json.Valid(g) {
			return fmt.Errorf("gc_boundary row %d is not JSON", i)
		}
	}
	return nil
}

// sortAll restores every sort order after an edit.
func (s *Snapshot) sortAll() {
	sort.Slice(s.Names, func(i, j int) bool { return s.Names[i].Name < s.Names[j].Name })
	sort.Slice(s.Checkpoints, func(i, j int) bool { return s.Checkpoints[i].ID < s.Checkpoints[j].ID })
	sort.Slice(s.Rows, func(i, j int) bool {
		a, b := s.Rows[i], s.Rows[j]
		return a.CheckpointID < b.CheckpointID || (a.CheckpointID == b.CheckpointID && a.TableID < b.TableID)
	})
	sort.Slice(s.Tombstones, func(i, j int) bool { return s.Tombstones[i].CheckpointID < s.Tombstones[j].CheckpointID })
	sort.Slice(s.Tables, func(i, j int) bool { return s.Tables[i].ID < s.Tables[j].ID })
}

var errNotDraft = errors.New("only a draft from Next can be edited")

// digest is "sha256:<hex>" of the bytes s was read from or committed as, ""
// for Empty and for a draft never committed.
func (s *Snapshot) digest() string {
	if s.ref.IsZero() {
		return ""
	}
	return "sha256:" + s.ref.SHA256
}

// DigestOf is the prev a successor of a version with these bytes names.
func DigestOf(body []byte) string {
	sum := sha256.Sum256(body)
	return "sha256:" + hex.EncodeToString(sum[:])
}

func validDigest(d string) bool {
	h, ok := strings.CutPrefix(d, "sha256:")
	if !ok || len(h) != 64 {
		return false
	}
	_, err := hex.DecodeString(h)
	return err == nil && strings.ToLower(h) == h
}

// newer is the refusal of a version a newer build wrote.
func newer(key string, v Version, format int) error {
	return &Error{Op: "read", Key: key, Err: ErrCorruptRegistry, Cause: ErrNewerRegistry,
		Msg: fmt.Sprintf("registry version %d has format %d, which a newer retain writes (this build reads formats %d to %d): run that build or a newer one; do not run `retain registry recover` from this one, which would rebuild below it", v, format, formatUnchained, formatSegmented)}
}
