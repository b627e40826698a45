package checkpoint

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/retain-dev/retain/core/checkpoint/registry"
	"github.com/retain-dev/retain/core/storage"
)

// SidecarsPrefix holds one recovery sidecar per create in flight.
const SidecarsPrefix = "_retain/sidecars/"

// SidecarFormat is the sidecar format this build writes and reads.
const SidecarFormat = 1

// Sidecar is the recovery record a create writes (create-if-absent) before
// its first tag and deletes after its commit: which checkpoint it meant to
// publish on which registry head, and every tag it may have written.
// Reconcile finishes it (the registry has the checkpoint: delete the
// sidecar) or rolls it back (it does not: delete its tags, then it).
type Sidecar struct {
	Format       int              `json:"format"`
	OperationID  string           `json:"operation_id"`
	Action       string           `json:"action"`
	CheckpointID registry.ID      `json:"checkpoint_id"`
	Name         string           `json:"name"`
	SourceBranch string           `json:"source_branch"`
	ExpectedHead registry.Version `json:"expected_head"`
	// RegistryRef is the Ref of the version the commit writes (head+1).
	RegistryRef    string       `json:"registry_ref"`
	RegistryPinTag string       `json:"registry_pin_tag"`
	Tables         []SidecarPin `json:"tables"`
	CreatedAt      time.Time    `json:"created_at"`
	Actor          string       `json:"actor"`
}

// SidecarPin is one intended row and its tag.
type SidecarPin struct {
	Tag string       `json:"tag"`
	Pin registry.Pin `json:"pin"`
}

// SidecarKey is the key of operation op's sidecar.
func SidecarKey(op string) string { return SidecarsPrefix + op + ".json" }

func writeSidecar(ctx context.Context, s *storage.Store, sc *Sidecar) error {
	b, err := json.MarshalIndent(sc, "", "  ")
	if err != nil {
		return err
	}
	_, err = s.PutBytes(ctx, SidecarKey(sc.OperationID), append(b, '\n'), storage.PutOptions{Mode: storage.PutCreateIfAbsent})
	return err
}

func readSidecar(ctx context.Context, s *storage.Store, key string) (*Sidecar, error) {
	b, _, err := s.ReadAll(ctx, key)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var sc Sidecar
	if err := dec.Decode(&sc); err != nil {
		return nil, fmt.Errorf("sidecar %s is not readable: %v", key, err)
	}
	if sc.Format != SidecarFormat {
		return nil, fmt.Errorf("sidecar %s has format %d; this build reads %d", key, sc.Format, SidecarFormat)
	}
	if err := sc.CheckpointID.Validate(); err != nil {
		return nil, fmt.Errorf("sidecar %s: %v", key, err)
	}
	if SidecarKey(sc.OperationID) != key {
		return nil, fmt.Errorf("sidecar %s names operation %q", key, sc.OperationID)
	}
	for _, p := range append([]string{sc.RegistryPinTag}, tagsOf(sc.Tables)...) {
		pt, err := registry.ParsePinTag(p)
		if err != nil || pt.CheckpointID != sc.CheckpointID {
			return nil, fmt.Errorf("sidecar %s names tag %q, not a pin of checkpoint %s", key, p, sc.CheckpointID)
		}
	}
	return &sc, nil
}

func tagsOf(ps []SidecarPin) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.Tag
	}
	return out
}

// listSidecars returns the keys of every sidecar.
func listSidecars(ctx context.Context, s *storage.Store) ([]string, error) {
	objs, err := s.List(ctx, SidecarsPrefix, 100_000)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, o := range objs {
		if rel := strings.TrimPrefix(o.Key, SidecarsPrefix); !strings.Contains(rel, "/") && strings.HasSuffix(rel, ".json") {
			out = append(out, o.Key)
		}
	}
	return out, nil
}

// PendingSidecars returns the keys of every recovery sidecar: creates in
// flight, or that died and await `retain reconcile`.
func PendingSidecars(ctx context.Context, s *storage.Store) ([]string, error) {
	return listSidecars(ctx, s)
}
