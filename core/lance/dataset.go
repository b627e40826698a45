// Package lance reads and writes the on-disk metadata of Lance datasets —
// versions, manifests, tags and branches — through the storage contract, so
// it works on every adapter. No Go binding of Lance exists here; real Lance
// (the npm package @lancedb/lancedb, see internal/lancetest) is the judge in
// the tests. Everything destructive fails closed: a manifest, tag or name
// this package does not fully understand is a reason to keep, never to
// delete.
package lance

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/retain-dev/retain/core/storage"
)

// Typed refusals. Each concrete error wraps one of these and names the key.
var (
	// ErrNotDataset: no _versions/ manifests under the root.
	ErrNotDataset = errors.New("not a Lance dataset")
	// ErrMixedNaming: V1 and V2 manifest names in one _versions/ folder.
	ErrMixedNaming = errors.New("mixed manifest naming schemes")
)

// Naming is a manifest naming scheme.
type Naming uint8

const (
	// NamingV1: _versions/{N}.manifest.
	NamingV1 Naming = 1
	// NamingV2: _versions/{u64::MAX - N, 20 digits}.manifest: an ordered
	// listing yields the newest version first.
	NamingV2 Naming = 2
)

func (n Naming) String() string {
	switch n {
	case NamingV1:
		return "v1"
	case NamingV2:
		return "v2"
	}
	return "unknown"
}

const (
	versionsDir     = "_versions"
	manifestSuffix  = ".manifest"
	v2NameDigits    = 20
	latestHintName  = "latest_version_hint.json"
	maxVersionsList = 10_000_000 // a bound on one listing, never reached in practice
)

// Dataset is one Lance dataset (a LanceDB table is <db>/<table>.lance) at a
// key prefix of a store.
type Dataset struct {
	Store *storage.Store
	// Root is the dataset's key prefix without a trailing '/', or "" for a
	// dataset at the store's root.
	Root string
}

// Open returns the dataset at root. It does not read anything yet.
func Open(s *storage.Store, root string) (*Dataset, error) {
	root = strings.Trim(root, "/")
	if root != "" {
		if err := storage.ValidateKey("lance-open", root); err != nil {
			return nil, err
		}
	}
	return &Dataset{Store: s, Root: root}, nil
}

// Key joins the dataset root and a path relative to it.
func (d *Dataset) Key(rel string) string {
	if d.Root == "" {
		return rel
	}
	return d.Root + "/" + rel
}

// Rel strips the dataset root from a key.
func (d *Dataset) Rel(key string) string {
	if d.Root == "" {
		return key
	}
	return strings.TrimPrefix(key, d.Root+"/")
}

// Version is one manifest of the dataset.
type Version struct {
	N      uint64
	Naming Naming
	// Key is the manifest's full key; Info its size and version token.
	Key  string
	Info storage.Info
}

// ManifestName returns the manifest file name of version n under naming.
func ManifestName(n uint64, naming Naming) string {
	if naming == NamingV2 {
		return fmt.Sprintf("%020d%s", uint64(math.MaxUint64)-n, manifestSuffix)
	}
	return strconv.FormatUint(n, 10) + manifestSuffix
}

// parseManifestName returns the version a name under _versions/ stands for,
// its naming, and ok=false for names that are not committed manifests
// (detached d… manifests, .tmp files, the latest-version hint, others).
func parseManifestName(name string) (uint64, Naming, bool) {
	if !strings.HasSuffix(name, manifestSuffix) || strings.Contains(name, ".tmp") {
		return 0, 0, false
	}
	digits := strings.TrimSuffix(name, manifestSuffix)
	if digits == "" || digits[0] < '0' || digits[0] > '9' {
		return 0, 0, false // detached "d{N}" and anything else
	}
	v, err := strconv.ParseUint(digits, 10, 64)
	if err != nil {
		return 0, 0, false
	}
	if len(digits) == v2NameDigits {
		return math.MaxUint64 - v, NamingV2, true
	}
	if len(digits) > 1 && digits[0] == '0' {
		return 0, 0, false // V1 names are not zero-padded
	}
	return v, NamingV1, true
}

// Versions lists every committed version, oldest first. It refuses a folder
// that mixes naming schemes and a root without manifests.
func (d *Dataset) Versions(ctx context.Context) ([]Version, error) {
	objs, err := d.Store.List(ctx, d.Key(versionsDir)+"/", maxVersionsList)
	if err != nil {
		return nil, err
	}
	return d.versionsIn(objs)
}

// versionsIn is Versions over a listing of _versions/ already made.
func (d *Dataset) versionsIn(objs []storage.Info) ([]Version, error) {
	var out []Version
	var naming Naming
	for _, o := range objs {
		name := strings.TrimPrefix(o.Key, d.Key(versionsDir)+"/")
		if strings.Contains(name, "/") {
			continue
		}
		n, nm, ok := parseManifestName(name)
		if !ok {
			continue
		}
		if naming != 0 && nm != naming {
			return nil, fmt.Errorf("%w: %s holds both %s and %s manifest names (Lance's manifest migration stopped half-way?); Lance refuses this too and retain will not guess which is current: finish the rename as migrateManifestPathsV2 does (each N.manifest becomes the 20-digit name of 18446744073709551615-N; where both names exist the bytes are the same: remove the V1 one), then run the command again",
				ErrMixedNaming, d.Key(versionsDir), naming, nm)
		}
		naming = nm
		out = append(out, Version{N: n, Naming: nm, Key: o.Key, Info: o})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: no manifests under %s/", ErrNotDataset, d.Key(versionsDir))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].N < out[j].N })
	return out, nil
}

// Latest returns the newest version. With V2 names on an adapter with
// ordered listing it costs one bounded listing request: V2 names sort
// newest first, and starting after "_versions//" skips ".tmp" files
// ('/' sorts just below the digits). A V1 name seen before the first V2
// name (V1 names of versions whose digits sort below "18446744...") sends
// it to the full listing, which refuses the mix; a V1 name sorting after
// every V2 name is only caught by Versions.
func (d *Dataset) Latest(ctx context.Context) (Version, error) {
	if d.Store.Capabilities().OrderedList {
		prefix := d.Key(versionsDir) + "/"
		page, err := d.Store.ListPage(ctx, storage.ListOptions{Prefix: prefix, StartAfter: prefix + "/", PageSize: 8})
		if err != nil {
			return Version{}, err
		}
	scan:
		for _, o := range page.Objects {
			name := strings.TrimPrefix(o.Key, prefix)
			n, nm, ok := parseManifestName(name)
			switch {
			case !ok || strings.Contains(name, "/"):
			case nm == NamingV2:
				return Version{N: n, Naming: nm, Key: o.Key, Info: o}, nil
			default:
				break scan // V1 naming, or a mix: list everything
			}
		}
	}
	vs, err := d.Versions(ctx)
	if err != nil {
		return Version{}, err
	}
	return vs[len(vs)-1], nil
}

// VersionAt returns version n, or storage.ErrNotFound.
func (d *Dataset) VersionAt(ctx context.Context, n uint64) (Version, error) {
	vs, err := d.Versions(ctx)
	if err != nil {
		return Version{}, err
	}
	for _, v := range vs {
		if v.N == n {
			return v, nil
		}
	}
	return Version{}, storage.Errorf("lance-version", d.Key(versionsDir), storage.ErrNotFound, "version %d does not exist (latest is %d)", n, vs[len(vs)-1].N)
}
