package pluginproto

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/storage/memstore"
	"github.com/retain-dev/retain/pluginproto/internal/pb"
)

func TestPackedGetResultsRoundTrip(t *testing.T) {
	keys := []string{"a", "é/b", "c", "d"}
	in := []storage.GetResult{
		{Key: "a", Info: storage.Info{Key: "a", Size: 3, Version: "v1", ModTime: time.Unix(1700000000, 5)}, Data: []byte("abc")},
		{Key: "é/b", Err: storage.Errorf("get", "é/b", storage.ErrNotFound, "no such object")},
		{Key: "c", Info: storage.Info{Key: "c", Version: "\x00\xff"}, Data: []byte{}},
		{Key: "d", Info: storage.Info{Key: "d", Size: 1, ModTime: time.Unix(-1e10, 0)}, Data: []byte{0}},
	}
	var g getPacker
	for _, r := range in {
		if r.Err != nil {
			d, _ := detailOf("get", r.Key, r.Err)
			g.fail(d)
		} else {
			g.ok(r.Info, r.Data)
		}
	}
	packed, bodies := g.take()
	if len(bodies) != 3 {
		t.Fatalf("%d bodies for 3 results that are not errors", len(bodies))
	}
	out, err := unpackGetResults(keys, packed, bodies)
	if err != nil || len(out) != len(in) {
		t.Fatalf("%d results back for %d: %v", len(out), len(in), err)
	}
	for i, r := range in {
		o := out[i]
		want := infoFromPB(infoToPB(r.Info))
		if o.Key != keys[i] || storage.KindOf(o.Err) != storage.KindOf(r.Err) || (o.Err == nil) != (r.Err == nil) {
			t.Errorf("result %d: %+v, want %+v", i, o, r)
			continue
		}
		if r.Err != nil {
			if o.Err.Error() != r.Err.Error() {
				t.Errorf("result %d: error %q, want %q", i, o.Err, r.Err)
			}
			continue
		}
		if o.Info.Key != keys[i] || o.Info.Size != want.Size || o.Info.Version != want.Version || !o.Info.ModTime.Equal(want.ModTime) ||
			o.Info.ModTime.IsZero() != want.ModTime.IsZero() || !bytes.Equal(o.Data, r.Data) {
			t.Errorf("result %d: %+v %q, want %+v %q", i, o.Info, o.Data, want, r.Data)
		}
	}
	// The packer starts again after take.
	g.ok(in[0].Info, in[0].Data)
	packed, bodies = g.take()
	out, err = unpackGetResults(keys, packed, bodies)
	if err != nil || len(out) != 1 || string(out[0].Data) != "abc" {
		t.Fatalf("after take: %+v, %v", out, err)
	}
}

// A packed batch is held to what GetResult messages would carry: a cut
// anywhere, more results than keys, a body for each result that is not an
// error (no more, no fewer), a bad mark or bytes past the count.
func TestUnpackGetResultsRefusesMalformed(t *testing.T) {
	var g getPacker
	g.ok(storage.Info{Size: 3, Version: "v", ModTime: time.Unix(1, 2)}, []byte("abc"))
	g.fail(&pb.ErrorDetail{Kind: uint32(storage.ErrNotFound), Op: "get", Key: "b", Message: "gone"})
	packed, bodies := g.take()
	good := append([]byte(nil), packed...)
	keys := []string{"a", "b"}
	if _, err := unpackGetResults(keys, good, bodies); err != nil {
		t.Fatal(err)
	}
	for n := range len(good) {
		if out, err := unpackGetResults(keys, good[:n], bodies); err == nil {
			t.Errorf("cut at byte %d of %d: accepted as %d results", n, len(good), len(out))
		}
	}
	type answer struct {
		keys   []string
		packed []byte
		bodies [][]byte
	}
	bad := map[string]answer{
		"more results than keys": {keys[:1], good, bodies},
		"bytes after the last":   {keys, append(append([]byte(nil), good...), 0), bodies},
		"fewer bodies":           {keys, good, nil},
		"more bodies":            {keys, good, append(bodies, []byte("x"))},
		"result mark":            {keys, []byte{1, 2, 0, 0, 0, 0}, nil},
		"kind":                   {keys, []byte{1, 1, 0x80, 0x02, 0, 0, 0}, nil},
	}
	for what, a := range bad {
		if out, err := unpackGetResults(a.keys, a.packed, a.bodies); err == nil {
			t.Errorf("%s: accepted as %+v", what, out)
		}
	}
}

// Batches cross packed, and from a plugin that predates packing as
// results, with the same answers as single calls.
func TestBatchReadsCrossUnpacked(t *testing.T) {
	s, cd := counted(t, launch(t, "unpacked"))
	keys := batchFixture(t, s, 0, 10, 100<<10)
	before := cd.Counts()
	checkBatch(t, s, keys)
	if n := cd.Counts().BatchRead - before.BatchRead; n != 2 {
		t.Errorf("%d batch requests for one StatMany and one GetMany, want 2", n)
	}
}

// otherKeyDriver answers a batch with results that name another key.
type otherKeyDriver struct{ *memstore.Driver }

func (otherKeyDriver) StatMany(context.Context, []string) ([]storage.StatResult, error) {
	return nil, nil
}
func (otherKeyDriver) GetMany(_ context.Context, keys []string, _ int64) ([]storage.GetResult, error) {
	return []storage.GetResult{{Key: keys[0], Info: storage.Info{Key: "other", Size: 1}, Data: []byte("x")}}, nil
}

// Packed, a result's key is the request's, so the plugin refuses a driver
// whose result names another (the host's Store, which would have, sees
// only the request's); unpacked it passes as it was, for the Store.
func TestGetManyPackedRefusesOtherKey(t *testing.T) {
	a := storage.Adapter{Name: "otherkey", Open: func(context.Context, storage.Location) (storage.Driver, error) {
		return otherKeyDriver{memstore.New()}, nil
	}}
	s := &server{adapter: a}
	ctx := context.Background()
	if _, err := s.Open(ctx, &pb.OpenRequest{Location: &pb.Location{}}); err != nil {
		t.Fatal(err)
	}
	st := &fakeGetManyStream{ctx: ctx}
	err := s.GetMany(&pb.GetManyRequest{Keys: []string{"a"}, MaxBytes: 1 << 20, Packed: true}, st)
	if k := storage.KindOf((&Client{}).convertErr(ctx, "get-many", "", err)); err == nil || k != storage.ErrUnknown {
		t.Fatalf("packed: %v (kind %v), sent %d messages; want unknown", err, k, len(st.sent))
	}
	st = &fakeGetManyStream{ctx: ctx}
	if err := s.GetMany(&pb.GetManyRequest{Keys: []string{"a"}, MaxBytes: 1 << 20}, st); err != nil ||
		len(st.sent) != 1 || st.sent[0].Results[0].Info.Key != "other" {
		t.Fatalf("unpacked: %v, %+v", err, st.sent)
	}
}

type fakeGetManyStream struct {
	pb.Storage_GetManyServer
	ctx  context.Context
	sent []*pb.GetManyResponse
}

func (f *fakeGetManyStream) Context() context.Context { return f.ctx }
func (f *fakeGetManyStream) Send(m *pb.GetManyResponse) error {
	f.sent = append(f.sent, m)
	return nil
}
