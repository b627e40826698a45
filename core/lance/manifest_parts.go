package lance

// Parsing a manifest's parts: base paths, fragments, files, indices, protobuf fields.

import (
	"encoding/hex"

	"google.golang.org/protobuf/encoding/protowire"
)

func parseBasePath(b []byte) (BasePath, error) {
	var bp BasePath
	err := walk(b, "BasePath", func(num protowire.Number, f field) error {
		switch num {
		case 1:
			v, err := f.varint()
			if v > 1<<32-1 {
				return corrupt("base path id %d overflows uint32", v)
			}
			bp.ID = uint32(v)
			return err
		case 2:
			v, err := f.bytes()
			bp.Name = string(v)
			return err
		case 3:
			v, err := f.varint()
			bp.IsDatasetRoot = v != 0
			return err
		case 4:
			v, err := f.bytes()
			bp.Path = string(v)
			return err
		}
		return nil
	})
	if err == nil && bp.Path == "" {
		err = corrupt("base path %d has no path", bp.ID)
	}
	return bp, err
}

func parseFragment(b []byte) (Fragment, error) {
	var fr Fragment
	err := walk(b, "DataFragment", func(num protowire.Number, f field) error {
		switch num {
		case 1:
			v, err := f.varint()
			fr.ID = v
			return err
		case 2:
			v, err := f.bytes()
			if err != nil {
				return err
			}
			df, err := parseDataFile(v)
			fr.Files = append(fr.Files, df)
			return err
		case 3:
			v, err := f.bytes()
			if err != nil {
				return err
			}
			if fr.Deletion == nil {
				fr.Deletion = &DeletionFile{}
			}
			// A repeated singular message merges, as protobuf specifies.
			return parseDeletionFile(v, fr.Deletion)
		case 4:
			v, err := f.varint()
			fr.PhysicalRows = v
			return err
		case 6, 8, 10:
			v, err := f.bytes()
			if err != nil {
				return err
			}
			ef, err := parseExternalFile(v)
			fr.External = append(fr.External, ef)
			return err
		case 11:
			v, err := f.bytes()
			if err != nil {
				return err
			}
			var df *DataFile
			err = walk(v, "DataOverlayFile", func(num protowire.Number, f field) error {
				if num != 1 {
					return nil
				}
				v, err := f.bytes()
				if err != nil {
					return err
				}
				d, err := parseDataFile(v)
				df = &d
				return err
			})
			if err != nil {
				return err
			}
			if df == nil {
				return corrupt("an overlay of fragment %d has no data file", fr.ID)
			}
			fr.Overlays = append(fr.Overlays, *df)
			return nil
		}
		return nil
	})
	if err != nil {
		return fr, err
	}
	if fr.Deletion != nil && fr.Deletion.Type > 1 {
		return fr, corrupt("fragment %d has a deletion file of unknown type %d", fr.ID, fr.Deletion.Type)
	}
	return fr, nil
}

func parseDataFile(b []byte) (DataFile, error) {
	var df DataFile
	err := walk(b, "DataFile", func(num protowire.Number, f field) error {
		switch num {
		case 1:
			v, err := f.bytes()
			df.Path = string(v)
			return err
		case 6:
			v, err := f.varint()
			df.Size = v
			return err
		case 7:
			v, err := f.uint32()
			df.BaseID = &v
			return err
		}
		return nil
	})
	if err == nil && df.Path == "" {
		err = corrupt("a data file has no path")
	}
	return df, err
}

func parseDeletionFile(b []byte, del *DeletionFile) error {
	return walk(b, "DeletionFile", func(num protowire.Number, f field) error {
		switch num {
		case 1:
			v, err := f.varint()
			del.Type = uint32(min(v, 1<<32-1))
			return err
		case 2:
			v, err := f.varint()
			del.ReadVersion = v
			return err
		case 3:
			v, err := f.varint()
			del.ID = v
			return err
		case 4:
			v, err := f.varint()
			del.NumDeleted = v
			return err
		case 7:
			v, err := f.uint32()
			del.BaseID = &v
			return err
		}
		return nil
	})
}

func parseExternalFile(b []byte) (ExternalFile, error) {
	var ef ExternalFile
	err := walk(b, "ExternalFile", func(num protowire.Number, f field) error {
		switch num {
		case 1:
			v, err := f.bytes()
			ef.Path = string(v)
			return err
		case 2:
			v, err := f.varint()
			ef.Offset = v
			return err
		case 3:
			v, err := f.varint()
			ef.Size = v
			return err
		}
		return nil
	})
	if err == nil && ef.Path == "" {
		err = corrupt("an external file has no path")
	}
	return ef, err
}

func parseIndexSection(b []byte) ([]Index, error) {
	var out []Index
	err := walk(b, "IndexSection", func(num protowire.Number, f field) error {
		if num != 1 {
			return nil
		}
		v, err := f.bytes()
		if err != nil {
			return err
		}
		ix, err := parseIndex(v)
		out = append(out, ix)
		return err
	})
	return out, err
}

func parseIndex(b []byte) (Index, error) {
	var ix Index
	var uuid []byte
	haveUUID := false
	err := walk(b, "IndexMetadata", func(num protowire.Number, f field) error {
		switch num {
		case 1:
			v, err := f.bytes()
			if err != nil {
				return err
			}
			haveUUID = true
			return walk(v, "UUID", func(num protowire.Number, f field) error {
				if num == 1 {
					u, err := f.bytes()
					uuid = u
					return err
				}
				return nil
			})
		case 3:
			v, err := f.bytes()
			ix.Name = string(v)
			return err
		case 4:
			v, err := f.varint()
			ix.DatasetVersion = v
			return err
		case 9:
			v, err := f.uint32()
			ix.BaseID = &v
			return err
		case 10:
			v, err := f.bytes()
			if err != nil {
				return err
			}
			var fi IndexFile
			err = walk(v, "IndexFile", func(num protowire.Number, f field) error {
				switch num {
				case 1:
					p, err := f.bytes()
					fi.Path = string(p)
					return err
				case 2:
					s, err := f.varint()
					fi.Size = s
					return err
				}
				return nil
			})
			if err == nil && fi.Path == "" {
				err = corrupt("a file of index %q has no path", ix.Name)
			}
			ix.Files = append(ix.Files, fi)
			return err
		}
		return nil
	})
	if err != nil {
		return ix, err
	}
	if !haveUUID || len(uuid) != 16 {
		return ix, corrupt("index %q has a uuid of %d bytes, not 16", ix.Name, len(uuid))
	}
	ix.UUID = formatUUID(uuid)
	return ix, nil
}

// formatUUID renders 16 bytes as Lance names index folders: lowercase,
// hyphenated 8-4-4-4-12.
func formatUUID(u []byte) string {
	h := hex.EncodeToString(u)
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// field is one protobuf field value as found on the wire.
type field struct {
	msg string
	num protowire.Number
	typ protowire.Type
	v   uint64
	b   []byte
}

func (f field) varint() (uint64, error) {
	if f.typ != protowire.VarintType {
		return 0, corrupt("%s field %d has wire type %d, want varint", f.msg, f.num, f.typ)
	}
	return f.v, nil
}

func (f field) uint32() (uint32, error) {
	v, err := f.varint()
	if err == nil && v > 1<<32-1 {
		return 0, corrupt("%s field %d value %d overflows uint32", f.msg, f.num, v)
	}
	return uint32(v), err
}

func (f field) bytes() ([]byte, error) {
	if f.typ != protowire.BytesType {
		return nil, corrupt("%s field %d has wire type %d, want length-delimited", f.msg, f.num, f.typ)
	}
	return f.b, nil
}

// walk calls fn for each field of the protobuf message b, refusing
// malformed wire data. Values of unknown fields are skipped.
func walk(b []byte, msg string, fn func(protowire.Number, field) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return corrupt("%s: bad field tag: %v", msg, protowire.ParseError(n))
		}
		b = b[n:]
		f := field{msg: msg, num: num, typ: typ}
		switch typ {
		case protowire.VarintType:
			f.v, n = protowire.ConsumeVarint(b)
		case protowire.BytesType:
			f.b, n = protowire.ConsumeBytes(b)
		case protowire.Fixed32Type:
			var v uint32
			v, n = protowire.ConsumeFixed32(b)
			f.v = uint64(v)
		case protowire.Fixed64Type:
			f.v, n = protowire.ConsumeFixed64(b)
		default:
			// Groups are not used by Lance; skip them as data if well formed.
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return corrupt("%s field %d: %v", msg, num, protowire.ParseError(n))
		}
		b = b[n:]
		if err := fn(num, f); err != nil {
			return err
		}
	}
	return nil
}
