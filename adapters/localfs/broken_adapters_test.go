//go:build linux

package localfs

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/retain-dev/retain/sdk/conformance"
	"github.com/retain-dev/retain/sdk/core"
)

// Broken adapters: localfs with one promise broken each. The suite must
// fail each one in the case named for what it breaks; a suite that passes
// a broken adapter is a bug in the suite.

type brokenKind int

const (
	checkThenPut   brokenKind = iota // create-if-absent as stat, then overwrite
	ignoreVersion                    // replace-if-version writes whatever the version
	plainDelete                      // delete-if-version deletes whatever the version
	nativeButPlain                   // declares create-if-absent native, writes plainly
	wrongKinds                       // reports not found as unknown
)

var brokenNames = map[brokenKind]string{
	checkThenPut:   "broken-check-then-put",
	ignoreVersion:  "broken-ignore-version",
	plainDelete:    "broken-plain-delete",
	nativeButPlain: "broken-native-but-plain",
	wrongKinds:     "broken-wrong-kinds",
}

func brokenAdapters() []core.Adapter {
	var out []core.Adapter
	for k, name := range brokenNames {
		out = append(out, core.Adapter{Name: name, Schemes: []string{"file"},
			Open: func(ctx context.Context, loc core.Location) (core.Driver, error) {
				d, err := Adapter.Open(ctx, loc)
				if err != nil {
					return nil, err
				}
				return &broken{Driver: d, kind: k}, nil
			}})
	}
	return out
}

type broken struct {
	core.Driver
	kind brokenKind
}

func (b *broken) Put(ctx context.Context, key string, body io.Reader, opts core.PutOptions) (core.Info, error) {
	switch {
	case b.kind == checkThenPut && opts.Mode == core.PutCreateIfAbsent:
		if _, err := b.Driver.Stat(ctx, key); err == nil {
			return core.Info{}, core.Errorf("put", key, core.ErrAlreadyExists, "exists")
		}
		time.Sleep(time.Millisecond) // the latency of a real round trip
		return b.Driver.Put(ctx, key, body, core.PutOptions{})
	case b.kind == ignoreVersion && opts.Mode == core.PutReplaceIfVersion:
		if _, err := b.Driver.Stat(ctx, key); err != nil {
			return core.Info{}, err
		}
		return b.Driver.Put(ctx, key, body, core.PutOptions{})
	case b.kind == nativeButPlain && opts.Mode == core.PutCreateIfAbsent:
		return b.Driver.Put(ctx, key, body, core.PutOptions{})
	}
	return b.Driver.Put(ctx, key, body, opts)
}

func (b *broken) Delete(ctx context.Context, key string, opts core.DeleteOptions) error {
	if b.kind == plainDelete && opts.IfVersion != "" {
		return b.Driver.Delete(ctx, key, core.DeleteOptions{})
	}
	return b.Driver.Delete(ctx, key, opts)
}

func (b *broken) Stat(ctx context.Context, key string) (core.Info, error) {
	i, err := b.Driver.Stat(ctx, key)
	if b.kind == wrongKinds && core.KindOf(err) == core.ErrNotFound {
		return i, core.Errorf("stat", key, core.ErrUnknown, "something went wrong")
	}
	return i, err
}

func (b *broken) Capabilities(ctx context.Context) (core.Capabilities, error) {
	c, err := b.Driver.Capabilities(ctx)
	if b.kind == nativeButPlain {
		c.CreateIfAbsent = core.Capability{Level: core.LevelNative, Scope: core.ScopeGlobal}
	}
	return c, err
}

func TestSuiteCatchesBrokenAdapters(t *testing.T) {
	cases := []struct {
		kind brokenKind
		run  string   // the cases to run
		want []string // each must fail
	}{
		{checkThenPut, "create-if-absent-race|linearizability", []string{"create-if-absent-race"}},
		{ignoreVersion, "compare-and-swap|capability-honesty", []string{"compare-and-swap", "capability-honesty"}},
		{plainDelete, "^claim$|conditional-delete", []string{"claim", "conditional-delete"}},
		{nativeButPlain, "capability-honesty", []string{"capability-honesty"}},
		{wrongKinds, "^contract/", []string{"contract/Missing"}},
	}
	for _, c := range cases {
		name := brokenNames[c.kind]
		t.Run(name, func(t *testing.T) {
			rep, err := conformance.Run(context.Background(), conformance.Config{
				Adapter: name, Adapters: testAdapters(), Run: c.run, Rounds: 50, ReportDir: t.TempDir(),
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
