package pluginproto

import (
	"strings"
	"time"

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
