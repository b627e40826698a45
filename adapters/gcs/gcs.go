// Package gcs is the Google Cloud Storage adapter: store gs://bucket/prefix
// keeps key "a/b" as the object "prefix/a/b" of the bucket, holding exactly
// the body, so other programs (Lance) read the dataset directly.
//
// How each guarantee is made:
//
//   - create-if-absent is an upload with ifGenerationMatch=0
//     (Conditions.DoesNotExist): GCS refuses it with 412 if any live
//     generation exists, atomically for every writer of the bucket.
//   - replace-if-version is an upload with ifGenerationMatch=<generation>.
//   - The version token is the object's generation, a decimal number GCS
//     assigns afresh on every write (so versions are unique per key).
//   - delete-if-version names the generation (objects.delete?generation=G):
//     GCS deletes exactly that generation, or answers 404 when it is not the
//     live one. On a bucket with object versioning a stale generation may
//     still exist as a noncurrent version, and deleting it would succeed
//     while the live object stays, so with conditional-delete=auto the
//     adapter probes at open which form the endpoint honours (see probe.go).
//   - Retries are the Go client's own (retry.go), bounded to 5 attempts.
//     The client retries conditional requests on transient failures, so a
//     create or replace whose first response was lost comes back 412 on the
//     retry. Every write therefore carries a random id in its metadata
//     (retain-write-id), and a 412 is read back: if the live object carries
//     our id, the write did land.
//   - Get reads one response whose x-goog-generation header names the
//     generation streamed; the client pins that generation if it has to
//     reopen the stream, so the body is never a mix of two writes.
//
// Names reserved for the adapter: the top-level segment ".retain-probe"
// (scratch objects of the open-time probe). Keys using it are refused with
// ErrInvalidArgument and List never shows them.
package gcs

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"sort"
	"strings"

	"cloud.google.com/go/auth"
	"cloud.google.com/go/auth/credentials"
	gcsapi "cloud.google.com/go/storage"
	"google.golang.org/api/iterator"
	"google.golang.org/api/option"

	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/storage/redact"
)

const (
	// Name is the adapter's name; Scheme its store URI scheme.
	Name   = "gcs"
	Scheme = "gs"

	// probeDir is the top-level segment under the store prefix where the
	// open-time probe writes its scratch objects.
	probeDir = ".retain-probe"
	// writeIDKey is the object metadata key holding each write's random id.
	writeIDKey = "retain-write-id"

	// maxObjectName is GCS's limit on an object name, in UTF-8 bytes.
	maxObjectName = 1024
	// maxObjectSize is GCS's limit on one object (5 TiB).
	maxObjectSize  = 5 << 40
	maxDeleteBatch = 1000
	maxListPage    = 1000
	// parallelism: GCS serves many requests at once; 64 keeps a store-wide
	// pass quick well inside a bucket's request rate.
	parallelism = 64
	// deleteConcurrency bounds the deletes one DeleteMany runs at once: GCS
	// has no batch delete in the JSON API the Go client speaks.
	deleteConcurrency = 16

	emulatorEnv = "STORAGE_EMULATOR_HOST"
)

// Option names of the store URI.
const (
	optEndpoint          = "endpoint"
	optConditionalDelete = "conditional-delete"
)

// Values of conditional-delete.
const (
	modeAuto = "auto"
	modeOn   = "on"
	modeOff  = "off"
)

// Adapter opens gs:// stores.
var Adapter = storage.Adapter{
	Name:    Name,
	Schemes: []string{Scheme},
	Open: func(ctx context.Context, loc storage.Location) (storage.Driver, error) {
		d, err := Open(ctx, loc)
		if err != nil {
			return nil, err
		}
		return d, nil
	},
}

// Driver is a GCS store: one bucket and a key prefix. It implements
// storage.Driver and is safe for concurrent use.
type Driver struct {
	client     *gcsapi.Client
	bucket     *gcsapi.BucketHandle
	bucketName string
	// prefix is the store prefix with a trailing '/', or empty.
	prefix string
	del    deleteStrategy
	caps   storage.Capabilities
	// readOnly: opened read-only (storage.Location.ReadOnly): no probe ran and
	// every write is refused.
	readOnly bool
}

var _ storage.Driver = (*Driver)(nil)

// config is what the store URI's options say.
type config struct {
	endpoint string // JSON API base URL, or empty for the default
	condDel  string // auto, on or off
}

// bucketName is GCS's bucket naming rule (lowercase letters, digits, '-',
// '_' and '.'; 3 to 222 characters; starting and ending alphanumeric).
var bucketName = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{1,220}[a-z0-9]$`)

func parseConfig(loc storage.Location) (config, error) {
	const op = "open"
	where := storeName(loc)
	if loc.Scheme != Scheme {
		return config{}, storage.Errorf(op, where, storage.ErrInvalidArgument, "the gcs adapter serves gs:// locations, not %q", loc.Scheme)
	}
	if !bucketName.MatchString(loc.Bucket) {
		return config{}, storage.Errorf(op, where, storage.ErrInvalidArgument,
			"%q is not a GCS bucket name: 3-222 lowercase letters, digits, '-', '_' or '.', starting and ending with a letter or digit", loc.Bucket)
	}
	if loc.Prefix != "" {
		if err := storage.ValidatePrefix(op, loc.Prefix); err != nil {
			return config{}, err
		}
	}
	cfg := config{condDel: modeAuto}
	var unknown []string
	for k, v := range loc.Options {
		switch k {
		case optEndpoint:
			ep, err := normalizeEndpoint(v)
			if err != nil {
				return config{}, storage.Errorf(op, where, storage.ErrInvalidArgument, "endpoint: %v", err)
			}
			cfg.endpoint = ep
		case optConditionalDelete:
			switch v {
			case modeAuto, modeOn, modeOff:
				cfg.condDel = v
			default:
				return config{}, storage.Errorf(op, where, storage.ErrInvalidArgument,
					"conditional-delete=%q: use auto (probe at open), on or off", v)
			}
		default:
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return config{}, storage.Errorf(op, where, storage.ErrInvalidArgument,
			"unknown option(s) %s: the gcs adapter takes endpoint and conditional-delete", strings.Join(unknown, ", "))
	}
	return cfg, nil
}

// normalizeEndpoint checks an endpoint URL and gives it the JSON API path
// when it has none, so endpoint=http://host:port works.
func normalizeEndpoint(s string) (string, error) {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return "", fmt.Errorf("want an http(s) URL such as https://storage.googleapis.com/storage/v1/")
	}
	if u.User != nil {
		// Never echo it: it would carry a secret into messages.
		return "", fmt.Errorf("the URL must not carry user information; credentials come from Application Default Credentials")
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("the URL must not have a query or fragment")
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = "/storage/v1/"
	}
	if !strings.HasSuffix(u.Path, "/") {
		u.Path += "/"
	}
	return u.String(), nil
}

// Open connects to the store at loc: it builds the client (emulator from
// STORAGE_EMULATOR_HOST, else Application Default Credentials), checks
// that the bucket exists and can be listed, and with
// conditional-delete=auto probes what the endpoint honours.
func Open(ctx context.Context, loc storage.Location) (*Driver, error) {
	return openWith(ctx, loc, testHooks{})
}

func openWith(ctx context.Context, loc storage.Location, hooks testHooks) (*Driver, error) {
	const op = "open"
	cfg, err := parseConfig(loc)
	if err != nil {
		return nil, err
	}
	where := storeName(loc)
	opts := []option.ClientOption{gcsapi.WithDisabledClientMetrics()}
	if cfg.endpoint != "" {
		opts = append(opts, option.WithEndpoint(cfg.endpoint))
	}
	emulator := envEmulator()
	if emulator == "" {
		// Detect the credentials here rather than inside the client, which
		// defers a failure to the first request as an untyped error.
		creds, err := credentials.DetectDefault(&credentials.DetectOptions{Scopes: []string{gcsapi.ScopeReadWrite}})
		if err != nil {
			return nil, &storage.Error{Op: op, Key: where, Kind: storage.ErrPermissionDenied,
				Msg: "no usable Google credentials: set GOOGLE_APPLICATION_CREDENTIALS to a key file, run `gcloud auth application-default login`, or run on Google Cloud (or set STORAGE_EMULATOR_HOST for an emulator)",
				Err: redact.Error(err)}
		}
		// What the credentials hold (the key file's secrets) and every
		// token they hand out are masked from this process's messages.
		redact.RegisterGoogleJSON(creds.JSON())
		creds.TokenProvider = maskedTokens{creds.TokenProvider}
		opts = append(opts, option.WithAuthCredentials(creds))
	}
	// The client may keep the context it was built with for its
	// transport; the driver outlives Open's.
	client, err := gcsapi.NewClient(context.WithoutCancel(ctx), opts...)
	if err != nil {
		return nil, mapErr(op, where, fmt.Errorf("creating the storage client: %w", err))
	}
	d := &Driver{client: client, bucketName: loc.Bucket}
	// Before the bucket handle, which copies the client's retry settings.
	d.configureRetry(hooks)
	d.bucket = client.Bucket(loc.Bucket)
	if loc.Prefix != "" {
		d.prefix = loc.Prefix + "/"
	}
	if err := d.checkBucket(ctx, where); err != nil {
		client.Close()
		return nil, err
	}
	target := "storage.googleapis.com (Application Default Credentials)"
	switch {
	case cfg.endpoint != "":
		target = "endpoint " + cfg.endpoint
		if emulator != "" {
			target += " (no authentication: STORAGE_EMULATOR_HOST is set)"
		} else {
			target += " (Application Default Credentials)"
		}
	case emulator != "":
		target = "emulator " + emulator + " from STORAGE_EMULATOR_HOST (no authentication)"
	}
	d.readOnly = loc.ReadOnly
	if err := d.setup(ctx, cfg, target); err != nil {
		client.Close()
		return nil, err
	}
	return d, nil
}

// maskedTokens registers every access token it hands out with redact, so
// an endpoint echoing one back finds it masked.
type maskedTokens struct{ auth.TokenProvider }

func (m maskedTokens) Token(ctx context.Context) (*auth.Token, error) {
	t, err := m.TokenProvider.Token(ctx)
	if err == nil && t != nil {
		redact.Register(t.Value)
	}
	return t, err
}

// checkBucket lists at most one object under the prefix: it proves the
// bucket exists and that the credentials may list it, and turns a missing
// bucket into a not-found error naming it (object calls cannot tell a
// missing bucket from a missing object).
func (d *Driver) checkBucket(ctx context.Context, where string) error {
	it := d.bucket.Objects(ctx, &gcsapi.Query{Prefix: d.prefix, Projection: gcsapi.ProjectionNoACL})
	it.PageInfo().MaxSize = 1
	if _, err := it.Next(); err != nil && err != iterator.Done {
		return d.mapErrBucket("open", where, err)
	}
	return nil
}

// setup fixes the capabilities, probing conditional delete if asked to.
func (d *Driver) setup(ctx context.Context, cfg config, target string) error {
	caps := storage.Capabilities{
		CreateIfAbsent: storage.Capability{Level: storage.LevelNative, Scope: storage.ScopeGlobal,
			Reason: "upload with ifGenerationMatch=0 (Conditions.DoesNotExist): GCS answers 412 if any live generation exists, atomically for every writer"},
		ReplaceIfVersion: storage.Capability{Level: storage.LevelNative, Scope: storage.ScopeGlobal,
			Reason: "upload with ifGenerationMatch=<generation>: GCS answers 412 unless that generation is the live one"},
		Limits:         storage.Limits{MaxObjectSize: maxObjectSize, MaxDeleteBatch: maxDeleteBatch, MaxListPage: maxListPage, Parallelism: parallelism},
		OrderedList:    true,
		ListAfterWrite: true,
		ListDelimiter:  true,
		UniqueVersions: true,
		Notes: []string{
			"bucket " + d.bucketName + " via " + target,
			"version token: the object generation in decimal; GCS assigns a new one on every write",
			"a create or replace retried by the client after a lost response is read back: a 412 whose live object carries this write's " + writeIDKey + " metadata is reported as success",
			"no gates: GCS has no lock primitive that survives a crashed holder, so none is offered",
			"DeleteMany runs at most 16 single-object deletes at once: the JSON API has no multi-object delete",
			fmt.Sprintf("retries: the storage client's (408, 429, 5xx, broken connections; conditional uploads and overwrites included), at most %d attempts per call with exponential back-off from 1 s to 30 s; throttling past them is transient: lower --max-rps or --parallelism", retryMaxAttempts),
		},
	}
	if d.readOnly {
		none := storage.Capability{Level: storage.LevelNone, Reason: "opened read-only"}
		caps.CreateIfAbsent, caps.ReplaceIfVersion, caps.DeleteIfVersion = none, none, none
		caps.ReadOnly = true
		caps.Notes = append(caps.Notes, "opened read-only: the endpoint was not probed and every write is refused")
		d.caps = caps
		return nil
	}
	var obs, matchObs *delObservation
	if cfg.condDel == modeAuto {
		o, err := d.probeDelete(ctx, delByGeneration)
		if err != nil {
			return err
		}
		obs = &o
		if !o.passed() && o.skipped == "" {
			m, err := d.probeDelete(ctx, delByMatch)
			if err != nil {
				return err
			}
			matchObs = &m
		}
	}
	var note string
	d.del, caps.DeleteIfVersion, note = decideDelete(cfg.condDel, obs, matchObs)
	caps.Notes = append(caps.Notes, note)
	d.caps = caps
	return nil
}

// storeName names the store in messages: scheme, bucket and prefix, never
// the options (an endpoint could carry user information).
func storeName(loc storage.Location) string {
	loc.Options = nil
	return loc.String()
}

func envEmulator() string { return os.Getenv(emulatorEnv) }

// Capabilities declares what this instance provides; it never changes.
func (d *Driver) Capabilities(ctx context.Context) (storage.Capabilities, error) {
	if err := ctx.Err(); err != nil {
		return storage.Capabilities{}, ctxErr("capabilities", "", err)
	}
	c := d.caps
	c.Notes = append([]string(nil), c.Notes...)
	return c, nil
}

// Bucket is the store's bucket; Prefix its key prefix (without the
// trailing '/').
func (d *Driver) Bucket() string { return d.bucketName }
func (d *Driver) Prefix() string { return strings.TrimSuffix(d.prefix, "/") }

// Close releases the client's connections.
func (d *Driver) Close() error { return d.client.Close() }

// AcquireGate refuses: the adapter declares no gates.
func (d *Driver) AcquireGate(ctx context.Context, name string) (storage.GateLease, error) {
	if d.readOnly {
		return storage.GateLease{}, storage.ReadOnlyError("acquire-gate", name)
	}
	return storage.GateLease{}, storage.Errorf("acquire-gate", name, storage.ErrUnsupported,
		"gate %q is not declared: the gcs adapter offers no gates (GCS has no lock that survives a crashed holder)", name)
}

// ReleaseGate refuses: no gate can be held.
func (d *Driver) ReleaseGate(ctx context.Context, lease storage.GateLease) error {
	return storage.Errorf("release-gate", lease.Name, storage.ErrUnsupported,
		"gate %q is not declared: the gcs adapter offers no gates", lease.Name)
}

// objectName checks a key and returns the object's name in the bucket.
func (d *Driver) objectName(op, key string) (string, error) {
	if err := checkKey(op, key); err != nil {
		return "", err
	}
	name := d.prefix + key
	if len(name) > maxObjectName {
		return "", storage.Errorf(op, key, storage.ErrInvalidArgument,
			"with the store prefix the object name is %d bytes; GCS allows at most %d", len(name), maxObjectName)
	}
	return name, nil
}

// checkKey runs the contract's key rules and the adapter's reserved name.
func checkKey(op, key string) error {
	if err := storage.ValidateKey(op, key); err != nil {
		return err
	}
	if key == probeDir || strings.HasPrefix(key, probeDir+"/") {
		return storage.Errorf(op, key, storage.ErrInvalidArgument,
			"invalid key: the top-level segment %q is reserved for the gcs adapter's probe", probeDir)
	}
	return nil
}

func randHex() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
