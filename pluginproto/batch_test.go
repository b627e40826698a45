package pluginproto

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/storage/storagetest"
	"github.com/retain-dev/retain/pluginproto/internal/pb"
)

// batchFixture puts objects of the sizes given under b/NN and returns the
// keys to read: those objects, one missing key, one that fails with a kind
// of its own, and one invalid key.
func batchFixture(t *testing.T, s *storage.Store, sizes ...int) []string {
	t.Helper()
	ctx := context.Background()
	var keys []string
	for i, n := range sizes {
		k := fmt.Sprintf("b/%02d", i)
		if _, err := s.PutBytes(ctx, k, bytes.Repeat([]byte{byte('a' + i)}, n), storage.PutOptions{}); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k)
	}
	return append(keys, "b/missing", fmt.Sprintf("err/%d", storage.ErrPermissionDenied), "bad//key")
}

// checkBatch holds a store's StatMany and GetMany to its single calls.
func checkBatch(t *testing.T, s *storage.Store, keys []string) {
	t.Helper()
	ctx := context.Background()
	stats, err := s.StatMany(ctx, keys)
	if err != nil {
		t.Fatal(err)
	}
	gets, err := s.GetMany(ctx, keys)
	if err != nil {
		t.Fatal(err)
	}
	if len(stats) != len(keys) || len(gets) != len(keys) {
		t.Fatalf("%d stat and %d get results for %d keys", len(stats), len(gets), len(keys))
	}
	for i, k := range keys {
		info, serr := s.Stat(ctx, k)
		data, ginfo, gerr := s.ReadAll(ctx, k)
		if stats[i].Key != k || gets[i].Key != k {
			t.Errorf("result %d names %q and %q, want %q", i, stats[i].Key, gets[i].Key, k)
		}
		if storage.KindOf(stats[i].Err) != storage.KindOf(serr) || (serr == nil) != (stats[i].Err == nil) {
			t.Errorf("%s: StatMany error %v, Stat error %v", k, stats[i].Err, serr)
		}
		if storage.KindOf(gets[i].Err) != storage.KindOf(gerr) || (gerr == nil) != (gets[i].Err == nil) {
			t.Errorf("%s: GetMany error %v, Get error %v", k, gets[i].Err, gerr)
		}
		if serr == nil && (stats[i].Info.Size != info.Size || stats[i].Info.Version != info.Version) {
			t.Errorf("%s: StatMany %+v, Stat %+v", k, stats[i].Info, info)
		}
		if gerr == nil && (!bytes.Equal(gets[i].Data, data) || gets[i].Info.Version != ginfo.Version) {
			t.Errorf("%s: GetMany read %d bytes version %q, Get %d bytes version %q",
				k, len(gets[i].Data), gets[i].Info.Version, len(data), ginfo.Version)
		}
	}
}

func counted(t *testing.T, c *Client) (*storage.Store, *storagetest.Counting) {
	t.Helper()
	cd := storagetest.NewCounting(c)
	s, err := storage.NewStore(context.Background(), "testmem", cd)
	if err != nil {
		t.Fatal(err)
	}
	return s, cd
}

// A batch crosses the boundary once and answers what single calls answer,
// failures by kind included; bodies beyond one batch's bytes go in the
// next batch, and one larger than any batch is streamed alone.
func TestBatchReadsCross(t *testing.T) {
	s, cd := counted(t, launch(t, "mem"))
	keys := batchFixture(t, s, 0, 10, 100<<10)
	before := cd.Counts()
	checkBatch(t, s, keys)
	if n := cd.Counts().BatchRead - before.BatchRead; n != 2 {
		t.Errorf("%d batch requests for one StatMany and one GetMany, want 2", n)
	}

	// Three bodies of 6 MiB: two fit a batch of 16 MiB, the third goes in
	// the next. One of 17 MiB fits none and is read with Get.
	big := batchFixture(t, s, 6<<20, 6<<20, 6<<20, storage.MaxBatchBytes+1)
	before = cd.Counts()
	got, err := s.GetMany(context.Background(), big[:4])
	if err != nil {
		t.Fatal(err)
	}
	for i, g := range got {
		if g.Err != nil || int64(len(g.Data)) != g.Info.Size || g.Data[0] != byte('a'+i) {
			t.Errorf("%s: %d bytes, %v", g.Key, len(g.Data), g.Err)
		}
	}
	after := cd.Counts()
	if after.BatchRead-before.BatchRead != 3 || after.Get-before.Get != 1 {
		t.Errorf("%d batches and %d gets, want 3 batches (2+1 bodies, then the large one refused) and 1 get",
			after.BatchRead-before.BatchRead, after.Get-before.Get)
	}
}

// A plugin that predates batch reads says nothing of them in its
// OpenResponse: the client never sends it one, and the store reads key by
// key with the same answers.
func TestBatchReadsFallBackForOldPlugin(t *testing.T) {
	c := launch(t, "legacy")
	_, err := c.StatMany(context.Background(), []string{"a"})
	wantKind(t, err, storage.ErrUnsupported)
	_, err = c.GetMany(context.Background(), []string{"a"}, 1<<20)
	wantKind(t, err, storage.ErrUnsupported)

	s, cd := counted(t, c)
	keys := batchFixture(t, s, 0, 10, 100<<10)
	before := cd.Counts()
	checkBatch(t, s, keys)
	after := cd.Counts()
	if after.BatchRead != before.BatchRead {
		t.Errorf("%d batch requests reached a plugin without batch reads", after.BatchRead-before.BatchRead)
	}
	// len(keys)-1 valid keys, each read by a Stat and a Get in the batches
	// and again by checkBatch's single calls.
	if n := after.Stat - before.Stat; n != 2*int64(len(keys)-1) {
		t.Errorf("%d stats, want %d", n, 2*(len(keys)-1))
	}
}

// Through a batch the plugin refuses what it refuses in single calls: too
// many keys, too many bytes.
func TestBatchLimits(t *testing.T) {
	c := launch(t, "mem")
	keys := make([]string, storage.MaxBatchKeys+1)
	for i := range keys {
		keys[i] = fmt.Sprintf("k/%d", i)
	}
	_, err := c.StatMany(context.Background(), keys)
	wantKind(t, err, storage.ErrInvalidArgument)
	_, err = c.GetMany(context.Background(), keys[:1], storage.MaxBatchBytes+1)
	wantKind(t, err, storage.ErrInvalidArgument)
	// Past the host's checks, the plugin's own.
	_, err = c.rpc.StatMany(context.Background(), &pb.StatManyRequest{Keys: keys})
	wantKind(t, c.convertErr(context.Background(), "stat-many", "", err), storage.ErrInvalidArgument)
	st, err := c.rpc.GetMany(context.Background(), &pb.GetManyRequest{Keys: keys[:1], MaxBytes: storage.MaxBatchBytes + 1})
	if err == nil {
		_, err = st.Recv()
	}
	wantKind(t, c.convertErr(context.Background(), "get-many", "", err), storage.ErrInvalidArgument)
}

// A batch the plugin is too slow to answer kills it as a single call does.
func TestBatchCallTimeout(t *testing.T) {
	for name, call := range map[string]func(c *Client) error{
		"stat-many": func(c *Client) error { _, err := c.StatMany(context.Background(), []string{"a", "hang/x"}); return err },
		"get-many": func(c *Client) error {
			_, err := c.GetMany(context.Background(), []string{"hang/x"}, 1<<20)
			return err
		},
	} {
		t.Run(name, func(t *testing.T) {
			c := launch(t, "mem", func(cfg *LaunchConfig) { cfg.CallTimeout = 300 * time.Millisecond })
			ce := wantKind(t, call(c), storage.ErrUnavailable)
			if !strings.Contains(ce.Error(), "retain killed it") || ce.Op != name {
				t.Errorf("error %q: want the hung plugin's, for %s", ce, name)
			}
			if c.pluginGone() == false {
				t.Error("the hung plugin still runs")
			}
		})
	}
}
