// Package pluginproto runs storage adapters as separate processes: the
// wire protocol (gRPC, see proto/retain/storage/v1/storage.proto), the
// plugin half a vendor's binary serves with Serve, and the host half,
// Launch, whose *Client is a storage.Driver.
//
// A vendor's whole main is
//
//	func main() { pluginproto.Serve(acme.Adapter) }
//
// The processes meet through hashicorp/go-plugin: the host starts the
// plugin with the environment variable RETAIN_PLUGIN set to a fixed cookie
// and the protocol versions it speaks; the plugin answers on stdout with one
// handshake line (so nothing else may be written to stdout before Serve) and
// then serves gRPC over a unix socket with mutual TLS. The plugin logs JSON
// to stderr, which go-plugin forwards to the host's logger.
//
// Errors cross the boundary with their kind: the plugin sends every
// *storage.Error as a gRPC status carrying an ErrorDetail, and the host turns
// it back into a *storage.Error, so errors.Is(err, storage.ErrNotFound) works on
// either side. A status without that detail is a failure of the transport:
// if the plugin process died mid-call the host reports storage.ErrUnavailable,
// because the outcome of the call is unknown.
//
// No call waits forever: each has a deadline (the call timeout for an
// answer, the idle timeout for each wait on a body stream's progress), and a
// plugin that misses one is killed and its calls fail with
// storage.ErrUnavailable (see deadline.go). A plugin binary with an expected
// digest runs from a private image of exactly the bytes that were hashed,
// never from its path (see verify.go).
//
// Neither side trusts the other with keys: the host validates before
// sending and the plugin validates again before calling its driver.
//
// A plugin exits by itself when its host dies: on Linux the kernel kills it
// (Pdeathsig), and everywhere Serve watches its parent process id and exits
// when it changes.
//
// Regenerate the protocol code with
//
//	go generate ./pluginproto/
//
// which runs gen.sh (protoc, plus protoc-gen-go and protoc-gen-go-grpc
// installed into .tools/bin at pinned versions).
package pluginproto

//go:generate ./gen.sh
