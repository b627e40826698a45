package pluginproto

import (
	"context"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/pluginproto/internal/pb"
)

// ProtocolVersion is the storage plugin protocol version this build speaks.
// A host and a plugin must speak a common version; go-plugin negotiates it
// at launch and a host refuses a plugin it shares none with.
const ProtocolVersion = 1

const (
	// pluginName is the one plugin a storage plugin dispenses.
	pluginName = "storage"
	// chunkSize is the most body bytes one stream message carries, well
	// under gRPC's default 4 MiB message limit.
	chunkSize = 1 << 20
	// maxMsgSize is the message limit both sides configure. Bodies stream
	// in chunks and never need it; it leaves room for large list pages.
	maxMsgSize = 64 << 20
	// streamWindow and connWindow are HTTP/2 flow-control windows both
	// sides set. Fixed windows turn off gRPC's bandwidth estimator, which
	// otherwise pings after data on a stream: on the session (session.go)
	// that was a ping and its answer with every call, about a fifth of the
	// call's cost. A slow reader holds at most this much in flight.
	streamWindow = 4 << 20
	connWindow   = 16 << 20
	// envLogLevel passes the host logger's level to the plugin.
	envLogLevel = "RETAIN_PLUGIN_LOG_LEVEL"
)

// handshake is a UX check, not security: a plugin binary run by hand, or
// another program's plugin, is recognised and refused.
var handshake = plugin.HandshakeConfig{
	ProtocolVersion:  ProtocolVersion,
	MagicCookieKey:   "RETAIN_PLUGIN",
	MagicCookieValue: "8c1f0e6d4b2a79e35d0c6a1f9e84b7d2c3a5f60e19b8d4c7a2e6f03b5d9c1e47",
}

// hostVersions are the protocol versions this host speaks, newest last.
var hostVersions = []int{ProtocolVersion}

// hostPlugins is what the host offers go-plugin for version negotiation.
func hostPlugins() map[int]plugin.PluginSet {
	m := make(map[int]plugin.PluginSet, len(hostVersions))
	for _, v := range hostVersions {
		m[v] = plugin.PluginSet{pluginName: &storagePlugin{}}
	}
	return m
}

// storagePlugin is both go-plugin halves: with an adapter it serves, without
// one it only builds clients.
type storagePlugin struct {
	plugin.NetRPCUnsupportedPlugin
	srv *server
}

var _ plugin.GRPCPlugin = (*storagePlugin)(nil)

func (p *storagePlugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	pb.RegisterStorageServer(s, p.srv)
	return nil
}

// dispensed is what GRPCClient hands the host: the stub, and a context
// that ends when the plugin process has exited.
type dispensed struct {
	rpc    pb.StorageClient
	exited context.Context
}

func (p *storagePlugin) GRPCClient(ctx context.Context, _ *plugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return &dispensed{rpc: pb.NewStorageClient(c), exited: ctx}, nil
}

// validKind reads a kind off the wire: anything this build does not know is
// unknown.
func validKind(k uint32) storage.Kind {
	if k > 255 || !storage.Kind(k).Valid() {
		return storage.ErrUnknown
	}
	return storage.Kind(k)
}
