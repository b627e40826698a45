package pluginproto

import (
	"errors"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/storage/redact"
	"github.com/retain-dev/retain/pluginproto/internal/pb"
)

// An error leaves the plugin masked (its status text and its detail), and
// a detail from a plugin that did not mask is masked on arrival.
func TestWireErrorsAreMasked(t *testing.T) {
	redact.Register("wireSecretValue0123456")
	err := toStatus("get", "k", &storage.Error{Op: "get", Key: "k", Kind: storage.ErrPermissionDenied,
		Msg: "endpoint said wireSecretValue0123456", Err: errors.New("Authorization: Bearer abcdefghijklmnopqrstuvwxyz")})
	st, _ := status.FromError(err)
	texts := []string{st.Message()}
	for _, d := range st.Details() {
		if d, ok := d.(*pb.ErrorDetail); ok {
			texts = append(texts, d.Message)
		}
	}
	if len(texts) != 2 {
		t.Fatalf("no detail: %v", st)
	}
	arrived := fromDetail(&pb.ErrorDetail{Op: "get", Kind: uint32(storage.ErrUnknown), Message: "vendor said wireSecretValue0123456"}, codes.Unknown)
	texts = append(texts, arrived.Error())
	for _, s := range texts {
		if strings.Contains(s, "wireSecretValue") || strings.Contains(s, "abcdefghijklmnop") {
			t.Errorf("carries a credential: %s", s)
		}
	}
}
