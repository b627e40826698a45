package pluginproto

import (
	"encoding/binary"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/pluginproto/internal/pb"
)

// The packed forms of ListResponse and GetManyResponse (storage.proto has
// the layout): the objects of a page or a batch in one bytes field, where
// Info, GetResult and Timestamp messages cost several allocations each to
// read, a thousand times a page. Keys are the request's (after the prefix
// for a list), so they cross once. The host holds a packed answer to what
// the messages would carry.

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// appendInfo appends an info's size, mod time and version.
func appendInfo(b []byte, i storage.Info) []byte {
	b = binary.AppendVarint(b, i.Size)
	if i.ModTime.IsZero() {
		b = binary.AppendUvarint(b, 0)
	} else {
		b = binary.AppendUvarint(b, 1)
		b = binary.AppendVarint(b, i.ModTime.Unix())
		b = binary.AppendUvarint(b, uint64(i.ModTime.Nanosecond()))
	}
	return appendString(b, i.Version)
}

// packInfos encodes infos as ListResponse.packed: each key without prefix,
// which every one must start with (ok false otherwise: the driver listed a
// key outside the prefix, which the packed form cannot carry).
func packInfos(prefix string, infos []storage.Info) (b []byte, ok bool) {
	n := binary.MaxVarintLen64
	for _, i := range infos {
		n += len(i.Key) - len(prefix) + len(i.Version) + 3*binary.MaxVarintLen64 + 4
	}
	b = make([]byte, 0, n)
	b = binary.AppendUvarint(b, uint64(len(infos)))
	for _, i := range infos {
		rel, found := strings.CutPrefix(i.Key, prefix)
		if !found {
			return nil, false
		}
		b = appendString(b, rel)
		b = appendInfo(b, i)
	}
	return b, true
}

// getPacker builds GetManyResponse.packed and bodies, one result at a
// time. Its buffer starts with room for the count, which take writes in
// front.
type getPacker struct {
	b      []byte
	bodies [][]byte
	count  int
}

func (g *getPacker) start() {
	if g.b == nil {
		g.b = make([]byte, binary.MaxVarintLen64, 16<<10)
	}
}

func (g *getPacker) ok(i storage.Info, data []byte) {
	g.start()
	g.b = binary.AppendUvarint(g.b, 0)
	g.b = appendInfo(g.b, i)
	g.bodies = append(g.bodies, data)
	g.count++
}

func (g *getPacker) fail(d *pb.ErrorDetail) {
	g.start()
	g.b = binary.AppendUvarint(g.b, 1)
	g.b = appendDetail(g.b, d)
	g.count++
}

// appendDetail appends an error: its kind, op, key and message.
func appendDetail(b []byte, d *pb.ErrorDetail) []byte {
	b = binary.AppendUvarint(b, uint64(d.Kind))
	b = appendString(b, d.Op)
	b = appendString(b, d.Key)
	return appendString(b, d.Message)
}

// packDeleteFailures encodes DeleteManyResponse.packed for count keys, of
// which those at idx (increasing) failed with the errors ds.
func packDeleteFailures(count int, idx []int, ds []*pb.ErrorDetail) []byte {
	b := binary.AppendUvarint(nil, uint64(count))
	b = binary.AppendUvarint(b, uint64(len(idx)))
	for j, i := range idx {
		b = binary.AppendUvarint(b, uint64(i))
		b = appendDetail(b, ds[j])
	}
	return b
}

// take returns the packed results and bodies so far and starts again.
// The packed bytes share the buffer: they must be sent (encoded) before
// the next result is added.
func (g *getPacker) take() ([]byte, [][]byte) {
	g.start()
	var cnt [binary.MaxVarintLen64]byte
	n := binary.PutUvarint(cnt[:], uint64(g.count))
	at := binary.MaxVarintLen64 - n
	copy(g.b[at:], cnt[:n])
	out, bodies := g.b[at:], g.bodies
	g.b, g.bodies, g.count = g.b[:binary.MaxVarintLen64], nil, 0
	return out, bodies
}

// unpacker reads a packed form; every read reports whether the bytes held
// it.
type unpacker struct {
	p     []byte
	total int
	what  string
}

func (u *unpacker) bad(what string) error {
	return fmt.Errorf("%s: %s at byte %d of %d", u.what, what, u.total-len(u.p), u.total)
}

func (u *unpacker) uvarint() (uint64, bool) {
	v, n := binary.Uvarint(u.p)
	if n <= 0 {
		return 0, false
	}
	u.p = u.p[n:]
	return v, true
}

func (u *unpacker) varint() (int64, bool) {
	v, n := binary.Varint(u.p)
	if n <= 0 {
		return 0, false
	}
	u.p = u.p[n:]
	return v, true
}

func (u *unpacker) bytes() ([]byte, bool) {
	n, ok := u.uvarint()
	if !ok || n > uint64(len(u.p)) {
		return nil, false
	}
	b := u.p[:n:n]
	u.p = u.p[n:]
	return b, true
}

// count reads the object count, refused if the bytes cannot hold that many
// objects of at least min bytes each (before anything is allocated for
// them), or if it is over most.
func (u *unpacker) count(min, most int) (int, error) {
	n, ok := u.uvarint()
	if !ok || n > uint64(len(u.p)/min) || n > uint64(most) {
		return 0, u.bad("a bad count")
	}
	return int(n), nil
}

// info reads an info's size and mod time into i and returns its version.
func (u *unpacker) info(i *storage.Info) ([]byte, error) {
	var ok bool
	if i.Size, ok = u.varint(); !ok {
		return nil, u.bad("a size cut short")
	}
	switch has, ok := u.uvarint(); {
	case !ok || has > 1:
		return nil, u.bad("a bad mod time mark")
	case has == 1:
		sec, ok := u.varint()
		nsec, ok2 := u.uvarint()
		if !ok || !ok2 || nsec >= 1e9 {
			return nil, u.bad("a bad mod time")
		}
		// As infoFromPB reads a Timestamp: in local time.
		i.ModTime = time.Unix(sec, int64(nsec))
	}
	v, ok := u.bytes()
	if !ok {
		return nil, u.bad("a version cut short")
	}
	return v, nil
}

// detail reads an error as appendDetail wrote it.
func (u *unpacker) detail() (*storage.Error, error) {
	kind, ok := u.uvarint()
	op, ok2 := u.bytes()
	key, ok3 := u.bytes()
	msg, ok4 := u.bytes()
	if !ok || !ok2 || !ok3 || !ok4 || kind > 255 {
		return nil, u.bad("an error cut short")
	}
	return fromDetail(&pb.ErrorDetail{Kind: uint32(kind), Op: text2(op), Key: text2(key), Message: text2(msg)}, 0), nil
}

// unpackDeleteResults decodes DeleteManyResponse.packed: one result for
// each of keys, which the count must match, the failures at increasing
// indexes below it.
func unpackDeleteResults(keys []string, p []byte) ([]storage.DeleteResult, error) {
	u := &unpacker{p: p, total: len(p), what: "packed delete results"}
	count, ok := u.uvarint()
	if !ok || count != uint64(len(keys)) {
		return nil, fmt.Errorf("packed delete results: %d results for %d keys", count, len(keys))
	}
	// A failure takes at least 5 bytes.
	fails, err := u.count(5, len(keys))
	if err != nil {
		return nil, err
	}
	out := make([]storage.DeleteResult, len(keys))
	for i, k := range keys {
		out[i].Key = k
	}
	next := uint64(0) // the lowest index the next failure may have
	for range fails {
		i, ok := u.uvarint()
		if !ok || i < next || i >= count {
			return nil, u.bad("a failure's index out of order or range")
		}
		if out[i].Err, err = u.detail(); err != nil {
			return nil, err
		}
		next = i + 1
	}
	if len(u.p) > 0 {
		return nil, u.bad("bytes after the last failure")
	}
	return out, nil
}

// unpackInfos decodes ListResponse.packed, each key with prefix put back.
// A key must be valid UTF-8 (a proto string is). The keys and versions are
// substrings of one string, so a page costs a few allocations however long
// it is.
func unpackInfos(prefix string, p []byte) ([]storage.Info, error) {
	u := &unpacker{p: p, total: len(p), what: "packed list"}
	// An object takes at least 4 bytes.
	count, err := u.count(4, len(p))
	if err != nil {
		return nil, err
	}
	out := make([]storage.Info, count)
	type span struct{ key, keyEnd, verEnd int }
	spans := make([]span, count)
	text := make([]byte, 0, len(u.p)+count*len(prefix))
	for j := range out {
		rel, ok := u.bytes()
		if !ok {
			return nil, u.bad("a key cut short")
		}
		sp := &spans[j]
		sp.key = len(text)
		text = append(append(text, prefix...), rel...)
		sp.keyEnd = len(text)
		if !utf8.Valid(text[sp.key:sp.keyEnd]) {
			return nil, fmt.Errorf("packed list: key %q is not valid UTF-8", text[sp.key:sp.keyEnd])
		}
		v, err := u.info(&out[j])
		if err != nil {
			return nil, err
		}
		text = append(text, v...)
		sp.verEnd = len(text)
	}
	if len(u.p) > 0 {
		return nil, u.bad("bytes after the last object")
	}
	s := string(text)
	for j, sp := range spans {
		out[j].Key, out[j].Version = s[sp.key:sp.keyEnd], s[sp.keyEnd:sp.verEnd]
	}
	return out, nil
}

// unpackGetResults decodes GetManyResponse.packed and bodies: the results
// for keys, in order, as many as it counts (at most len(keys)), a body for
// each that is not an error.
func unpackGetResults(keys []string, p []byte, bodies [][]byte) ([]storage.GetResult, error) {
	u := &unpacker{p: p, total: len(p), what: "packed batch"}
	// A result takes at least 4 bytes (an info with no mod time).
	count, err := u.count(4, len(keys))
	if err != nil {
		return nil, err
	}
	out := make([]storage.GetResult, count)
	vers := make([]int, count) // where each version ends in text
	var text []byte
	for j := range out {
		r := &out[j]
		r.Key = keys[j]
		switch tag, ok := u.uvarint(); {
		case ok && tag == 0:
			v, err := u.info(&r.Info)
			if err != nil {
				return nil, err
			}
			r.Info.Key = keys[j]
			if len(bodies) == 0 {
				return nil, u.bad("fewer bodies than results")
			}
			r.Data, bodies = bodies[0], bodies[1:]
			if r.Data == nil {
				r.Data = []byte{} // an empty body is a body
			}
			text = append(text, v...)
		case ok && tag == 1:
			if r.Err, err = u.detail(); err != nil {
				return nil, err
			}
		default:
			return nil, u.bad("a bad result mark")
		}
		vers[j] = len(text)
	}
	if len(u.p) > 0 {
		return nil, u.bad("bytes after the last result")
	}
	if len(bodies) > 0 {
		return nil, fmt.Errorf("packed batch: %d bodies more than results", len(bodies))
	}
	s := string(text)
	at := 0
	for j := range out {
		if out[j].Err == nil {
			out[j].Info.Version = s[at:vers[j]]
		}
		at = vers[j]
	}
	return out, nil
}

// text2 is text of bytes: what a proto string field could have carried.
func text2(b []byte) string { return strings.ToValidUTF8(string(b), "\uFFFD") }
