package lance

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"
)

// A Lance transaction (protos/transaction.proto) is what one commit
// changed: version N's manifest is version N-1's with the transaction
// applied (Transaction::build_manifest in rust/lance/src/dataset/
// transaction.rs). Cleanup planning reads it instead of a removed
// version's full manifest, whose size grows with the table's history.
//
// Only the operations whose effect on the files is fully understood are
// parsed into a txnOp; anything else — an operation this file does not
// model (Overwrite, Merge, Project, Restore, DataReplacement, Clone,
// UpdateBases, UpdateMemWalState, blob operations, anything new), an
// unknown field, a file under another base path — makes the transaction
// unusable, and the planner reads that version's manifest instead.

// txnKind is a modelled operation.
type txnKind uint8

const (
	txnAppend txnKind = iota + 1
	txnDelete
	txnCreateIndex
	txnRewrite
	txnReserveFragments
	txnUpdate
	txnUpdateConfig
)

func (k txnKind) String() string {
	switch k {
	case txnAppend:
		return "Append"
	case txnDelete:
		return "Delete"
	case txnCreateIndex:
		return "CreateIndex"
	case txnRewrite:
		return "Rewrite"
	case txnReserveFragments:
		return "ReserveFragments"
	case txnUpdate:
		return "Update"
	case txnUpdateConfig:
		return "UpdateConfig"
	}
	return fmt.Sprintf("txnKind(%d)", uint8(k))
}

// txnOp is one parsed transaction.
type txnOp struct {
	readVersion uint64
	uuid        string
	kind        txnKind
	// newFrags: Append's fragments, Update's new fragments (ids assigned
	// at commit when 0). updated: fragments replaced by id (Delete,
	// Update). removedIDs: fragments dropped (Delete, Update).
	newFrags   []Fragment
	updated    []Fragment
	removedIDs []uint64
	// groups: Rewrite's old fragment ids and new fragments.
	groups []rewriteGroup
	// Index changes: CreateIndex's new and removed indices, Rewrite's
	// renamed ones (old uuid -> new uuid).
	newIndexes     []Index
	removedIndexes []Index
	renamed        [][2]string
	reserve        uint64
}

type rewriteGroup struct {
	oldIDs []uint64
	frags  []Fragment
}

// errTxnUnusable marks a transaction the planner does not replay.
type errTxnUnusable struct{ why string }

func (e *errTxnUnusable) Error() string { return "transaction not replayable: " + e.why }

func unusable(format string, args ...any) error {
	return &errTxnUnusable{fmt.Sprintf(format, args...)}
}

// parseTxn parses a transaction file's bytes. Malformed wire data is
// ErrCorruptManifest; a well-formed transaction the planner does not model
// is *errTxnUnusable. Either way the caller reads the manifest instead.
func parseTxn(b []byte) (*txnOp, error) {
	op := &txnOp{}
	ops := 0
	err := walk(b, "Transaction", func(num protowire.Number, f field) error {
		switch num {
		case 1:
			v, err := f.varint()
			op.readVersion = v
			return err
		case 2:
			v, err := f.bytes()
			op.uuid = string(v)
			return err
		case 3, 4: // tag, transaction_properties: no files
			return nil
		}
		ops++
		v, err := f.bytes()
		if err != nil {
			return err
		}
		switch num {
		case 100:
			op.kind = txnAppend
			return walk(v, "Append", func(num protowire.Number, f field) error {
				if num != 1 {
					return unusable("Append field %d", num)
				}
				return addFragment(f, &op.newFrags)
			})
		case 101:
			op.kind = txnDelete
			return walk(v, "Delete", func(num protowire.Number, f field) error {
				switch num {
				case 1:
					return addFragment(f, &op.updated)
				case 2:
					return addIDs(f, &op.removedIDs)
				case 3:
					return nil
				}
				return unusable("Delete field %d", num)
			})
		case 103:
			op.kind = txnCreateIndex
			return walk(v, "CreateIndex", func(num protowire.Number, f field) error {
				if num != 1 && num != 2 {
					return unusable("CreateIndex field %d", num)
				}
				b, err := f.bytes()
				if err != nil {
					return err
				}
				ix, err := parseIndex(b)
				if err != nil {
					return err
				}
				if num == 1 {
					op.newIndexes = append(op.newIndexes, ix)
				} else {
					op.removedIndexes = append(op.removedIndexes, ix)
				}
				return nil
			})
		case 104:
			op.kind = txnRewrite
			return parseRewrite(v, op)
		case 107:
			op.kind = txnReserveFragments
			return walk(v, "ReserveFragments", func(num protowire.Number, f field) error {
				if num != 1 {
					return unusable("ReserveFragments field %d", num)
				}
				n, err := f.varint()
				op.reserve = n
				return err
			})
		case 108:
			op.kind = txnUpdate
			return walk(v, "Update", func(num protowire.Number, f field) error {
				switch num {
				case 1:
					return addIDs(f, &op.removedIDs)
				case 2:
					return addFragment(f, &op.updated)
				case 3:
					return addFragment(f, &op.newFrags)
				case 4, 6, 7: // fields modified, fields for bitmaps, mode: no files
					return nil
				}
				// 5: a MemWAL to mark merged changes an index.
				return unusable("Update field %d", num)
			})
		case 110:
			// Config, table, schema and field metadata only.
			op.kind = txnUpdateConfig
			return nil
		}
		return unusable("operation field %d", num)
	})
	if err != nil {
		return nil, err
	}
	if ops != 1 || op.kind == 0 {
		return nil, unusable("%d operations", ops)
	}
	if op.uuid == "" {
		return nil, unusable("no uuid")
	}
	for _, frs := range [][]Fragment{op.newFrags, op.updated} {
		if err := txnFragsLocal(frs); err != nil {
			return nil, err
		}
	}
	for _, g := range op.groups {
		if err := txnFragsLocal(g.frags); err != nil {
			return nil, err
		}
	}
	for _, ix := range op.newIndexes {
		if ix.BaseID != nil {
			return nil, unusable("index %s under base path %d", ix.UUID, *ix.BaseID)
		}
	}
	return op, nil
}

// txnFragsLocal refuses fragments with files under another base path: the
// transaction does not carry the base paths they resolve against.
func txnFragsLocal(frs []Fragment) error {
	for _, fr := range frs {
		for _, f := range append(append([]DataFile(nil), fr.Files...), fr.Overlays...) {
			if f.BaseID != nil {
				return unusable("fragment %d file %s under base path %d", fr.ID, f.Path, *f.BaseID)
			}
		}
		if fr.Deletion != nil && fr.Deletion.BaseID != nil {
			return unusable("fragment %d deletion file under base path %d", fr.ID, *fr.Deletion.BaseID)
		}
	}
	return nil
}

func parseRewrite(b []byte, op *txnOp) error {
	var legacy rewriteGroup
	err := walk(b, "Rewrite", func(num protowire.Number, f field) error {
		switch num {
		case 1, 2:
			// Deprecated top-level lists: one group (Lance's conversion).
			var frs []Fragment
			if err := addFragment(f, &frs); err != nil {
				return err
			}
			if num == 1 {
				legacy.oldIDs = append(legacy.oldIDs, frs[0].ID)
			} else {
				legacy.frags = append(legacy.frags, frs[0])
			}
			return nil
		case 3:
			v, err := f.bytes()
			if err != nil {
				return err
			}
			var g rewriteGroup
			err = walk(v, "RewriteGroup", func(num protowire.Number, f field) error {
				switch num {
				case 1:
					var frs []Fragment
					if err := addFragment(f, &frs); err != nil {
						return err
					}
					g.oldIDs = append(g.oldIDs, frs[0].ID)
					return nil
				case 2:
					return addFragment(f, &g.frags)
				}
				return unusable("RewriteGroup field %d", num)
			})
			op.groups = append(op.groups, g)
			return err
		case 4:
			v, err := f.bytes()
			if err != nil {
				return err
			}
			var ids [2]string
			err = walk(v, "RewrittenIndex", func(num protowire.Number, f field) error {
				switch num {
				case 1, 2:
					u, err := f.bytes()
					if err != nil {
						return err
					}
					var raw []byte
					if err := walk(u, "UUID", func(num protowire.Number, f field) error {
						var e error
						if num == 1 {
							raw, e = f.bytes()
						}
						return e
					}); err != nil {
						return err
					}
					if len(raw) != 16 {
						return corrupt("a rewritten index uuid of %d bytes", len(raw))
					}
					ids[num-1] = formatUUID(raw)
				}
				return nil // details and version: no files
			})
			if err == nil && (ids[0] == "" || ids[1] == "") {
				err = corrupt("a rewritten index without both uuids")
			}
			op.renamed = append(op.renamed, ids)
			return err
		}
		// A fragment-reuse index (5) and anything newer.
		return unusable("Rewrite field %d", num)
	})
	if err != nil {
		return err
	}
	if len(legacy.oldIDs)+len(legacy.frags) > 0 {
		if len(op.groups) > 0 {
			return unusable("a rewrite with both groups and top-level fragments")
		}
		op.groups = []rewriteGroup{legacy}
	}
	return nil
}

func addFragment(f field, out *[]Fragment) error {
	v, err := f.bytes()
	if err != nil {
		return err
	}
	fr, err := parseFragment(v)
	if err != nil {
		return err
	}
	*out = append(*out, fr)
	return nil
}

// addIDs reads a repeated uint64, packed or not.
func addIDs(f field, out *[]uint64) error {
	if f.typ == protowire.VarintType {
		*out = append(*out, f.v)
		return nil
	}
	b, err := f.bytes()
	if err != nil {
		return err
	}
	for len(b) > 0 {
		v, n := protowire.ConsumeVarint(b)
		if n < 0 {
			return corrupt("%s field %d: %v", f.msg, f.num, protowire.ParseError(n))
		}
		*out = append(*out, v)
		b = b[n:]
	}
	return nil
}

// txnName splits a transaction file name, "{read_version}-{uuid}.txn".
func txnName(name string) (readVersion uint64, uuid string, ok bool) {
	stem, found := strings.CutSuffix(name, ".txn")
	if !found || strings.Contains(stem, "/") {
		return 0, "", false
	}
	rv, u, found := strings.Cut(stem, "-")
	if !found || u == "" {
		return 0, "", false
	}
	n, err := strconv.ParseUint(rv, 10, 64)
	if err != nil || strconv.FormatUint(n, 10) != rv {
		return 0, "", false
	}
	return n, u, true
}

// readTxn reads and parses the transaction file name (under
// _transactions/) and checks that its content is the commit its name
// says: read version and uuid.
func (d *Dataset) readTxn(ctx context.Context, name string) (*txnOp, int64, error) {
	rv, uuid, ok := txnName(name)
	if !ok {
		return nil, 0, unusable("file name %q", name)
	}
	key := d.Key("_transactions/" + name)
	r, err := d.Store.Get(ctx, key)
	if err != nil {
		return nil, 0, err
	}
	defer r.Close()
	if r.Info.Size > maxManifestSize {
		return nil, 0, unusable("%s has %d bytes", key, r.Info.Size)
	}
	b := make([]byte, r.Info.Size)
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, 0, err
	}
	return parseTxnFile(key, rv, uuid, b)
}

// parseTxnFile parses the body of the transaction file at key, named for
// read version rv and uuid, and checks that it is that commit.
func parseTxnFile(key string, rv uint64, uuid string, b []byte) (*txnOp, int64, error) {
	if len(b) > maxManifestSize {
		return nil, int64(len(b)), unusable("%s has %d bytes", key, len(b))
	}
	op, err := parseTxn(b)
	if err != nil {
		return nil, int64(len(b)), err
	}
	if op.readVersion != rv || op.uuid != uuid {
		return nil, int64(len(b)), unusable("%s holds read version %d, uuid %q", key, op.readVersion, op.uuid)
	}
	return op, int64(len(b)), nil
}
