package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/retain-dev/retain/core/lance"
	"github.com/retain-dev/retain/core/storage"
)

const branchTableURI = `TABLE-URI is the dataset itself, as for inspect: /data/db/t.lance,
file:///data/db/t.lance, s3://bucket/db/t.lance?endpoint=..., gs://...,
az://.... It is opened through its parent (the database folder or prefix),
the store every other command opens, where the retention claim lives.
The table comes last (branch show BRANCH TABLE-URI), as the store does in
every command; the order TABLE-URI BRANCH of earlier releases is still
accepted in this one, with a warning.`

// branchTarget is a TABLE-URI split into its store and the table folder.
type branchTarget struct {
	uri, storeURI, table string
	local                string // the dataset's folder for a file:// URI
}

// branchSplit splits a TABLE-URI into the store (its parent) and the
// table, the store's top-level folder.
func branchSplit(uri string) (branchTarget, error) {
	loc, err := storage.ParseLocation(uri)
	if err != nil {
		return branchTarget{}, err
	}
	bt := branchTarget{uri: uri}
	parent := loc
	switch loc.Scheme {
	case "file":
		dir, base := filepath.Dir(loc.Path), filepath.Base(loc.Path)
		if dir == loc.Path {
			return bt, usageError{fmt.Errorf("%s: name a table folder, e.g. /data/db/t.lance", uri)}
		}
		parent.Path, bt.table, bt.local = dir, base, loc.Path
	default:
		if loc.Prefix == "" {
			return bt, usageError{fmt.Errorf("%s: name a table under the bucket, e.g. %s://%s/db/t.lance", uri, loc.Scheme, loc.Bucket)}
		}
		i := strings.LastIndexByte(loc.Prefix, '/')
		bt.table = loc.Prefix[i+1:]
		parent.Prefix = ""
		if i > 0 {
			parent.Prefix = loc.Prefix[:i]
		}
	}
	bt.storeURI = parent.String()
	return bt, nil
}

// openBranchTable opens the table of uri through its store, read-only
// unless write.
func (a *app) openBranchTable(ctx context.Context, uri string, write bool) (branchTarget, *storage.Store, storage.Location, *lance.Dataset, error) {
	bt, err := branchSplit(uri)
	if err != nil {
		return bt, nil, storage.Location{}, nil, err
	}
	if bt.local != "" {
		if err := checkLocalDataset(uri, bt.local); err != nil {
			return bt, nil, storage.Location{}, nil, err
		}
	}
	// The table was checked above (or is read below): the store-misuse
	// check of store commands is not for a table command.
	s, loc, err := a.open(ctx, bt.storeURI, !write)
	if err != nil {
		return bt, nil, loc, nil, err
	}
	ds, err := lance.Open(s, bt.table)
	if err != nil {
		s.Close()
		return bt, nil, loc, nil, err
	}
	return bt, s, loc, ds, nil
}

// branchCheckDataset is called when a listing found no branch file: it
// tells an empty table from a URI that is no table (one listing of
// _versions/, never more).
func branchCheckDataset(ctx context.Context, bt branchTarget, s *storage.Store, ds *lance.Dataset) error {
	if bt.local != "" {
		return nil // checked before opening
	}
	if _, err := ds.Latest(ctx); err != nil {
		if errors.Is(err, lance.ErrNotDataset) {
			found := strings.TrimPrefix(err.Error(), lance.ErrNotDataset.Error()+": ")
			return notDataset(bt.uri, found, remoteTables(ctx, s))
		}
		return err
	}
	return nil
}
