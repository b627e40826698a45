package registry

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/retain-dev/retain/core/lance"
	"github.com/retain-dev/retain/core/storage"
)

// Pin tags. Every tag retain itself creates is named
//
//	ogcp_v1_<checkpoint id>_m_<64 hex>   the registry pin of a checkpoint
//	ogcp_v1_<checkpoint id>_t_<64 hex>   one table pin of a checkpoint
//
// where the hex is the SHA-256 of a domain-separated, length-prefixed
// encoding of the exact physical target (see PinDigest). The name is a pure
// function of the checkpoint id and the target, so a create that crashed
// and runs again, or a reconcile, computes the same names; and a tag whose
// file points anywhere else than its name's target is detectably wrong.
// The names are 101 bytes, valid Lance tag names, ASCII (so Lance lists
// them back) and begin with the reserved prefix "ogcp_" that user commands
// refuse to create, move or delete (IsReservedTag).
const (
	// TagPrefix begins every pin tag name.
	TagPrefix = "ogcp_"
	// tagVersionPrefix is the v1 scheme's prefix.
	tagVersionPrefix = TagPrefix + "v1_"
	// TagNameLen is the length of every v1 pin tag name.
	TagNameLen = len(tagVersionPrefix) + IDLen + len("_m_") + 2*sha256.Size

	// digestDomain separates pin digests from every other SHA-256 use.
	digestDomain = "retain/ogcp/v1"
)

// PinKind says what a pin tag pins.
type PinKind byte

const (
	// PinRegistry ('m'): the registry version that describes the checkpoint.
	PinRegistry PinKind = 'm'
	// PinTable ('t'): one table's version.
	PinTable PinKind = 't'
)

func (k PinKind) String() string {
	switch k {
	case PinRegistry:
		return "registry"
	case PinTable:
		return "table"
	}
	return fmt.Sprintf("pin-kind(%q)", byte(k))
}

// Target is an exact physical target: the dataset's key prefix in the store
// (the table's path, or RegistryPath), the branch ("main" for main), the
// version on that branch and its physical-ref token (lance.PhysRef.String
// for a table, Ref.String for the registry).
type Target struct {
	Path        string `json:"path"`
	Branch      string `json:"branch"`
	Version     uint64 `json:"version"`
	PhysicalRef string `json:"physical_ref"`
}

// Pin is a table pin: the table's stable id and incarnation and the exact
// version of it a checkpoint retains.
type Pin struct {
	TableID     ID     `json:"table_id"`
	Incarnation uint64 `json:"incarnation"`
	Target
}

// MainBranch is how the main branch is written in targets and rows. Lance
// itself writes null for it; lance.Dataset.CreateTagOnBranch accepts "main".
const MainBranch = "main"

// validateBranch accepts "main" or a name Lance accepts for a branch.
func validateBranch(b string) error {
	if b == MainBranch {
		return nil
	}
	if b == "" {
		return fmt.Errorf("the branch must be named: write %q for main", MainBranch)
	}
	return lance.ValidateBranchName(b)
}

// check validates a target's fields for digesting; it does not parse the
// physical-ref token (the registry's snapshot validation does, for rows).
func (t Target) check() error {
	if err := storage.ValidateKey("pin", t.Path); err != nil {
		return fmt.Errorf("path: %w", err)
	}
	if err := validateBranch(t.Branch); err != nil {
		return fmt.Errorf("branch: %w", err)
	}
	if t.PhysicalRef == "" || !utf8.ValidString(t.PhysicalRef) {
		return fmt.Errorf("the physical-ref token must be non-empty UTF-8")
	}
	return nil
}

// PinDigest is the SHA-256 over the target's canonical encoding:
//
//	lp("retain/ogcp/v1") ‖ lp(kind)
//	  ‖ [lp(table_id) ‖ u64(incarnation)]        table pins only
//	  ‖ lp(path) ‖ lp(branch) ‖ u64(version) ‖ lp(physical_ref)
//
// where kind is "m" or "t", lp(s) is the byte length of s as a big-endian
// uint64 followed by the bytes of s, and u64(n) is n as a big-endian uint64.
// Length prefixes make the encoding injective: no two different targets
// encode to the same bytes. For a registry pin tableID must be "" and
// incarnation 0.
func PinDigest(kind PinKind, tableID ID, incarnation uint64, t Target) [sha256.Size]byte {
	var b []byte
	lp := func(s string) {
		b = binary.BigEndian.AppendUint64(b, uint64(len(s)))
		b = append(b, s...)
	}
	lp(digestDomain)
	lp(string([]byte{byte(kind)}))
	if kind == PinTable {
		lp(string(tableID))
		b = binary.BigEndian.AppendUint64(b, incarnation)
	}
	lp(t.Path)
	lp(t.Branch)
	b = binary.BigEndian.AppendUint64(b, t.Version)
	lp(t.PhysicalRef)
	return sha256.Sum256(b)
}

func pinTagName(id ID, kind PinKind, digest [sha256.Size]byte) string {
	return tagVersionPrefix + string(id) + "_" + string([]byte{byte(kind)}) + "_" + hex.EncodeToString(digest[:])
}

// RegistryPinTag names the tag that pins, for checkpoint id, the registry
// version described by t (use RegistryTarget(ref) for a registry Ref).
func RegistryPinTag(id ID, t Target) (string, error) {
	if err := id.Validate(); err != nil {
		return "", err
	}
	if err := t.check(); err != nil {
		return "", errorf("registry-pin-tag", string(id), ErrInvalidSnapshot, "%v", err)
	}
	return pinTagName(id, PinRegistry, PinDigest(PinRegistry, "", 0, t)), nil
}

// TablePinTag names the tag that pins, for checkpoint id, the table version
// p describes.
func TablePinTag(id ID, p Pin) (string, error) {
	if err := id.Validate(); err != nil {
		return "", err
	}
	if err := p.TableID.Validate(); err != nil {
		return "", err
	}
	if p.Incarnation == 0 {
		return "", errorf("table-pin-tag", string(id), ErrInvalidSnapshot, "incarnations start at 1")
	}
	if err := p.Target.check(); err != nil {
		return "", errorf("table-pin-tag", string(id), ErrInvalidSnapshot, "%v", err)
	}
	return pinTagName(id, PinTable, PinDigest(PinTable, p.TableID, p.Incarnation, p.Target)), nil
}

// IsReservedTag reports whether a Lance tag name is in retain's reserved
// namespace ("ogcp_"): user commands must refuse to create, move or delete
// such a tag, whether or not it parses as a v1 pin tag. Case-sensitive, as
// Lance tag names are.
func IsReservedTag(name string) bool { return strings.HasPrefix(name, TagPrefix) }

// LeaseTagPrefix starts the reserved tags of reader leases (package
// lease): a lease is a Lance tag ogcp_lease_<id> whose metadata says when
// it expires. Reconcile and recover pass them by: they pin for a reader,
// not for a checkpoint, and no registry record explains them.
const LeaseTagPrefix = TagPrefix + "lease_"

// IsLeaseTag reports whether a tag name is a reader lease's.
func IsLeaseTag(name string) bool { return strings.HasPrefix(name, LeaseTagPrefix) }

// LeaseTagName is the tag of lease id.
func LeaseTagName(id ID) string { return LeaseTagPrefix + string(id) }

// PinTag is a parsed pin tag name.
type PinTag struct {
	CheckpointID ID
	Kind         PinKind
	Digest       string // 64 lower-case hex digits
}

// ParsePinTag reads a v1 pin tag name back. A name that does not parse is
// an *Error matching ErrInvalidSnapshot (storage.ErrInvalidArgument). A tag
// with the reserved prefix that does not parse was not written by this
// scheme: reconcile should report it rather than delete it.
func ParsePinTag(name string) (PinTag, error) {
	bad := func(format string, args ...any) (PinTag, error) {
		return PinTag{}, errorf("parse-pin-tag", name, ErrInvalidSnapshot, format, args...)
	}
	rest, ok := strings.CutPrefix(name, tagVersionPrefix)
	if !ok {
		return bad("a v1 pin tag begins with %q", tagVersionPrefix)
	}
	if len(name) != TagNameLen {
		return bad("a v1 pin tag is %d bytes, this one is %d", TagNameLen, len(name))
	}
	id, rest := ID(rest[:IDLen]), rest[IDLen:]
	if err := id.Validate(); err != nil {
		return bad("the checkpoint id part: %v", err)
	}
	if rest[0] != '_' || rest[2] != '_' || (rest[1] != byte(PinRegistry) && rest[1] != byte(PinTable)) {
		return bad("expected _m_ or _t_ after the checkpoint id")
	}
	digest := rest[3:]
	if _, err := hex.DecodeString(digest); err != nil || strings.ToLower(digest) != digest {
		return bad("the digest part is not 64 lower-case hex digits")
	}
	return PinTag{CheckpointID: id, Kind: PinKind(rest[1]), Digest: digest}, nil
}

// PinTagPrefix is the prefix every pin tag of checkpoint id begins with
// ("ogcp_v1_<id>_"): a tag listing filtered by it finds all of them, and
// PinTagPrefix(id)+"m_" its registry pin, whatever the pinned version's Ref.
func PinTagPrefix(id ID) string { return tagVersionPrefix + string(id) + "_" }

// TablePinTags names the table pin tags of c, one per row, in row order
// (by table id).
func (c Checkpoint) TablePinTags() ([]string, error) {
	out := make([]string, 0, len(c.Rows))
	for _, r := range c.Rows {
		name, err := TablePinTag(c.ID, r.Pin)
		if err != nil {
			return nil, err
		}
		out = append(out, name)
	}
	return out, nil
}
