package registry

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"
)

// PinRecordKey is the tag metadata key under which every pin tag carries
// its PinRecord, so that a pin proves its own authority: if the registry
// is lost, `retain registry recover` rebuilds the checkpoint from its
// pins. Lance keeps tag metadata verbatim and ignores it.
const PinRecordKey = "retain.pin"

// PinRecord is what a pin says about itself: its checkpoint's header and,
// for a table pin, the row's fields its tag name digests. The row part is
// proven by the name (TablePinTag of the record's pin must be the tag's
// own name); the header part is consistent across a checkpoint's pins.
type PinRecord struct {
	Format       int       `json:"format"`
	Checkpoint   ID        `json:"checkpoint"`
	Name         string    `json:"name"`
	SourceBranch string    `json:"source_branch"`
	CreatedAt    time.Time `json:"created_at"`
	Actor        string    `json:"actor"`
	// Tables is how many tables the checkpoint pins.
	Tables int `json:"tables"`
	// Table pins only: the row's table id, incarnation and physical ref
	// (path, branch and version are the tag's own).
	TableID     ID     `json:"table_id,omitempty"`
	Incarnation uint64 `json:"incarnation,omitempty"`
	PhysicalRef string `json:"physical_ref,omitempty"`
}

const pinRecordFormat = 1

// NewPinRecord is the record of a pin of checkpoint c (its header fields)
// pinning tables tables; p is the table pin, nil for the registry pin.
func NewPinRecord(id ID, name, sourceBranch string, createdAt time.Time, actor string, tables int, p *Pin) PinRecord {
	r := PinRecord{Format: pinRecordFormat, Checkpoint: id, Name: name, SourceBranch: sourceBranch,
		CreatedAt: createdAt.UTC(), Actor: actor, Tables: tables}
	if p != nil {
		r.TableID, r.Incarnation, r.PhysicalRef = p.TableID, p.Incarnation, p.PhysicalRef
	}
	return r
}

// Metadata is the tag metadata that carries r.
func (r PinRecord) Metadata() map[string]string {
	b, _ := json.Marshal(r)
	return map[string]string{PinRecordKey: string(b)}
}

// ParsePinRecord reads the record from a tag's metadata: ok is false when
// the tag carries none (pins written before records existed).
func ParsePinRecord(meta map[string]string) (PinRecord, bool, error) {
	raw, ok := meta[PinRecordKey]
	if !ok {
		return PinRecord{}, false, nil
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(raw)))
	dec.DisallowUnknownFields()
	var r PinRecord
	if err := dec.Decode(&r); err != nil {
		return PinRecord{}, true, fmt.Errorf("the pin record is not readable: %v", err)
	}
	if r.Format != pinRecordFormat {
		return PinRecord{}, true, fmt.Errorf("the pin record has format %d; this build reads %d", r.Format, pinRecordFormat)
	}
	return r, true, nil
}

// TablePin is the table pin the record proves for a tag at path on branch
// at version, if the tag's name is its digest: name must equal
// TablePinTag(r.Checkpoint, pin).
func (r PinRecord) TablePin(tagName, path, branch string, version uint64) (Pin, error) {
	p := Pin{TableID: r.TableID, Incarnation: r.Incarnation,
		Target: Target{Path: path, Branch: branch, Version: version, PhysicalRef: r.PhysicalRef}}
	if err := checkPin(p); err != nil {
		return Pin{}, fmt.Errorf("the pin record does not describe a valid pin: %v", err)
	}
	want, err := TablePinTag(r.Checkpoint, p)
	if err != nil {
		return Pin{}, err
	}
	if want != tagName {
		return Pin{}, fmt.Errorf("the pin record does not match the tag's name (it digests to %s)", want)
	}
	return p, nil
}
