package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/retain-dev/retain/core/checkpoint"
	"github.com/retain-dev/retain/core/storage"
)

// storeIsTableError refuses a STORE that is a Lance table or lies inside
// one (issue 14 item 8): run as a store, every table-level command found
// no tables, reported empty results and wrote the adapter's own folder into
// the dataset. It is a usage error (exit 2) of kind invalid argument.
type storeIsTableError struct{ msg string }

func (e storeIsTableError) Error() string { return e.msg }
func (e storeIsTableError) Unwrap() error { return storage.ErrInvalidArgument }

// tableNotStore builds the refusal for store uri, where table is the
// dataset it is or lies in (why says how that was seen), and store the
// folder holding that table.
func tableNotStore(uri, table, name, store, why string, inside bool) error {
	what := "is a Lance table"
	if inside {
		what = "lies inside the Lance table " + showURI(table)
	}
	return storeIsTableError{fmt.Sprintf(
		"%s %s (%s), not a store: a store is the folder holding <table>.lance folders, so the store is probably %s (the folder holding %s); table commands such as `retain inspect` and `retain tag list` take the table itself",
		showURI(uri), what, why, showURI(store), name)}
}

// datasetMarker says how dir looks like a Lance dataset: the folders and
// files only a dataset has at its top. Empty when none is there.
func datasetMarker(dir string) string {
	for _, m := range []struct {
		name string
		dir  bool
	}{{"_versions", true}, {"_transactions", true}, {"_latest.manifest", false}} {
		if st, err := os.Stat(filepath.Join(dir, m.name)); err == nil && st.IsDir() == m.dir {
			if m.dir {
				return "it has " + m.name + "/"
			}
			return "it has " + m.name
		}
	}
	return ""
}

// localStoreMisuse refuses a local store root that is a dataset or lies
// inside one, reading only (a few stats per parent folder). The name alone
// (".lance") refuses only the root itself when it holds no tables: a parent
// so named without a dataset's folders is someone's folder name.
func localStoreMisuse(uri, root string) error {
	for p := filepath.Clean(root); ; {
		why := datasetMarker(p)
		if why == "" && p == root && isTableName(filepath.Base(p)) && !holdsLocalTables(p) {
			why = "its name ends in " + checkpoint.TableSuffix
		}
		if why != "" {
			return tableNotStore(uri, p, filepath.Base(p), filepath.Dir(p), why, p != root)
		}
		parent := filepath.Dir(p)
		if parent == p {
			return nil
		}
		p = parent
	}
}

func isTableName(name string) bool {
	return strings.HasSuffix(name, checkpoint.TableSuffix) && name != checkpoint.TableSuffix
}

func holdsLocalTables(dir string) bool {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, e := range ents {
		if e.IsDir() && isTableName(e.Name()) {
			return true
		}
	}
	return false
}

// remoteNameMisuse refuses, before anything is opened, an object-store
// prefix with a segment named like a table (db/t.lance, db/t.lance/data):
// nothing can be listed without opening the store, and a writable open may
// write the adapter's probe objects.
func remoteNameMisuse(uri string, loc storage.Location) error {
	if loc.Prefix == "" {
		return nil
	}
	segs := strings.Split(loc.Prefix, "/")
	for i, seg := range segs {
		if !isTableName(seg) {
			continue
		}
		table, store := loc, loc
		table.Prefix = strings.Join(segs[:i+1], "/")
		store.Prefix = strings.Join(segs[:i], "/")
		return tableNotStore(uri, table.String(), seg, store.String(), "its name ends in "+checkpoint.TableSuffix, i < len(segs)-1)
	}
	return nil
}

// remoteStoreMisuse refuses an object-store root that holds a dataset's
// _versions/ at its top: one listing request of one key on a store opened
// read-only. A listing that fails says nothing; the command meets it again.
func remoteStoreMisuse(ctx context.Context, uri string, loc storage.Location, s *storage.Store) error {
	if loc.Prefix == "" {
		return nil // a bucket's root: there is no folder above to suggest
	}
	page, err := s.ListPage(ctx, storage.ListOptions{Prefix: "_versions/", PageSize: 1})
	if err != nil || len(page.Objects) == 0 {
		return nil
	}
	store, name := loc, loc.Prefix
	store.Prefix = ""
	if i := strings.LastIndexByte(loc.Prefix, '/'); i >= 0 {
		store.Prefix, name = loc.Prefix[:i], loc.Prefix[i+1:]
	}
	return tableNotStore(uri, uri, name, store.String(), "it has _versions/", false)
}

// noTablesNote is printed instead of an empty listing for a store with no
// Lance tables, which is most often a mistyped STORE.
func (a *app) noTablesNote(store string) {
	fmt.Fprintf(a.stdout, "no Lance tables under %s: a store is the folder holding <table>.lance folders (a LanceDB database directory); check the path\n", showURI(store))
}
