package lance

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/retain-dev/retain/core/storage"
)

// Typed refusals of the manifest reader.
var (
	// ErrCorruptManifest: a manifest whose footer, sections or protobuf
	// fields do not hold together. Nothing it says can be trusted, so
	// nothing it might reference may be deleted.
	ErrCorruptManifest = errors.New("corrupt Lance manifest")
	// ErrUnknownFeature: a manifest sets a reader or writer feature flag
	// this package does not know. An unknown feature may reference files in
	// ways retain cannot see, so the dataset is refused, as Lance does.
	ErrUnknownFeature = errors.New("unknown Lance feature flag")
)

// FeatureFlags is Lance's reader/writer feature bitmap (Manifest fields 9
// and 10). Bit values as in lance-table's feature_flags.rs for Lance 12.
type FeatureFlags uint64

const (
	FeatureDeletionFiles         FeatureFlags = 1 << 0 // fragments may carry deletion files
	FeatureStableRowIDs          FeatureFlags = 1 << 1 // row-id sequences, possibly in external files
	FeatureV2FormatDeprecated    FeatureFlags = 1 << 2 // no longer written; harmless
	FeatureTableConfig           FeatureFlags = 1 << 3 // config map present
	FeatureBasePaths             FeatureFlags = 1 << 4 // files may live under base_paths
	FeatureNoTransactionFile     FeatureFlags = 1 << 5 // transaction only inline
	FeatureDataOverlays          FeatureFlags = 1 << 6 // fragments carry overlay data files
	FeatureCoveredIndexes        FeatureFlags = 1 << 7 // IndexMetadata.covering_fields (Lance 12)
	FeatureMixedDataFileVersions FeatureFlags = 1 << 8 // per-file data format versions (Lance 12)

	// KnownFeatures is every bit this package understands. None of them
	// adds a kind of file outside what Files enumerates. Lance releases
	// after 12 allocate bits 9 and up (fragment-reuse variants, semantic
	// types); those are refused until understood.
	KnownFeatures FeatureFlags = 1<<9 - 1
)

// Manifest footer constants (lance-file format.rs).
const (
	footerLen     = 16
	manifestMagic = "LANC"
	// manifestMajor.manifestMinor is what Lance 12 writes. Lance never
	// checks it on read (lance-table io/manifest.rs read_manifest checks
	// only the magic and the section length), and LanceDB up to 0.22 wrote
	// 0.1 (lance-table's own constants, before the writer moved to
	// lance-file's in lance#4774), so ParseManifest accepts any pair.
	manifestMajor = 0
	manifestMinor = 2
	// maxManifestSize bounds what ReadManifest loads: manifests of real
	// tables are kilobytes to tens of megabytes.
	maxManifestSize = 1 << 30
)

// Manifest is the part of one Lance version retain needs: what it is, and
// every file it references.
type Manifest struct {
	Version   uint64
	Timestamp time.Time
	// Branch is the branch the version belongs to, "" for main.
	Branch string
	// ReaderFlags and WriterFlags are the feature bitmaps.
	ReaderFlags, WriterFlags FeatureFlags
	// TransactionFile is relative to _transactions/ ("" when none).
	TransactionFile string
	// TransactionUUID identifies the commit that made this version (from
	// the inline transaction section, else the transaction file name).
	TransactionUUID string
	BasePaths       []BasePath
	Fragments       []Fragment
	Indexes         []Index
	// maxFragmentID is max_fragment_id (field 11): the high-water mark
	// new fragment ids continue from; nil when the manifest has none.
	maxFragmentID *uint64

	// Set by Dataset.ReadManifest: the manifest object's key, size, the
	// store's version token of the read and the SHA-256 of its bytes (the
	// commit's identity wherever the object is stored).
	Key           string
	Size          int64
	ObjectVersion string
	SHA256        [sha256.Size]byte
	files         []FileRef
}

// BasePath is another location files of this version may live under
// (Manifest field 18): the parent dataset of a branch, a shallow-clone
// source, or an imported directory.
type BasePath struct {
	ID            uint32
	Name          string
	IsDatasetRoot bool
	// Path is absolute, as Lance addresses it ("/abs/dir", "s3://b/p").
	Path string
}

// Fragment is one DataFragment.
type Fragment struct {
	ID           uint64
	PhysicalRows uint64
	Files        []DataFile
	Overlays     []DataFile
	Deletion     *DeletionFile
	// External holds row-id and row-version sequences stored in files.
	External []ExternalFile
}

// DataFile is a file under data/ (or under a base path).
type DataFile struct {
	// Path is relative to the data directory.
	Path string
	// Size is file_size_bytes, 0 when the manifest does not record it.
	Size   uint64
	BaseID *uint32
}

// DeletionFile names _deletions/{fragment}-{read_version}-{id}.{arrow|bin}.
type DeletionFile struct {
	Type        uint32 // 0 arrow, 1 bitmap (.bin)
	ReadVersion uint64
	ID          uint64
	NumDeleted  uint64
	BaseID      *uint32
}

// ExternalFile is a byte range of a file, path relative to the dataset root.
type ExternalFile struct {
	Path         string
	Offset, Size uint64
}

// Index is one IndexMetadata of the index section.
type Index struct {
	// UUID is lowercase and hyphenated: the folder name under _indices/.
	UUID           string
	Name           string
	DatasetVersion uint64
	BaseID         *uint32
	// Files is the index's own file list, empty when not recorded.
	Files []IndexFile
}

// IndexFile is one file of an index folder.
type IndexFile struct {
	Path string
	Size uint64
}

// Files returns every object this version references, resolved to store
// keys by Dataset.ReadManifest (nil for a manifest from ParseManifest).
func (m *Manifest) Files() []FileRef { return m.files }

// ReadManifest reads and parses the manifest of v and resolves every file it
// references. A manifest that cannot be parsed, sets an unknown feature
// flag, or names another version than its file name is a typed refusal
// naming its key.
func (d *Dataset) ReadManifest(ctx context.Context, v Version) (*Manifest, error) {
	b, info, err := d.readManifestBytes(ctx, v.Key)
	if err != nil {
		return nil, err
	}
	m, err := ParseManifest(b)
	if err != nil {
		if errors.Is(err, ErrCorruptManifest) {
			return nil, fmt.Errorf("%s: %w; retain will not act on this dataset until the manifest is readable", v.Key, err)
		}
		return nil, fmt.Errorf("%s: %w", v.Key, err)
	}
	if m.Version != v.N {
		return nil, fmt.Errorf("%w: %s: the manifest says version %d but its name says %d; retain will not guess which is right",
			ErrCorruptManifest, v.Key, m.Version, v.N)
	}
	m.Key, m.Size, m.ObjectVersion = v.Key, info.Size, info.Version
	m.SHA256 = sha256.Sum256(b)
	files, err := d.resolveFiles(m)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", v.Key, err)
	}
	m.files = files
	return m, nil
}

func (d *Dataset) readManifestBytes(ctx context.Context, key string) ([]byte, storage.Info, error) {
	r, err := d.Store.Get(ctx, key)
	if err != nil {
		return nil, storage.Info{}, err
	}
	defer r.Close()
	if r.Info.Size > maxManifestSize {
		return nil, storage.Info{}, storage.Errorf("lance-manifest", key, storage.ErrLimitExceeded,
			"manifest of %d bytes exceeds the %d-byte limit", r.Info.Size, maxManifestSize)
	}
	b := make([]byte, r.Info.Size)
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, storage.Info{}, storage.Wrap("get", key, storage.ErrUnknown, err)
	}
	return b, r.Info, nil
}

// ParseManifest parses a manifest file's bytes: the 16-byte footer (i64 LE
// offset of the Manifest section, i16 major, i16 minor, "LANC"; the format
// version is not checked, as Lance does not check it: 0.1 and 0.2 hold the
// same protobuf, and new meaning comes with feature flags), the
// length-prefixed Manifest section that must end at the footer, the index
// and transaction sections it points to, and the protobuf fields that name
// files. Unknown protobuf fields are skipped (Lance signals new meaning
// through feature flags, which are checked).
func ParseManifest(b []byte) (*Manifest, error) {
	msg, pos, err := manifestSection(b)
	if err != nil {
		return nil, err
	}
	m, mf, err := parseManifestMessage(msg)
	if err != nil {
		return nil, err
	}
	if err := m.checkHeader(mf); err != nil {
		return nil, err
	}
	ids := make(map[uint32]bool, len(m.BasePaths))
	for _, bp := range m.BasePaths {
		if ids[bp.ID] {
			return nil, corrupt("base path id %d appears twice", bp.ID)
		}
		ids[bp.ID] = true
	}
	m.Fragments = make([]Fragment, 0, len(mf.fragMsgs))
	for _, fm := range mf.fragMsgs {
		fr, err := parseFragment(fm)
		if err != nil {
			return nil, err
		}
		m.Fragments = append(m.Fragments, fr)
	}
	if mf.indexPos != nil {
		sec, err := sectionBefore(b, *mf.indexPos, pos, "index")
		if err != nil {
			return nil, err
		}
		if m.Indexes, err = parseIndexSection(sec); err != nil {
			return nil, err
		}
	}
	if err := m.parseTransaction(b, mf.txnPos, pos); err != nil {
		return nil, err
	}
	if err := m.checkBaseIDs(ids); err != nil {
		return nil, err
	}
	return m, nil
}

// manifestSection checks the footer and returns the Manifest section it
// points to, which must end at the footer, and that section's offset.
func manifestSection(b []byte) ([]byte, int64, error) {
	if len(b) < footerLen+4 {
		return nil, 0, corrupt("%d bytes is too short for a manifest", len(b))
	}
	foot := b[len(b)-footerLen:]
	if string(foot[12:]) != manifestMagic {
		return nil, 0, corrupt("bad magic %q (want %q)", foot[12:], manifestMagic)
	}
	body := len(b) - footerLen
	pos := int64(binary.LittleEndian.Uint64(foot))
	msg, err := section(b[:body], pos, "manifest")
	if err != nil {
		return nil, 0, err
	}
	if int(pos)+4+len(msg) != body {
		return nil, 0, corrupt("the manifest section at %d ends at %d, not at the footer (%d)", pos, int(pos)+4+len(msg), body)
	}
	return msg, pos, nil
}

// manifestFields are the Manifest message's fields that are checked or
// followed after the walk, rather than stored as read.
type manifestFields struct {
	haveTS     bool
	indexPos   *uint64
	txnPos     *uint64
	fragMsgs   [][]byte
	hasVersion bool
	tsSec      int64
	tsNanos    int64
}

// parseManifestMessage walks the Manifest protobuf message.
func parseManifestMessage(msg []byte) (*Manifest, manifestFields, error) {
	m := &Manifest{}
	var mf manifestFields
	err := walk(msg, "Manifest", func(num protowire.Number, f field) error {
		switch num {
		case 2:
			v, err := f.bytes()
			mf.fragMsgs = append(mf.fragMsgs, v)
			return err
		case 3:
			v, err := f.varint()
			m.Version, mf.hasVersion = v, true
			return err
		case 6:
			v, err := f.varint()
			mf.indexPos = &v
			return err
		case 7:
			v, err := f.bytes()
			if err != nil {
				return err
			}
			mf.haveTS = true
			return parseTimestamp(v, &mf.tsSec, &mf.tsNanos)
		case 9:
			v, err := f.varint()
			m.ReaderFlags = FeatureFlags(v)
			return err
		case 10:
			v, err := f.varint()
			m.WriterFlags = FeatureFlags(v)
			return err
		case 11:
			v, err := f.varint()
			m.maxFragmentID = &v
			return err
		case 12:
			v, err := f.bytes()
			m.TransactionFile = string(v)
			return err
		case 18:
			v, err := f.bytes()
			if err != nil {
				return err
			}
			bp, err := parseBasePath(v)
			m.BasePaths = append(m.BasePaths, bp)
			return err
		case 20:
			v, err := f.bytes()
			m.Branch = string(v)
			return err
		case 21:
			v, err := f.varint()
			mf.txnPos = &v
			return err
		}
		return nil
	})
	if err != nil {
		return nil, mf, err
	}
	return m, mf, nil
}

// parseTimestamp walks a protobuf Timestamp message.
func parseTimestamp(b []byte, sec, nanos *int64) error {
	return walk(b, "Timestamp", func(num protowire.Number, f field) error {
		switch num {
		case 1:
			s, err := f.varint()
			*sec = int64(s)
			return err
		case 2:
			n, err := f.varint()
			*nanos = int64(int32(n))
			return err
		}
		return nil
	})
}

// checkHeader checks the version and feature flags and sets the
// timestamp.
func (m *Manifest) checkHeader(mf manifestFields) error {
	if !mf.hasVersion || m.Version == 0 {
		return corrupt("the manifest has no version number")
	}
	if unknown := (m.ReaderFlags | m.WriterFlags) &^ KnownFeatures; unknown != 0 {
		return fmt.Errorf("%w: version %d sets feature bits %#x (reader %#x, writer %#x) that retain does not know; upgrade retain before it manages this dataset",
			ErrUnknownFeature, m.Version, uint64(unknown), uint64(m.ReaderFlags), uint64(m.WriterFlags))
	}
	if (m.ReaderFlags^m.WriterFlags)&FeatureMixedDataFileVersions != 0 {
		// Lance refuses a half-set paired capability as undefined.
		return corrupt("only one of the reader and writer mixed-data-file-version bits is set")
	}
	if mf.haveTS {
		if mf.tsNanos < 0 || mf.tsNanos > 999_999_999 {
			return corrupt("timestamp nanos %d out of range", mf.tsNanos)
		}
		m.Timestamp = time.Unix(mf.tsSec, mf.tsNanos).UTC()
	}
	return nil
}

// parseTransaction reads the commit's uuid from the transaction section,
// if the manifest points to one, else from the transaction file's name.
func (m *Manifest) parseTransaction(b []byte, txnPos *uint64, pos int64) error {
	if txnPos != nil {
		sec, err := sectionBefore(b, *txnPos, pos, "transaction")
		if err != nil {
			return err
		}
		// Transaction field 2 is the commit's uuid.
		if err := walk(sec, "Transaction", func(num protowire.Number, f field) error {
			if num == 2 {
				v, err := f.bytes()
				m.TransactionUUID = string(v)
				return err
			}
			return nil
		}); err != nil {
			return err
		}
	}
	if m.TransactionUUID == "" && m.TransactionFile != "" {
		// "{read_version}-{uuid}.txn"
		name := strings.TrimSuffix(m.TransactionFile, ".txn")
		if i := strings.IndexByte(name, '-'); i >= 0 {
			m.TransactionUUID = name[i+1:]
		}
	}
	return nil
}

// checkBaseIDs refuses a file naming a base path the manifest lacks: Lance
// would fail to read it, and retain could not say where it lives.
func (m *Manifest) checkBaseIDs(ids map[uint32]bool) error {
	check := func(id *uint32, what string) error {
		if id != nil && !ids[*id] {
			return corrupt("%s names base path id %d, which the manifest does not define", what, *id)
		}
		return nil
	}
	for _, fr := range m.Fragments {
		for _, f := range fr.Files {
			if err := check(f.BaseID, "data file "+f.Path); err != nil {
				return err
			}
		}
		for _, f := range fr.Overlays {
			if err := check(f.BaseID, "overlay file "+f.Path); err != nil {
				return err
			}
		}
		if fr.Deletion != nil {
			if err := check(fr.Deletion.BaseID, fmt.Sprintf("the deletion file of fragment %d", fr.ID)); err != nil {
				return err
			}
		}
	}
	for _, ix := range m.Indexes {
		if err := check(ix.BaseID, "index "+ix.UUID); err != nil {
			return err
		}
	}
	return nil
}

func corrupt(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrCorruptManifest, fmt.Sprintf(format, args...))
}

// section returns the message of the u32-LE-length-prefixed section at pos
// within b.
func section(b []byte, pos int64, what string) ([]byte, error) {
	if pos < 0 || pos > int64(len(b))-4 {
		return nil, corrupt("the %s section offset %d is outside the file's %d body bytes", what, pos, len(b))
	}
	n := int64(binary.LittleEndian.Uint32(b[pos:]))
	if n > int64(len(b))-pos-4 {
		return nil, corrupt("the %s section at %d claims %d bytes; only %d follow", what, pos, n, int64(len(b))-pos-4)
	}
	return b[pos+4 : pos+4+n], nil
}

// sectionBefore returns a section that must lie wholly before the Manifest
// section at limit.
func sectionBefore(b []byte, pos uint64, limit int64, what string) ([]byte, error) {
	if pos > uint64(limit) {
		return nil, corrupt("the %s section offset %d is not before the manifest section at %d", what, pos, limit)
	}
	return section(b[:limit], int64(pos), what)
}
