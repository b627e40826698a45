// Package httpstore is a complete retain storage adapter for the tiny HTTP
// object store in ./server, written as the worked example of
// docs/adapters.md. It depends on the SDK module only.
//
// A store is named http://host:port/bucket[/prefix]. storage.ParseLocation
// reads that as Bucket "host:port" and Prefix "bucket[/prefix]": the first
// segment of Prefix is the server's bucket, the rest a key prefix inside it.
package httpstore

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strings"

	"github.com/retain-dev/retain/core/storage"
)

// TokenEnv names the variable holding the bearer token sent with every
// request. A plugin inherits the host's environment, so a user sets it on
// the retain command (HTTPSTORE_TOKEN=... retain --adapter ...).
const TokenEnv = "HTTPSTORE_TOKEN"

// Adapter is what the plugin binary serves and what tests open in-process.
var Adapter = storage.Adapter{
	Name:    "httpstore",
	Schemes: []string{"http"},
	Open: func(ctx context.Context, loc storage.Location) (storage.Driver, error) {
		return Open(ctx, loc)
	},
}

// Driver is a storage.Driver on one bucket (and key prefix) of an httpstore
// server.
type Driver struct {
	base     string // http://host:port
	bucket   string
	prefix   string // key prefix inside the bucket: "" or ending in '/'
	token    string
	readOnly bool
	limits   storage.Limits // what the server said at open
	client   *http.Client
}

// Open connects to the store at loc. It only reads (one HEAD of the
// bucket, which also reports the server's limits), so it is the same for a
// read-only open: nothing is ever written at open.
func Open(ctx context.Context, loc storage.Location) (*Driver, error) {
	d, err := newDriver(loc)
	if err != nil {
		return nil, err
	}
	if err := d.probe(ctx); err != nil {
		d.Close()
		return nil, err
	}
	return d, nil
}

// newDriver checks the location and builds the driver, without I/O.
func newDriver(loc storage.Location) (*Driver, error) {
	bad := func(format string, args ...any) (*Driver, error) {
		return nil, storage.Errorf("open", "", storage.ErrInvalidArgument, format, args...)
	}
	if loc.Scheme != "http" {
		return bad("httpstore serves http://host:port/bucket, not %s://", loc.Scheme)
	}
	if loc.Bucket == "" {
		return bad("no server address: write http://host:port/bucket")
	}
	if len(loc.Options) > 0 {
		keys := make([]string, 0, len(loc.Options))
		for k := range loc.Options {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		return bad("httpstore takes no query options (got %s): remove them; the token comes from $%s", strings.Join(keys, ", "), TokenEnv)
	}
	// ParseLocation validated Prefix with the key rules already.
	bucket, keyPrefix, _ := strings.Cut(loc.Prefix, "/")
	if bucket == "" {
		return bad("no bucket: write http://%s/bucket", loc.Bucket)
	}
	if keyPrefix != "" {
		keyPrefix += "/"
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	// The conformance race cases and retain's parallel deletes run many
	// requests at once; keep their connections instead of redialling.
	tr.MaxIdleConnsPerHost = 32
	return &Driver{
		base:     "http://" + loc.Bucket,
		bucket:   bucket,
		prefix:   keyPrefix,
		token:    os.Getenv(TokenEnv),
		readOnly: loc.ReadOnly,
		// No client timeout: every call's deadline comes from ctx, which
		// the plugin host sets (docs/adapters.md, call deadlines).
		client: &http.Client{Transport: tr},
	}, nil
}

// Close releases idle connections.
func (d *Driver) Close() error {
	d.client.CloseIdleConnections()
	return nil
}

// objectURL is the URL of a key (already validated) in the bucket. Each
// segment is escaped on its own so '/' stays the separator and a key
// holding '?', '#' or '%' still names exactly one object.
func (d *Driver) objectURL(key string) string {
	segs := strings.Split(d.prefix+key, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return d.bucketURL() + "/" + strings.Join(segs, "/")
}

func (d *Driver) bucketURL() string { return d.base + "/" + url.PathEscape(d.bucket) }

// newRequest builds a request bound to ctx, with the token when there is one.
func (d *Driver) newRequest(ctx context.Context, method, u string, body io.Reader) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return nil, err
	}
	if d.token != "" {
		req.Header.Set("Authorization", "Bearer "+d.token)
	}
	return req, nil
}
