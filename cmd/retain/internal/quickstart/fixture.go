package quickstart

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/retain-dev/retain/core/lance"
	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/storage/memstore"
)

// The fixture: a LanceDB store written by real LanceDB (generate_test.go),
// embedded so quickstart needs nothing but this binary. fixture/store/
// holds the tables exactly as LanceDB left them; fixture/fixture.json is
// what LanceDB reported while writing them.
//
//go:embed all:fixture
var fixtureFS embed.FS

const (
	fixtureStore = "fixture/store"
	fixtureInfo  = "fixture/fixture.json"
	// hintName is the version hint LanceDB rewrites after every commit on
	// a local filesystem.
	hintName = "_versions/latest_version_hint.json"
)

// PinnedVersion is the version of every table the quickstart checkpoint
// pins: the versions up to it are replayed before the checkpoint, the rest
// after.
const PinnedVersion = 3

// Info is fixture/fixture.json.
type Info struct {
	// LanceDB is the version of @lancedb/lancedb that wrote the fixture.
	LanceDB string  `json:"lancedb"`
	Pinned  uint64  `json:"pinned"`
	Tables  []Table `json:"tables"`
}

// Table is one table of the fixture as LanceDB reported it.
type Table struct {
	Table    string    `json:"table"` // "events.lance"
	Versions []Version `json:"versions"`
}

// Version is one commit LanceDB made, with what LanceDB read back at it.
type Version struct {
	Version uint64 `json:"version"`
	// Commit says what the commit did ("append 2 rows").
	Commit string `json:"commit"`
	// Rows and IDSum: LanceDB's full scan of the version (row count and sum
	// of the id column).
	Rows      int64     `json:"rows"`
	IDSum     int64     `json:"id_sum"`
	Timestamp time.Time `json:"timestamp"`
}

// Object is one file of the fixture, keyed as in the store.
type Object struct {
	Key  string
	Body []byte
}

// Commit is what one LanceDB commit wrote: its new files, its manifest
// last (the commit point), then the version hint.
type Commit struct {
	Table   string
	Version Version
	// Files are the objects the version references that no earlier
	// version of the table does, the manifest last.
	Files []Object
	// Manifest is the manifest's key (also the last of Files).
	Manifest string
	// Refs are the keys of every object the version references, manifest
	// included (index folders expanded to their files).
	Refs []string
}

// Fixture is the embedded store, split into the commits that made it.
type Fixture struct {
	Info Info
	// Commits in replay order: every table's version 1, then version 2, …
	Commits []Commit
	// Objects is every file of the fixture by key (version hints
	// excluded: the replay writes them).
	Objects map[string][]byte
}

// Tables are the fixture's table folders, in order.
func (f *Fixture) Tables() []string {
	var out []string
	for _, t := range f.Info.Tables {
		out = append(out, t.Table)
	}
	return out
}

// Commit returns table's commit of version v.
func (f *Fixture) Commit(table string, v uint64) (Commit, bool) {
	for _, c := range f.Commits {
		if c.Table == table && c.Version.Version == v {
			return c, true
		}
	}
	return Commit{}, false
}

// Head is the newest version of every table.
func (f *Fixture) Head(table string) uint64 {
	var h uint64
	for _, c := range f.Commits {
		if c.Table == table && c.Version.Version > h {
			h = c.Version.Version
		}
	}
	return h
}

// LoadFixture reads the embedded fixture and splits it into commits with
// retain's own Lance reader: version N's commit is every object manifest N
// references that no earlier manifest does, then the manifest. It refuses
// a fixture holding anything no version references, a reference to a file
// it lacks, or versions other than 1..N, so a replay copies exactly what
// LanceDB wrote, nothing else.
func LoadFixture(ctx context.Context) (*Fixture, error) {
	b, err := fixtureFS.ReadFile(fixtureInfo)
	if err != nil {
		return nil, fmt.Errorf("quickstart fixture: %w", err)
	}
	f := &Fixture{Objects: map[string][]byte{}}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f.Info); err != nil {
		return nil, fmt.Errorf("quickstart fixture: %s: %w", fixtureInfo, err)
	}
	if len(f.Info.Tables) == 0 || f.Info.Pinned != PinnedVersion {
		return nil, fmt.Errorf("quickstart fixture: %s names no tables or pins version %d, not %d", fixtureInfo, f.Info.Pinned, PinnedVersion)
	}

	// The fixture in an in-memory store, read by lance.
	mem, err := storage.NewStore(ctx, "memory", memstore.New())
	if err != nil {
		return nil, err
	}
	defer mem.Close()
	hints := map[string][]byte{}
	err = fs.WalkDir(fixtureFS, fixtureStore, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		body, err := fixtureFS.ReadFile(p)
		if err != nil {
			return err
		}
		key := strings.TrimPrefix(p, fixtureStore+"/")
		if path.Base(key) == path.Base(hintName) {
			hints[key] = body
			return nil
		}
		f.Objects[key] = body
		_, err = mem.PutBytes(ctx, key, body, storage.PutOptions{Mode: storage.PutCreateIfAbsent})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("quickstart fixture: %w", err)
	}

	assigned := map[string]bool{}
	perTable := map[string][]Commit{}
	maxVersions := 0
	for _, t := range f.Info.Tables {
		ds, err := lance.Open(mem, t.Table)
		if err != nil {
			return nil, err
		}
		vs, err := ds.Versions(ctx)
		if err != nil {
			return nil, fmt.Errorf("quickstart fixture: %s: %w", t.Table, err)
		}
		if len(vs) != len(t.Versions) || len(vs) <= PinnedVersion {
			return nil, fmt.Errorf("quickstart fixture: %s has %d manifests, fixture.json %d versions; need more than %d",
				t.Table, len(vs), len(t.Versions), PinnedVersion)
		}
		last := vs[len(vs)-1].N
		if h, want := hints[t.Table+"/"+hintName], HintBody(last); !bytes.Equal(h, want) {
			return nil, fmt.Errorf("quickstart fixture: %s: version hint %q, want %q (as LanceDB writes it)", t.Table, h, want)
		}
		delete(hints, t.Table+"/"+hintName)
		for i, v := range vs {
			if v.N != uint64(i+1) || t.Versions[i].Version != v.N {
				return nil, fmt.Errorf("quickstart fixture: %s: manifest %s is version %d, want %d", t.Table, v.Key, v.N, i+1)
			}
			m, err := ds.ReadManifest(ctx, v)
			if err != nil {
				return nil, fmt.Errorf("quickstart fixture: %w", err)
			}
			c := Commit{Table: t.Table, Version: t.Versions[i], Manifest: v.Key}
			for _, r := range m.Files() {
				var keys []string
				switch {
				case r.Outside:
					return nil, fmt.Errorf("quickstart fixture: %s v%d references %s outside the store", t.Table, v.N, r.Key)
				case r.Prefix:
					for k := range f.Objects {
						if strings.HasPrefix(k, r.Key) {
							keys = append(keys, k)
						}
					}
					if len(keys) == 0 {
						return nil, fmt.Errorf("quickstart fixture: %s v%d references the empty folder %s", t.Table, v.N, r.Key)
					}
					sort.Strings(keys)
				default:
					if _, ok := f.Objects[r.Key]; !ok {
						return nil, fmt.Errorf("quickstart fixture: %s v%d references %s, which the fixture lacks", t.Table, v.N, r.Key)
					}
					keys = []string{r.Key}
				}
				for _, k := range keys {
					c.Refs = append(c.Refs, k)
					if !assigned[k] && k != v.Key {
						assigned[k] = true
						c.Files = append(c.Files, Object{Key: k, Body: f.Objects[k]})
					}
				}
			}
			if assigned[v.Key] {
				return nil, fmt.Errorf("quickstart fixture: manifest %s referenced by an earlier version", v.Key)
			}
			assigned[v.Key] = true
			c.Files = append(c.Files, Object{Key: v.Key, Body: f.Objects[v.Key]})
			sort.Strings(c.Refs)
			c.Refs = dedup(c.Refs)
			perTable[t.Table] = append(perTable[t.Table], c)
		}
		maxVersions = max(maxVersions, len(vs))
	}
	for k := range hints {
		return nil, fmt.Errorf("quickstart fixture: version hint %s of no table", k)
	}
	var stray []string
	for k := range f.Objects {
		if !assigned[k] {
			stray = append(stray, k)
		}
	}
	if len(stray) > 0 {
		sort.Strings(stray)
		return nil, fmt.Errorf("quickstart fixture: %d objects no version references (first %s)", len(stray), stray[0])
	}
	for i := range maxVersions {
		for _, t := range f.Info.Tables {
			if cs := perTable[t.Table]; i < len(cs) {
				f.Commits = append(f.Commits, cs[i])
			}
		}
	}
	return f, nil
}

// HintBody is LanceDB's version hint naming version v, byte for byte.
func HintBody(v uint64) []byte { return fmt.Appendf(nil, `{"version":%d}`, v) }

func dedup(s []string) []string {
	out := s[:0]
	for i, k := range s {
		if i == 0 || k != s[i-1] {
			out = append(out, k)
		}
	}
	return out
}
