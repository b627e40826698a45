package pluginproto

import (
	"context"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/storage/memstore"
	"github.com/retain-dev/retain/pluginproto/internal/pb"
)

// packedFixture is a page whose every field takes an edge: no mod time, a
// time before 1678 and after 2262 (outside UnixNano), nanoseconds, the
// prefix itself as a key, non-ASCII keys, an empty and a binary version,
// sizes of zero and below.
func packedFixture(prefix string) []storage.Info {
	return []storage.Info{
		{Key: prefix, Size: 0, Version: ""},
		{Key: prefix + "a", Size: 5, Version: "v1", ModTime: time.Unix(1700000000, 123456789)},
		{Key: prefix + "é/ü", Size: 1 << 40, Version: "\x00\xff\x80", ModTime: time.Unix(-11644473600, 1)},
		{Key: prefix + "z", Size: -1, Version: strings.Repeat("v", 300), ModTime: time.Unix(1<<40, 999999999)},
	}
}

func TestPackedInfosRoundTrip(t *testing.T) {
	for _, prefix := range []string{"", "db/t.lance/_versions/"} {
		in := packedFixture(prefix)
		b, ok := packInfos(prefix, in)
		if !ok {
			t.Fatalf("prefix %q: refused keys under it", prefix)
		}
		out, err := unpackInfos(prefix, b)
		if err != nil {
			t.Fatalf("prefix %q: %v", prefix, err)
		}
		if len(out) != len(in) {
			t.Fatalf("prefix %q: %d infos back for %d", prefix, len(out), len(in))
		}
		for i := range in {
			// What the Info message carried: the same time, in local time.
			want := infoFromPB(infoToPB(in[i]))
			if out[i].Key != want.Key || out[i].Size != want.Size || out[i].Version != want.Version ||
				!out[i].ModTime.Equal(want.ModTime) || out[i].ModTime.IsZero() != want.ModTime.IsZero() ||
				out[i].ModTime.Location() != want.ModTime.Location() {
				t.Errorf("prefix %q, info %d: packed gives %+v, an Info message %+v", prefix, i, out[i], want)
			}
		}
	}
	if _, ok := packInfos("p/", []storage.Info{{Key: "p/a"}, {Key: "q/b"}}); ok {
		t.Error("a key outside the prefix was packed")
	}
}

// A plugin's packed page is held to what Info messages would carry: a cut
// anywhere, bytes past the count, a key that is not UTF-8, nanoseconds of
// a second or more, or an unknown mod time mark is refused.
func TestUnpackInfosRefusesMalformed(t *testing.T) {
	good, _ := packInfos("p/", packedFixture("p/"))
	for n := range len(good) {
		if out, err := unpackInfos("p/", good[:n]); err == nil {
			t.Errorf("cut at byte %d of %d: accepted as %d objects", n, len(good), len(out))
		}
	}
	if _, err := unpackInfos("p/", append(good, 0)); err == nil {
		t.Error("a byte after the last object accepted")
	}
	// One object: key, then the rest as given.
	rec := func(key string, tail ...byte) []byte {
		b := binary.AppendUvarint([]byte{1}, uint64(len(key)))
		return append(append(b, key...), tail...)
	}
	bad := map[string][]byte{
		"key not UTF-8":    rec("\xff", 0, 0, 0),
		"nanoseconds":      append(rec("a", 0, 1, 0), binary.AppendUvarint(nil, 1e9)...),
		"mod time mark":    rec("a", 0, 2, 0),
		"version too long": rec("a", 0, 0, 5, 'x'),
		"key too long":     {1, 9, 'a', 0, 0, 0},
		"count too large":  {200, 0, 0, 0, 0},
	}
	for what, b := range bad {
		if out, err := unpackInfos("p/", b); err == nil {
			t.Errorf("%s: accepted as %+v", what, out)
		}
	}
}

// The plugin answers a list packed when the host asks, Info messages when
// it does not (an older host) and, as an older plugin, Info messages even
// when asked; the host reads both alike.
func TestListPackedCrosses(t *testing.T) {
	ctx := ctxT(t, 30*time.Second)
	for _, mode := range []string{"mem", "unpacked", "legacy"} {
		t.Run(mode, func(t *testing.T) {
			c := launch(t, mode)
			for i := range 30 {
				if _, err := c.Put(ctx, fmt.Sprintf("p/é%02d", i), strings.NewReader(strings.Repeat("x", i)), storage.PutOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			page, err := c.List(ctx, storage.ListOptions{Prefix: "p/", PageSize: 20})
			if err != nil || len(page.Objects) != 20 || !page.More {
				t.Fatalf("list: %d objects, more %v, %v", len(page.Objects), page.More, err)
			}
			for i, o := range page.Objects {
				st, err := c.Stat(ctx, o.Key)
				if err != nil || o.Key != fmt.Sprintf("p/é%02d", i) || o.Size != st.Size || o.Version != st.Version || !o.ModTime.Equal(st.ModTime) {
					t.Errorf("listed %+v, stat %+v, %v", o, st, err)
				}
			}
		})
	}

	srv := func(legacy bool) *server {
		s := &server{adapter: testAdapter, legacy: legacy}
		if _, err := s.Open(ctx, &pb.OpenRequest{Location: &pb.Location{Scheme: "testmem"}}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.drv.Put(ctx, "p/a", strings.NewReader("x"), storage.PutOptions{}); err != nil {
			t.Fatal(err)
		}
		return s
	}
	for _, tc := range []struct {
		legacy, ask, packed bool
	}{{false, true, true}, {false, false, false}, {true, true, false}} {
		resp, err := srv(tc.legacy).List(ctx, &pb.ListRequest{Prefix: "p/", Packed: tc.ask})
		if err != nil || (len(resp.Packed) > 0) != tc.packed || (len(resp.Objects) == 1) == tc.packed {
			t.Errorf("legacy %v, asked %v: packed %d bytes, %d objects, %v", tc.legacy, tc.ask, len(resp.Packed), len(resp.Objects), err)
		}
	}
}

// outsideDriver lists a key outside the prefix asked for.
type outsideDriver struct{ *memstore.Driver }

func (outsideDriver) List(context.Context, storage.ListOptions) (storage.ListPage, error) {
	return storage.ListPage{Objects: []storage.Info{{Key: "p/a"}, {Key: "q/b"}}}, nil
}

// A driver that lists a key outside the prefix cannot have it packed: the
// plugin refuses the page as the host's Store would (a broken contract),
// rather than drop the key or send it as if under the prefix.
func TestListPackedRefusesKeyOutsidePrefix(t *testing.T) {
	a := storage.Adapter{Name: "outside", Open: func(context.Context, storage.Location) (storage.Driver, error) {
		return outsideDriver{memstore.New()}, nil
	}}
	s := &server{adapter: a}
	ctx := context.Background()
	if _, err := s.Open(ctx, &pb.OpenRequest{Location: &pb.Location{}}); err != nil {
		t.Fatal(err)
	}
	resp, err := s.List(ctx, &pb.ListRequest{Prefix: "p/", Packed: true})
	if err == nil {
		t.Fatalf("a key outside the prefix packed: %+v", resp)
	}
	if k := storage.KindOf((&Client{}).convertErr(ctx, "list", "p/", err)); k != storage.ErrUnknown {
		t.Fatalf("kind %v, want unknown: %v", k, err)
	}
}
