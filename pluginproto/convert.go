package pluginproto

import (
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/pluginproto/internal/pb"
)

func infoToPB(i storage.Info) *pb.Info {
	p := &pb.Info{Key: i.Key, Size: i.Size, Version: []byte(i.Version)}
	if !i.ModTime.IsZero() {
		p.ModTime = timestamppb.New(i.ModTime)
	}
	return p
}

func infoFromPB(p *pb.Info) storage.Info {
	if p == nil {
		return storage.Info{}
	}
	i := storage.Info{Key: p.Key, Size: p.Size, Version: string(p.Version)}
	if p.ModTime != nil {
		i.ModTime = p.ModTime.AsTime().In(time.Local)
	}
	return i
}

func locationToPB(l storage.Location) *pb.Location {
	return &pb.Location{Scheme: l.Scheme, Path: l.Path, Bucket: l.Bucket, Prefix: l.Prefix, Options: l.Options, ReadOnly: l.ReadOnly}
}

func locationFromPB(p *pb.Location) storage.Location {
	if p == nil {
		return storage.Location{}
	}
	l := storage.Location{Scheme: p.Scheme, Path: p.Path, Bucket: p.Bucket, Prefix: p.Prefix, ReadOnly: p.ReadOnly}
	if len(p.Options) > 0 {
		l.Options = p.Options
	}
	return l
}

// text makes s fit a proto string (UTF-8) for a field meant for people.
func text(s string) string { return strings.ToValidUTF8(s, "\uFFFD") }

func capabilityToPB(c storage.Capability) *pb.Capability {
	return &pb.Capability{Level: uint32(c.Level), Gate: text(c.Gate), Scope: uint32(c.Scope), Reason: text(c.Reason)}
}

func capabilityFromPB(p *pb.Capability) storage.Capability {
	if p == nil {
		return storage.Capability{}
	}
	return storage.Capability{Level: level(p.Level), Gate: p.Gate, Scope: scope(p.Scope), Reason: p.Reason}
}

// level and scope read values off the wire. One this build does not know
// could only promise more than it can check, so it counts as none.
func level(v uint32) storage.Level {
	if l := storage.Level(v); v <= uint32(storage.LevelNative) {
		return l
	}
	return storage.LevelNone
}

func scope(v uint32) storage.Scope {
	if s := storage.Scope(v); v <= uint32(storage.ScopeGlobal) {
		return s
	}
	return storage.ScopeNone
}

func capsToPB(c storage.Capabilities) *pb.CapabilitiesResponse {
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

func capsFromPB(p *pb.CapabilitiesResponse) storage.Capabilities {
	c := storage.Capabilities{
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
		c.Limits = storage.Limits{MaxObjectSize: l.MaxObjectSize, MaxDeleteBatch: int(l.MaxDeleteBatch), MaxListPage: int(l.MaxListPage),
			Parallelism: int(max(0, min(l.Parallelism, 1<<20)))}
	}
	for _, g := range p.Gates {
		c.Gates = append(c.Gates, storage.GateSpec{Name: g.Name, Scope: scope(g.Scope), Covers: g.Covers})
	}
	return c
}

// forceReadOnly makes c declare a read-only instance: a host that asked for
// read-only never relies on the plugin having understood the request.
func forceReadOnly(c storage.Capabilities) storage.Capabilities {
	none := storage.Capability{Level: storage.LevelNone, Scope: storage.ScopeNone, Reason: "opened read-only"}
	c.CreateIfAbsent, c.ReplaceIfVersion, c.DeleteIfVersion = none, none, none
	c.Gates = nil
	c.ReadOnly = true
	return c
}
