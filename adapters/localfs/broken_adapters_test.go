//go:build linux

package localfs

import (
	"bytes"
	"context"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retain-dev/retain/conformance"
	"github.com/retain-dev/retain/core/storage"
)

// Broken adapters: localfs with one promise broken each. The suite must
// fail each one in the case named for what it breaks; a suite that passes
// a broken adapter is a bug in the suite.

type brokenKind int

const (
	checkThenPut       brokenKind = iota // create-if-absent as stat, then overwrite
	ignoreVersion                        // replace-if-version writes whatever the version
	plainDelete                          // delete-if-version deletes whatever the version
	nativeButPlain                       // declares create-if-absent native, writes plainly
	wrongKinds                           // reports not found as unknown
	listVersionLies                      // lists another version token than Stat and Get report
	startAfterSeeks                      // a StartAfter that is no key lists from the start
	replaceSkipsSame                     // a replace-if-version of the stored bytes writes nothing, keeps the version
	createInParts                        // create-if-absent writes the final name in two parts
	statThenDelete                       // delete-if-version as stat, compare, plain delete
	smallBatch                           // declares localfs's delete batch, refuses batches over 100 keys
	readOnlyWrites                       // opened read-only, declares it but writes
	readOnlyOpenProbes                   // opened read-only, writes a probe object at open
	listCached                           // serves a listing from a per-process cache for 200 ms
	rareCreate                           // 1 create-if-absent in 500 overwrites an existing key
)

var brokenNames = map[brokenKind]string{
	checkThenPut:       "broken-check-then-put",
	ignoreVersion:      "broken-ignore-version",
	plainDelete:        "broken-plain-delete",
	nativeButPlain:     "broken-native-but-plain",
	wrongKinds:         "broken-wrong-kinds",
	listVersionLies:    "broken-list-version",
	startAfterSeeks:    "broken-start-after-seeks",
	replaceSkipsSame:   "broken-replace-skips-same-bytes",
	createInParts:      "broken-create-in-parts",
	statThenDelete:     "broken-stat-then-delete",
	smallBatch:         "broken-small-delete-batch",
	readOnlyWrites:     "broken-read-only-writes",
	readOnlyOpenProbes: "broken-read-only-open-probes",
	listCached:         "broken-list-cached",
	rareCreate:         "broken-rare-create",
}

func brokenAdapters() []storage.Adapter {
	var out []storage.Adapter
	for k, name := range brokenNames {
		out = append(out, storage.Adapter{Name: name, Schemes: []string{"file"},
			Open: func(ctx context.Context, loc storage.Location) (storage.Driver, error) {
				asked := loc.ReadOnly
				switch {
				case k == readOnlyWrites && loc.ReadOnly:
					rw := loc
					rw.ReadOnly = false
					loc = rw // writes go through; Capabilities still says read-only
				case k == readOnlyOpenProbes && loc.ReadOnly:
					rw := loc
					rw.ReadOnly = false
					d, err := Adapter.Open(ctx, rw)
					if err != nil {
						return nil, err
					}
					_, err = d.Put(ctx, ".retain-probe", strings.NewReader("probe"), storage.PutOptions{})
					d.Close()
					if err != nil {
						return nil, err
					}
				}
				d, err := Adapter.Open(ctx, loc)
				if err != nil {
					return nil, err
				}
				return &broken{Driver: d, kind: k, readOnly: asked}, nil
			}})
	}
	return out
}

type broken struct {
	storage.Driver
	kind     brokenKind
	readOnly bool // opened with Location.ReadOnly
	mu       sync.Mutex
	cache    map[storage.ListOptions]cachedPage // listCached
	creates  atomic.Uint64                      // rareCreate
}

// rareFailure decides the nth create of rareCreate: 1 in 500, from a
// fixed splitmix64 sequence, so a run is reproducible. Its first 767
// creates (what one process makes in the default create race) hold 2
// failures, at 268 and 757; 1 in 500 gives 1.5 on average.
func rareFailure(n uint64) bool {
	z := 1000003 + n + 0x9e3779b97f4a7c15
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return (z^z>>31)%500 == 0
}

type cachedPage struct {
	page storage.ListPage
	at   time.Time
}

func (b *broken) Put(ctx context.Context, key string, body io.Reader, opts storage.PutOptions) (storage.Info, error) {
	switch {
	case b.kind == rareCreate && opts.Mode == storage.PutCreateIfAbsent && rareFailure(b.creates.Add(1)):
		return b.Driver.Put(ctx, key, body, storage.PutOptions{})
	case b.kind == replaceSkipsSame && opts.Mode == storage.PutReplaceIfVersion:
		data, err := io.ReadAll(body)
		if err != nil {
			return storage.Info{}, err
		}
		if r, err := b.Driver.Get(ctx, key); err == nil {
			cur, _ := io.ReadAll(r)
			r.Close()
			if r.Info.Version == opts.IfVersion && bytes.Equal(cur, data) {
				return r.Info, nil // "nothing to write"
			}
		}
		return b.Driver.Put(ctx, key, bytes.NewReader(data), opts)
	case b.kind == createInParts && opts.Mode == storage.PutCreateIfAbsent:
		data, err := io.ReadAll(body)
		if err != nil {
			return storage.Info{}, err
		}
		if _, err := b.Driver.Put(ctx, key, bytes.NewReader(data[:len(data)/2]), opts); err != nil {
			return storage.Info{}, err
		}
		time.Sleep(2 * time.Millisecond) // the second part's round trip
		return b.Driver.Put(ctx, key, bytes.NewReader(data), storage.PutOptions{})
	case b.kind == checkThenPut && opts.Mode == storage.PutCreateIfAbsent:
		if _, err := b.Driver.Stat(ctx, key); err == nil {
			return storage.Info{}, storage.Errorf("put", key, storage.ErrAlreadyExists, "exists")
		}
		time.Sleep(time.Millisecond) // the latency of a real round trip
		return b.Driver.Put(ctx, key, body, storage.PutOptions{})
	case b.kind == ignoreVersion && opts.Mode == storage.PutReplaceIfVersion:
		if _, err := b.Driver.Stat(ctx, key); err != nil {
			return storage.Info{}, err
		}
		return b.Driver.Put(ctx, key, body, storage.PutOptions{})
	case b.kind == nativeButPlain && opts.Mode == storage.PutCreateIfAbsent:
		return b.Driver.Put(ctx, key, body, storage.PutOptions{})
	}
	return b.Driver.Put(ctx, key, body, opts)
}

func (b *broken) Delete(ctx context.Context, key string, opts storage.DeleteOptions) error {
	if b.kind == plainDelete && opts.IfVersion != "" {
		return b.Driver.Delete(ctx, key, storage.DeleteOptions{})
	}
	if b.kind == statThenDelete && opts.IfVersion != "" {
		st, err := b.Driver.Stat(ctx, key)
		if err != nil {
			return err
		}
		if st.Version != opts.IfVersion {
			return storage.Errorf("delete", key, storage.ErrPreconditionFailed, "version %s, not %s", st.Version, opts.IfVersion)
		}
		time.Sleep(time.Millisecond) // the latency of a real round trip
		return b.Driver.Delete(ctx, key, storage.DeleteOptions{})
	}
	return b.Driver.Delete(ctx, key, opts)
}

func (b *broken) DeleteMany(ctx context.Context, keys []string) ([]storage.DeleteResult, error) {
	if b.kind == smallBatch && len(keys) > 100 {
		return nil, storage.Errorf("delete-many", "", storage.ErrLimitExceeded, "%d keys: at most 100 in one call", len(keys))
	}
	return b.Driver.DeleteMany(ctx, keys)
}

func (b *broken) Stat(ctx context.Context, key string) (storage.Info, error) {
	i, err := b.Driver.Stat(ctx, key)
	if b.kind == wrongKinds && storage.KindOf(err) == storage.ErrNotFound {
		return i, storage.Errorf("stat", key, storage.ErrUnknown, "something went wrong")
	}
	return i, err
}

func (b *broken) List(ctx context.Context, opts storage.ListOptions) (storage.ListPage, error) {
	if b.kind == startAfterSeeks && opts.StartAfter != "" {
		if _, err := b.Driver.Stat(ctx, opts.StartAfter); storage.KindOf(err) == storage.ErrNotFound {
			opts.StartAfter = "" // "the marker is gone: start over"
		}
	}
	if b.kind == listCached {
		b.mu.Lock()
		c, ok := b.cache[opts]
		b.mu.Unlock()
		if ok && time.Since(c.at) < 200*time.Millisecond {
			return c.page, nil // "listings are eventually consistent anyway"
		}
	}
	page, err := b.Driver.List(ctx, opts)
	if b.kind == listCached && err == nil {
		b.mu.Lock()
		if b.cache == nil {
			b.cache = map[storage.ListOptions]cachedPage{}
		}
		b.cache[opts] = cachedPage{page, time.Now()}
		b.mu.Unlock()
	}
	if b.kind == listVersionLies {
		for i := range page.Objects {
			page.Objects[i].Version = "listed-" + page.Objects[i].Version
		}
	}
	return page, err
}

func (b *broken) Capabilities(ctx context.Context) (storage.Capabilities, error) {
	c, err := b.Driver.Capabilities(ctx)
	if b.kind == nativeButPlain {
		c.CreateIfAbsent = storage.Capability{Level: storage.LevelNative, Scope: storage.ScopeGlobal}
	}
	if b.kind == readOnlyWrites && b.readOnly {
		c.ReadOnly, c.Gates = true, nil
		none := storage.Capability{Level: storage.LevelNone, Reason: "opened read-only"}
		c.CreateIfAbsent, c.ReplaceIfVersion, c.DeleteIfVersion = none, none, none
	}
	return c, err
}

func TestSuiteCatchesBrokenAdapters(t *testing.T) {
	cases := []struct {
		kind   brokenKind
		run    string   // the cases to run
		want   []string // each must fail
		rounds int      // 0: the default, sized for 1 failure in 500
	}{
		{checkThenPut, "create-if-absent-race|linearizability", []string{"create-if-absent-race"}, 50},
		{ignoreVersion, "compare-and-swap|capability-honesty", []string{"compare-and-swap", "capability-honesty"}, 50},
		{plainDelete, "^claim$|conditional-delete", []string{"claim", "conditional-delete", "conditional-delete-race"}, 50},
		{nativeButPlain, "capability-honesty", []string{"capability-honesty"}, 50},
		{wrongKinds, "^contract/", []string{"contract/Missing"}, 50},
		{listVersionLies, "^contract/ListAgreesWithStat$", []string{"contract/ListAgreesWithStat"}, 50},
		{startAfterSeeks, "^contract/ListStartAfterNotAKey$", []string{"contract/ListStartAfterNotAKey"}, 50},
		{replaceSkipsSame, "^contract/ReplaceSameBytes$", []string{"contract/ReplaceSameBytes"}, 50},
		{createInParts, "^contract/CreateVisibility$", []string{"contract/CreateVisibility"}, 50},
		{statThenDelete, "conditional-delete-race|linearizability", []string{"conditional-delete-race", "linearizability"}, 50},
		{smallBatch, "declared-limits", []string{"declared-limits"}, 50},
		{readOnlyWrites, "read-only", []string{"read-only"}, 50},
		{readOnlyOpenProbes, "read-only", []string{"read-only"}, 50},
		{listCached, "list-after-write|contract/ListAgreesWithStat", []string{"list-after-write", "contract/ListAgreesWithStat"}, 50},
		// An adapter that breaks 1 create in 500 (the same round in every
		// process) is caught by the default-sized race, not by 200 rounds.
		{rareCreate, "create-if-absent-race", []string{"create-if-absent-race"}, 0},
	}
	for _, c := range cases {
		name := brokenNames[c.kind]
		t.Run(name, func(t *testing.T) {
			rep, err := conformance.Run(context.Background(), conformance.Config{
				Adapter: name, Adapters: testAdapters(), Run: c.run, Rounds: c.rounds, ReportDir: t.TempDir(),
			})
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range c.want {
				res, ok := rep.Case(want)
				if !ok {
					t.Fatalf("case %s did not run", want)
				}
				if res.Result != conformance.Fail {
					var sb strings.Builder
					rep.WriteTable(&sb)
					t.Fatalf("the suite passed %s in case %s:\n%s", name, want, sb.String())
				}
				t.Logf("%s caught by %s: %s", name, want, res.Reason)
			}
		})
	}
}
