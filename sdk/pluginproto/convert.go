package pluginproto

import (
	"encoding/binary"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/retain-dev/retain/sdk/core"
	"github.com/retain-dev/retain/sdk/pluginproto/internal/pb"
)

func infoToPB(i core.Info) *pb.Info {
	p := &pb.Info{Key: i.Key, Size: i.Size, Version: []byte(i.Version)}
	if !i.ModTime.IsZero() {
		p.ModTime = timestamppb.New(i.ModTime)
	}
	return p
}

func infoFromPB(p *pb.Info) core.Info {
	if p == nil {
		return core.Info{}
	}
	i := core.Info{Key: p.Key, Size: p.Size, Version: string(p.Version)}
	if p.ModTime != nil {
		i.ModTime = p.ModTime.AsTime().In(time.Local)
	}
	return i
}

func locationToPB(l core.Location) *pb.Location {
	return &pb.Location{Scheme: l.Scheme, Path: l.Path, Bucket: l.Bucket, Prefix: l.Prefix, Options: l.Options, ReadOnly: l.ReadOnly}
}

func locationFromPB(p *pb.Location) core.Location {
	if p == nil {
		return core.Location{}
	}
	l := core.Location{Scheme: p.Scheme, Path: p.Path, Bucket: p.Bucket, Prefix: p.Prefix, ReadOnly: p.ReadOnly}
	if len(p.Options) > 0 {
		l.Options = p.Options
	}
	return l
}

// text makes s fit a proto string (UTF-8) for a field meant for people.
func text(s string) string { return strings.ToValidUTF8(s, "\uFFFD") }

func capabilityToPB(c core.Capability) *pb.Capability {
	return &pb.Capability{Level: uint32(c.Level), Gate: text(c.Gate), Scope: uint32(c.Scope), Reason: text(c.Reason)}
}

func capabilityFromPB(p *pb.Capability) core.Capability {
	if p == nil {
		return core.Capability{}
	}
	return core.Capability{Level: level(p.Level), Gate: p.Gate, Scope: scope(p.Scope), Reason: p.Reason}
}

// level and scope read values off the wire. One this build does not know
// could only promise more than it can check, so it counts as none.
func level(v uint32) core.Level {
	if l := core.Level(v); v <= uint32(core.LevelNative) {
		return l
	}
	return core.LevelNone
}

func scope(v uint32) core.Scope {
	if s := core.Scope(v); v <= uint32(core.ScopeGlobal) {
		return s
	}
	return core.ScopeNone
}

func capsToPB(c core.Capabilities) *pb.CapabilitiesResponse {
	p := &pb.CapabilitiesResponse{
		CreateIfAbsent:   capabilityToPB(c.CreateIfAbsent),
		ReplaceIfVersion: capabilityToPB(c.ReplaceIfVersion),
		DeleteIfVersion:  capabilityToPB(c.DeleteIfVersion),
		Limits: &pb.Limits{
			MaxObjectSize:  c.Limits.MaxObjectSize,
			MaxDeleteBatch: int64(c.Limits.MaxDeleteBatch),
			MaxListPage:    int64(c.Limits.MaxListPage),
			Parallelism:    int64(c.Limits.Parallelism),
		},
		OrderedList:    c.OrderedList,
		ListAfterWrite: c.ListAfterWrite,
		ListDelimiter:  c.ListDelimiter,
		UniqueVersions: c.UniqueVersions,
		ReadOnly:       c.ReadOnly,
	}
	for _, n := range c.Notes {
		p.Notes = append(p.Notes, text(n))
	}
	for _, g := range c.Gates {
		p.Gates = append(p.Gates, &pb.GateSpec{Name: text(g.Name), Scope: uint32(g.Scope), Covers: text(g.Covers)})
	}
	return p
}

func capsFromPB(p *pb.CapabilitiesResponse) core.Capabilities {
	c := core.Capabilities{
		CreateIfAbsent:   capabilityFromPB(p.CreateIfAbsent),
		ReplaceIfVersion: capabilityFromPB(p.ReplaceIfVersion),
		DeleteIfVersion:  capabilityFromPB(p.DeleteIfVersion),
		OrderedList:      p.OrderedList,
		ListAfterWrite:   p.ListAfterWrite,
		ListDelimiter:    p.ListDelimiter,
		UniqueVersions:   p.UniqueVersions,
		ReadOnly:         p.ReadOnly,
		Notes:            p.Notes,
	}
	if l := p.Limits; l != nil {
		c.Limits = core.Limits{MaxObjectSize: l.MaxObjectSize, MaxDeleteBatch: int(l.MaxDeleteBatch), MaxListPage: int(l.MaxListPage),
			Parallelism: int(max(0, min(l.Parallelism, 1<<20)))}
	}
	for _, g := range p.Gates {
		c.Gates = append(c.Gates, core.GateSpec{Name: g.Name, Scope: scope(g.Scope), Covers: g.Covers})
	}
	return c
}

// forceReadOnly makes c declare a read-only instance: a host that asked for
// read-only never relies on the plugin having understood the request.
func forceReadOnly(c core.Capabilities) core.Capabilities {
	none := core.Capability{Level: core.LevelNone, Scope: core.ScopeNone, Reason: "opened read-only"}
	c.CreateIfAbsent, c.ReplaceIfVersion, c.DeleteIfVersion = none, none, none
	c.Gates = nil
	c.ReadOnly = true
	return c
}

// packInfos encodes infos as ListResponse.packed: each key without prefix,
// which every one must start with (ok false otherwise: the driver listed a
// key outside the prefix, which the packed form cannot carry).
func packInfos(prefix string, infos []core.Info) (b []byte, ok bool) {
	n := 0
	for _, i := range infos {
		n += len(i.Key) - len(prefix) + len(i.Version) + 2*binary.MaxVarintLen64 + 8
	}
	b = make([]byte, 0, n+binary.MaxVarintLen64)
	b = binary.AppendUvarint(b, uint64(len(infos)))
	for _, i := range infos {
		rel, found := strings.CutPrefix(i.Key, prefix)
		if !found {
			return nil, false
		}
		b = binary.AppendUvarint(b, uint64(len(rel)))
		b = append(b, rel...)
		b = binary.AppendVarint(b, i.Size)
		if i.ModTime.IsZero() {
			b = binary.AppendUvarint(b, 0)
		} else {
			b = binary.AppendUvarint(b, 1)
			b = binary.AppendVarint(b, i.ModTime.Unix())
			b = binary.AppendUvarint(b, uint64(i.ModTime.Nanosecond()))
		}
		b = binary.AppendUvarint(b, uint64(len(i.Version)))
		b = append(b, i.Version...)
	}
	return b, true
}

// unpackInfos decodes ListResponse.packed, each key with prefix put back.
// It holds the plugin to what an Info message would carry: a key must be
// valid UTF-8 (a proto string is), nanoseconds below a second, and nothing
// may be cut short or left over. The keys and versions are substrings of
// one string, so a page costs a few allocations however long it is.
func unpackInfos(prefix string, p []byte) ([]core.Info, error) {
	total := len(p)
	bad := func(what string) error {
		return fmt.Errorf("packed list: %s at byte %d of %d", what, total-len(p), total)
	}
	uvarint := func() (uint64, bool) {
		v, n := binary.Uvarint(p)
		if n <= 0 {
			return 0, false
		}
		p = p[n:]
		return v, true
	}
	varint := func() (int64, bool) {
		v, n := binary.Varint(p)
		if n <= 0 {
			return 0, false
		}
		p = p[n:]
		return v, true
	}
	// Every object takes at least 4 bytes, so a count the bytes cannot
	// hold is refused before anything is allocated for it.
	count, ok := uvarint()
	if !ok || count > uint64(len(p)/4) {
		return nil, bad("a bad object count")
	}
	out := make([]core.Info, 0, count)
	// Keys and versions go into one buffer, converted once.
	type span struct{ key, keyEnd, ver, verEnd int }
	spans := make([]span, 0, count)
	text := make([]byte, 0, len(p)+int(count)*len(prefix))
	for len(p) > 0 {
		if len(out) == int(count) {
			return nil, bad("bytes after the last object")
		}
		var sp span
		n, ok := uvarint()
		if !ok || n > uint64(len(p)) {
			return nil, bad("a key cut short")
		}
		sp.key = len(text)
		text = append(text, prefix...)
		text = append(text, p[:n]...)
		sp.keyEnd = len(text)
		if !utf8.Valid(text[sp.key:sp.keyEnd]) {
			return nil, fmt.Errorf("packed list: key %q is not valid UTF-8", text[sp.key:sp.keyEnd])
		}
		p = p[n:]
		var i core.Info
		if i.Size, ok = varint(); !ok {
			return nil, bad("a size cut short")
		}
		switch has, ok := uvarint(); {
		case !ok || has > 1:
			return nil, bad("a bad mod time mark")
		case has == 1:
			sec, ok := varint()
			nsec, ok2 := uvarint()
			if !ok || !ok2 || nsec >= 1e9 {
				return nil, bad("a bad mod time")
			}
			// As infoFromPB reads a Timestamp: in local time.
			i.ModTime = time.Unix(sec, int64(nsec))
		}
		if n, ok = uvarint(); !ok || n > uint64(len(p)) {
			return nil, bad("a version cut short")
		}
		sp.ver = len(text)
		text = append(text, p[:n]...)
		sp.verEnd = len(text)
		p = p[n:]
		out = append(out, i)
		spans = append(spans, sp)
	}
	if len(out) != int(count) {
		return nil, bad("fewer objects than counted")
	}
	s := string(text)
	for j, sp := range spans {
		out[j].Key, out[j].Version = s[sp.key:sp.keyEnd], s[sp.ver:sp.verEnd]
	}
	return out, nil
}
