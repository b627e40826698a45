package pluginproto

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/storage/memstore"
	"github.com/retain-dev/retain/pluginproto/internal/pb"
)

func TestPackedDeleteResultsRoundTrip(t *testing.T) {
	keys := []string{"a", "b", "c", "d"}
	d1, _ := detailOf("delete", "b", storage.Errorf("delete", "b", storage.ErrPermissionDenied, "read-only file"))
	d3, _ := detailOf("delete", "d", storage.Errorf("delete", "d", storage.ErrInvalidArgument, "invalid key"))
	out, err := unpackDeleteResults(keys, packDeleteFailures(4, []int{1, 3}, []*pb.ErrorDetail{d1, d3}))
	if err != nil || len(out) != 4 {
		t.Fatalf("%+v, %v", out, err)
	}
	for i, r := range out {
		if r.Key != keys[i] || (r.Err != nil) != (i == 1 || i == 3) {
			t.Errorf("result %d: %+v", i, r)
		}
	}
	if storage.KindOf(out[1].Err) != storage.ErrPermissionDenied || !strings.Contains(out[1].Err.Error(), "read-only file") ||
		storage.KindOf(out[3].Err) != storage.ErrInvalidArgument {
		t.Errorf("errors: %v; %v", out[1].Err, out[3].Err)
	}
}

// A packed answer must answer every key sent, its failures in order, each
// once, within range, with nothing cut short or left over.
func TestUnpackDeleteResultsRefusesMalformed(t *testing.T) {
	keys := []string{"a", "b", "c"}
	d, _ := detailOf("delete", "b", storage.Errorf("delete", "b", storage.ErrNotFound, "gone"))
	good := packDeleteFailures(3, []int{0, 2}, []*pb.ErrorDetail{d, d})
	for n := range len(good) {
		if out, err := unpackDeleteResults(keys, good[:n]); err == nil {
			t.Errorf("cut at byte %d of %d: accepted as %+v", n, len(good), out)
		}
	}
	bad := map[string][]byte{
		"fewer keys answered":  packDeleteFailures(2, nil, nil),
		"more keys answered":   packDeleteFailures(4, nil, nil),
		"index out of range":   packDeleteFailures(3, []int{3}, []*pb.ErrorDetail{d}),
		"index twice":          packDeleteFailures(3, []int{1, 1}, []*pb.ErrorDetail{d, d}),
		"indexes out of order": packDeleteFailures(3, []int{2, 0}, []*pb.ErrorDetail{d, d}),
		"bytes after":          append(packDeleteFailures(3, nil, nil), 0),
	}
	for what, b := range bad {
		if out, err := unpackDeleteResults(keys, b); err == nil {
			t.Errorf("%s: accepted as %+v", what, out)
		}
	}
}

// A batch delete crosses packed, and from a plugin that predates packing
// as results, with the same answers: deleted, failed by kind, refused as
// invalid.
func TestDeleteManyCrossesPackedAndNot(t *testing.T) {
	ctx := ctxT(t, 30*time.Second)
	for _, mode := range []string{"mem", "unpacked"} {
		t.Run(mode, func(t *testing.T) {
			s, err := storage.NewStore(ctx, "testmem", launch(t, mode))
			if err != nil {
				t.Fatal(err)
			}
			var keys []string
			for i := range 5 {
				k := fmt.Sprintf("d/%d", i)
				keys = append(keys, k)
				if _, err := s.PutBytes(ctx, k, []byte(k), storage.PutOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			keys = append(keys, "d/absent", fmt.Sprintf("err/%d", storage.ErrPermissionDenied), "bad//key")
			res, err := s.DeleteMany(ctx, keys)
			if err != nil || len(res) != len(keys) {
				t.Fatalf("%+v, %v", res, err)
			}
			for i, r := range res {
				want := storage.Kind(0)
				switch keys[i] {
				case "bad//key":
					want = storage.ErrInvalidArgument
				case fmt.Sprintf("err/%d", storage.ErrPermissionDenied):
					want = storage.ErrPermissionDenied
				}
				if r.Key != keys[i] || (r.Err == nil) != (want == 0) || (want != 0 && storage.KindOf(r.Err) != want) {
					t.Errorf("%s: %+v, want kind %v", keys[i], r, want)
				}
			}
			if objs, err := s.List(ctx, "d/", 0); err != nil || len(objs) != 0 {
				t.Errorf("left after the delete: %+v, %v", objs, err)
			}
		})
	}
}

// liarDeleteDriver answers a batch delete with too few results, or one
// naming another key.
type liarDeleteDriver struct {
	*memstore.Driver
	short bool
}

func (d liarDeleteDriver) DeleteMany(_ context.Context, keys []string) ([]storage.DeleteResult, error) {
	if d.short {
		return []storage.DeleteResult{{Key: keys[0]}}, nil
	}
	return []storage.DeleteResult{{Key: keys[0]}, {Key: "other"}}, nil
}

// Packed, the host sees no key the driver named: the plugin refuses what
// the Store would have (a result missing, one naming another key) rather
// than answer for the keys sent; unpacked the answer passes as it was.
func TestDeleteManyPackedRefusesLyingDriver(t *testing.T) {
	ctx := context.Background()
	for _, short := range []bool{true, false} {
		a := storage.Adapter{Name: "liar", Open: func(context.Context, storage.Location) (storage.Driver, error) {
			return liarDeleteDriver{memstore.New(), short}, nil
		}}
		s := &server{adapter: a}
		if _, err := s.Open(ctx, &pb.OpenRequest{Location: &pb.Location{}}); err != nil {
			t.Fatal(err)
		}
		keys := []string{"a", "b"}
		resp, err := s.DeleteMany(ctx, &pb.DeleteManyRequest{Keys: keys, Packed: true})
		if k := storage.KindOf((&Client{}).convertErr(ctx, "delete-many", "", err)); err == nil || k != storage.ErrUnknown {
			t.Errorf("short %v, packed: %+v, %v; want unknown", short, resp, err)
		}
		if resp, err := s.DeleteMany(ctx, &pb.DeleteManyRequest{Keys: keys}); err != nil || len(resp.Packed) > 0 || len(resp.Results) == 0 {
			t.Errorf("short %v, unpacked: %+v, %v", short, resp, err)
		}
	}
}
