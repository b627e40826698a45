package lance

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/retain-dev/retain/core/storage"
)

// Typed refusals about branches.
var (
	// ErrMalformedBranch: a branch file retain cannot read as Lance would.
	ErrMalformedBranch = errors.New("malformed Lance branch file")
	// ErrBranchNotFound: no branch of that name.
	ErrBranchNotFound = errors.New("Lance branch not found")
)

// Branch is one Lance branch, from _refs/branches/<name>.json (a '/' in
// the name is written %2F, non-ASCII bytes %XX). Its dataset is rooted at
// tree/<name>/ (the name's segments as they are) with its own _versions/:
// see (*Dataset).Branch. Its first manifest carries the parent's version
// number.
type Branch struct {
	Name string
	// ParentBranch is the branch it was forked from; "" for main.
	ParentBranch  string
	ParentVersion uint64
	// CreatedAt is createAt (Unix seconds).
	CreatedAt time.Time
	// ManifestSize is the size of the parent's manifest at the fork.
	ManifestSize uint64
	Metadata     map[string]string
	// Lineage is identifier.version_mapping as Lance wrote it: one
	// [version, id] pair per fork in the branch's ancestry, oldest first.
	// Nil when the file has no identifier (older Lance).
	Lineage []BranchFork
	// Info is the branch file's key, size and version token.
	Info storage.Info
}

// BranchFork is one entry of a branch's lineage.
type BranchFork struct {
	Version uint64
	ID      string
}

// Branch returns the dataset of branch name: tree/<name>/ under d, which
// must be the main dataset. It reads nothing; Latest on it is the branch's
// head.
func (d *Dataset) Branch(name string) (*Dataset, error) {
	if err := ValidateBranchName(name); err != nil {
		return nil, err
	}
	return Open(d.Store, d.Key(treeDir+"/"+name))
}

// BranchHead returns the newest version of branch name.
func (d *Dataset) BranchHead(ctx context.Context, name string) (Version, error) {
	b, err := d.Branch(name)
	if err != nil {
		return Version{}, err
	}
	v, err := b.Latest(ctx)
	if err != nil {
		return Version{}, fmt.Errorf("head of branch %q: %w", name, err)
	}
	return v, nil
}

// ListBranches reads every branch under _refs/branches/, sorted by name, as
// ListTags reads tags: malformed files are reported together in a
// *MalformedRefsError (ErrMalformedBranch) next to the good branches.
func (d *Dataset) ListBranches(ctx context.Context) ([]Branch, error) {
	var good []Branch
	var bad []*MalformedRefError
	err := d.readRefs(ctx, "branch", branchesDir, branchNameFromFile, func(name string, body []byte, info storage.Info) {
		b, err := parseBranch(body)
		if err != nil {
			bad = append(bad, &MalformedRefError{Ref: "branch", Key: info.Key, Reason: err.Error()})
			return
		}
		b.Name, b.Info = name, info
		good = append(good, b)
	}, func(m *MalformedRefError) { bad = append(bad, m) })
	if err != nil {
		return nil, err
	}
	sort.Slice(good, func(i, j int) bool { return good[i].Name < good[j].Name })
	if len(bad) > 0 {
		sort.Slice(bad, func(i, j int) bool { return bad[i].Key < bad[j].Key })
		return good, &MalformedRefsError{Ref: "branch", Files: bad}
	}
	return good, nil
}

// ReadBranch reads one branch's ref. A missing branch is ErrBranchNotFound
// (kind storage.ErrNotFound).
func (d *Dataset) ReadBranch(ctx context.Context, name string) (Branch, error) {
	file, err := branchFileName(name)
	if err != nil {
		return Branch{}, err
	}
	key := d.Key(branchesDir + "/" + file)
	body, info, err := d.Store.ReadAll(ctx, key)
	if errors.Is(err, storage.ErrNotFound) {
		return Branch{}, &RefError{Op: "read-branch", Key: key, Err: ErrBranchNotFound, Msg: fmt.Sprintf("no branch %q", name), Cause: err}
	}
	if err != nil {
		return Branch{}, err
	}
	b, err := parseBranch(body)
	if err != nil {
		return Branch{}, &MalformedRefError{Ref: "branch", Key: key, Reason: err.Error()}
	}
	b.Name, b.Info = name, info
	return b, nil
}
