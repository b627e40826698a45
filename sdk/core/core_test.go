package core_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/retain-dev/retain/sdk/core"
	"github.com/retain-dev/retain/sdk/memstore"
	"github.com/retain-dev/retain/sdk/testkit"
)

func TestValidateKey(t *testing.T) {
	good := []string{"a", "a/b", "dir/file.lance", "_versions/1.manifest", "é/ü", strings.Repeat("k", core.MaxKeyBytes)}
	for _, k := range good {
		if err := core.ValidateKey("put", k); err != nil {
			t.Errorf("%q: unexpected %v", k, err)
		}
	}
	bad := map[string]string{
		"":                                      "empty",
		"/a":                                    "leading",
		"a//b":                                  "empty segment",
		"a/":                                    "empty segment",
		"./a":                                   `"."`,
		"a/../b":                                `".."`,
		"a\x00b":                                "NUL",
		"a\nb":                                  "control",
		"a\u0085b":                              "control",
		`a\b`:                                   "backslash",
		"\xff":                                  "UTF-8",
		strings.Repeat("k", core.MaxKeyBytes+1): "1024",
	}
	for k, rule := range bad {
		err := core.ValidateKey("put", k)
		if !errors.Is(err, core.ErrInvalidArgument) {
			t.Errorf("%q: want invalid argument, got %v", k, err)
			continue
		}
		if !strings.Contains(err.Error(), rule) {
			t.Errorf("%q: message %q does not name the rule %q", k, err, rule)
		}
	}
	if err := core.ValidatePrefix("list", "a/"); err != nil {
		t.Errorf("prefix a/: %v", err)
	}
}

func TestErrorKinds(t *testing.T) {
	cause := context.DeadlineExceeded
	err := core.Wrap("get", "k", core.ErrTransient, cause)
	if !errors.Is(err, core.ErrTransient) || !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, core.ErrNotFound) {
		t.Fatalf("errors.Is broken for %v", err)
	}
	if core.KindOf(err) != core.ErrTransient {
		t.Fatal("KindOf")
	}
	inner := core.Errorf("stat", "k", core.ErrNotFound, "gone")
	if core.KindOf(core.Wrap("get", "k", core.ErrUnknown, inner)) != core.ErrNotFound {
		t.Fatal("Wrap with unknown must keep the cause's kind")
	}
	if core.KindOf(io.EOF) != core.ErrUnknown {
		t.Fatal("a foreign error is unknown")
	}
}

func TestRequire(t *testing.T) {
	caps := core.Capabilities{
		CreateIfAbsent:   core.Capability{Level: core.LevelNative},
		ReplaceIfVersion: core.Capability{Level: core.LevelGated, Gate: "stripe", Scope: core.ScopeHost},
		DeleteIfVersion:  core.Capability{Level: core.LevelNone, Reason: "no conditional delete"},
		Gates:            []core.GateSpec{{Name: "b", Scope: core.ScopeHost}, {Name: "a", Scope: core.ScopeGlobal}},
	}
	if err := caps.Require("x", core.FeatureCreateIfAbsent, core.ScopeGlobal); err != nil {
		t.Fatal(err)
	}
	if err := caps.Require("x", core.FeatureReplaceIfVersion, core.ScopeHost); err != nil {
		t.Fatal(err)
	}
	err := caps.Require("x", core.FeatureReplaceIfVersion, core.ScopeGlobal)
	if !errors.Is(err, core.ErrUnsupported) || !strings.Contains(err.Error(), "replace-if-version") {
		t.Fatalf("gated(host) must not satisfy global: %v", err)
	}
	err = caps.Require("x", core.FeatureDeleteIfVersion, core.ScopeProcess)
	if !errors.Is(err, core.ErrUnsupported) || !strings.Contains(err.Error(), "no conditional delete") {
		t.Fatalf("none: %v", err)
	}
	order, err := caps.RequireGates("x", core.ScopeHost, "b", "a", "b")
	if err != nil || strings.Join(order, ",") != "a,b" {
		t.Fatalf("canonical order: %v %v", order, err)
	}
	if _, err := caps.RequireGates("x", core.ScopeGlobal, "a", "b"); !errors.Is(err, core.ErrUnsupported) || !strings.Contains(err.Error(), `"b"`) {
		t.Fatalf("gate b is host-scoped: %v", err)
	}
}

func TestParseLocation(t *testing.T) {
	cases := map[string]core.Location{
		"file:///data/x/": {Scheme: "file", Path: "/data/x"},
		"/data/y":         {Scheme: "file", Path: "/data/y"},
		"s3://bkt/a/b/":   {Scheme: "s3", Bucket: "bkt", Prefix: "a/b"},
		"gs://bkt":        {Scheme: "gs", Bucket: "bkt"},
	}
	for in, want := range cases {
		got, err := core.ParseLocation(in)
		if err != nil || got.Scheme != want.Scheme || got.Path != want.Path || got.Bucket != want.Bucket || got.Prefix != want.Prefix {
			t.Errorf("%s: got %+v %v", in, got, err)
		}
	}
	loc, err := core.ParseLocation("s3://b/p?endpoint=http://127.0.0.1:9000&region=x")
	if err != nil || loc.Options["endpoint"] != "http://127.0.0.1:9000" {
		t.Fatalf("options: %+v %v", loc, err)
	}
	if back, _ := core.ParseLocation(loc.String()); back.Options["region"] != "x" || back.Bucket != "b" {
		t.Fatalf("round trip %s -> %+v", loc, back)
	}
	if got, _ := core.ParseLocation("file:///tmp/x"); got.String() != "file:///tmp/x" {
		t.Fatalf("file round trip: %s", got)
	}
	for _, bad := range []string{"", "file://host/x", "file:relative", "s3:///nobucket", "s3://b/a//b"} {
		if _, err := core.ParseLocation(bad); !errors.Is(err, core.ErrInvalidArgument) {
			t.Errorf("%q: want invalid argument, got %v", bad, err)
		}
	}
}

// liar wraps a real driver and breaks one promise.
type liar struct {
	core.Driver
	list func(core.ListPage) core.ListPage
}

func (l liar) List(ctx context.Context, o core.ListOptions) (core.ListPage, error) {
	p, err := l.Driver.List(ctx, o)
	return l.list(p), err
}

func TestStoreCatchesLyingList(t *testing.T) {
	ctx := context.Background()
	mem := memstore.New()
	for _, k := range []string{"p/a", "p/b", "p/c"} {
		if _, err := mem.Put(ctx, k, strings.NewReader(k), core.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	lies := map[string]func(core.ListPage) core.ListPage{
		"unordered": func(p core.ListPage) core.ListPage {
			p.Objects[0], p.Objects[1] = p.Objects[1], p.Objects[0]
			return p
		},
		"outside prefix": func(p core.ListPage) core.ListPage {
			p.Objects = append(p.Objects, core.Info{Key: "q/zzz"})
			return p
		},
		"empty page claiming more": func(p core.ListPage) core.ListPage { return core.ListPage{More: true} },
	}
	for name, lie := range lies {
		s, err := core.NewStore(ctx, "liar", liar{mem, lie})
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.List(ctx, "p/", 0)
		if !errors.Is(err, core.ErrUnknown) || !strings.Contains(err.Error(), "broke the storage contract") {
			t.Errorf("%s: want a contract violation, got %v", name, err)
		}
	}
}

// shortBody declares a size its body does not have.
type shortBody struct{ core.Driver }

func (s shortBody) Get(ctx context.Context, key string) (*core.Reader, error) {
	r, err := s.Driver.Get(ctx, key)
	if err == nil {
		r.Info.Size += 10
	}
	return r, err
}

func TestStoreRefusesShortBody(t *testing.T) {
	ctx := context.Background()
	mem := memstore.New()
	mem.Put(ctx, "k", strings.NewReader("hello"), core.PutOptions{})
	s, _ := core.NewStore(ctx, "short", shortBody{mem})
	if _, _, err := s.ReadAll(ctx, "k"); err == nil || !strings.Contains(err.Error(), "short") {
		t.Fatalf("a body shorter than declared must fail, got %v", err)
	}
}

// declareNone declares every conditional operation none.
func declareNone(c *core.Capabilities) { *c = core.Capabilities{} }

func TestStoreRefusesUndeclaredModes(t *testing.T) {
	ctx := context.Background()
	mem := memstore.New()
	s, _ := core.NewStore(ctx, "none", &testkit.Caps{Driver: mem, Edit: declareNone})
	_, err := s.PutBytes(ctx, "k", []byte("x"), core.PutOptions{Mode: core.PutCreateIfAbsent})
	if !errors.Is(err, core.ErrUnsupported) {
		t.Fatalf("create-if-absent on none: %v", err)
	}
	if _, err := mem.Stat(ctx, "k"); !errors.Is(err, core.ErrNotFound) {
		t.Fatal("the portable store wrote through a capability declared none")
	}
	if err := s.Delete(ctx, "k", core.DeleteOptions{IfVersion: "v"}); !errors.Is(err, core.ErrUnsupported) {
		t.Fatalf("delete-if-version on none: %v", err)
	}
}
