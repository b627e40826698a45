// Package s3 is the adapter for Amazon S3 and S3-compatible object stores
// (versitygw, MinIO, Ceph RGW, ...), on the AWS SDK for Go v2. A store is
// s3://bucket/prefix; object key "a/b" is the S3 object "prefix/a/b".
//
// How each guarantee is made:
//
//   - create-if-absent is PutObject with If-None-Match: *, and
//     replace-if-version PutObject with If-Match: <etag>: S3 evaluates the
//     condition and the write atomically for every writer of the bucket.
//   - delete-if-version is DeleteObject with If-Match: <etag>, where the
//     endpoint honours it. Not every S3-compatible endpoint does (gofakes3
//     ignores it and deletes anyway), so by default Open probes once on a
//     scratch key under the store's prefix and declares what it found.
//   - The version token is the object's ETag without its quotes. ETags are
//     content hashes (MD5 for single-part uploads), so a rewrite of the same
//     bytes keeps the token: the adapter declares UniqueVersions false.
//   - Every conditional write carries a random id in the object's metadata
//     (x-amz-meta-retain-write-id). When the SDK retried a conditional write
//     whose first response was lost, the retry sees 412 although the write
//     was ours; a read-back of the id tells the two apart.
//   - Bodies are spooled (memory, then a temp file past 16 MiB) before the
//     PutObject, so the SDK can sign, checksum and retry them and the size
//     limit is checked before anything is sent.
//
// The top-level segment ".retain-probe" of a store is reserved for the
// probe's scratch objects: keys using it are refused and List hides it.
package s3

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/storage/redact"
)

const (
	// Name is the adapter's name; Scheme the store URI scheme it serves.
	Name   = "s3"
	Scheme = "s3"

	// probeDir is the reserved top-level segment for probe scratch keys.
	probeDir = ".retain-probe"
	// metaWriteID is the user metadata (x-amz-meta-...) holding the random
	// id of a conditional write.
	metaWriteID = "retain-write-id"

	// maxObjectSize is S3's limit for a single PutObject (5 GiB); larger
	// objects need multipart uploads, which this adapter does not do.
	maxObjectSize  = 5 << 30
	maxDeleteBatch = 1000 // DeleteObjects takes at most 1,000 keys
	maxListPage    = 1000 // ListObjectsV2 returns at most 1,000 keys
	// parallelism: S3 serves thousands of requests a second per prefix;
	// 64 in flight keeps a store-wide pass quick and far below that.
	parallelism = 64
)

// Adapter opens S3 stores for s3:// locations.
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

// Mode is a per-store setting for a conditional request the endpoint may
// or may not honour.
type Mode string

const (
	// ModeAuto probes the endpoint once at Open and declares what it does.
	ModeAuto Mode = "auto"
	// ModeOn declares the capability native without probing.
	ModeOn Mode = "on"
	// ModeOff declares the capability none.
	ModeOff Mode = "off"
)

// Options are the store URI's query options, parsed.
type Options struct {
	// Endpoint overrides the SDK's endpoint (AWS_ENDPOINT_URL, or AWS).
	Endpoint string
	// Region overrides the SDK's region (AWS_REGION, shared config).
	Region string
	// PathStyle selects path-style addressing (http://host/bucket/key).
	// Default: true when an endpoint is set, as emulators need.
	PathStyle *bool
	// ConditionalWrite governs create-if-absent and replace-if-version.
	ConditionalWrite Mode
	// ConditionalDelete governs delete-if-version.
	ConditionalDelete Mode
}

// ParseOptions reads a location's options. Unknown options are refused.
func ParseOptions(loc storage.Location) (Options, error) {
	o := Options{ConditionalWrite: ModeAuto, ConditionalDelete: ModeAuto}
	var unknown []string
	for k, v := range loc.Options {
		switch k {
		case "endpoint":
			o.Endpoint = v
		case "region":
			o.Region = v
		case "path-style":
			switch v {
			case "true":
				o.PathStyle = aws.Bool(true)
			case "false":
				o.PathStyle = aws.Bool(false)
			default:
				return o, optErr(loc, "path-style=%q: give true or false", v)
			}
		case "conditional-write", "conditional-delete":
			m := Mode(v)
			if m != ModeAuto && m != ModeOn && m != ModeOff {
				return o, optErr(loc, "%s=%q: give auto, on or off", k, v)
			}
			if k == "conditional-write" {
				o.ConditionalWrite = m
			} else {
				o.ConditionalDelete = m
			}
		default:
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return o, optErr(loc, "unknown option(s) %s: the s3 adapter takes endpoint, region, path-style, conditional-write and conditional-delete",
			strings.Join(unknown, ", "))
	}
	return o, nil
}

func optErr(loc storage.Location, format string, args ...any) *storage.Error {
	return storage.Errorf("open", redacted(loc), storage.ErrInvalidArgument, format, args...)
}

// redacted names a location without its options: an endpoint option could
// carry a secret the user pasted by mistake.
func redacted(loc storage.Location) string {
	loc.Options = nil
	return loc.String()
}

// checkEndpoint accepts an http(s) URL with a host and no user info; the
// URL itself is never echoed, in case it carries a secret.
func checkEndpoint(loc storage.Location, what, ep string) error {
	u, err := url.Parse(ep)
	switch {
	case err != nil:
		return optErr(loc, "%s is not a URL", what)
	case u.Scheme != "http" && u.Scheme != "https":
		return optErr(loc, "%s must be an http:// or https:// URL", what)
	case u.Host == "":
		return optErr(loc, "%s has no host", what)
	case u.User != nil:
		return optErr(loc, "%s carries user info: give credentials through the AWS credential chain, never in the URL", what)
	}
	return nil
}

// Driver is an S3 store: one bucket and a key prefix. It implements
// storage.Driver and is safe for concurrent use.
type Driver struct {
	client   *awss3.Client
	bucket   string
	prefix   string // "" or "some/prefix/" (with the trailing '/')
	endpoint string // for notes: "" means the SDK's AWS endpoint
	caps     storage.Capabilities
	// deleteHeadFirst: the endpoint is not known to answer a conditional
	// delete of a missing key with 404/412, so Delete reads the key first.
	deleteHeadFirst bool
	// verifyMD5: the endpoint's ETags are the MD5 of the body (probed at
	// open), so Get checks every body it streams against its ETag.
	verifyMD5 bool
	// readOnly: opened read-only (storage.Location.ReadOnly): no probe ran and
	// every write is refused.
	readOnly bool

	// maxAttempts and retryMode are the SDK retryer's, for messages.
	maxAttempts int
	retryMode   string
	hooks       testHooks

	closeOnce sync.Once
	transport *http.Transport
}

// testHooks are settings only tests change.
type testHooks struct {
	// backoff replaces the retryer's back-off (the SDK's waits 1 s and
	// more after a throttle), so tests of retries stay fast.
	backoff retry.BackoffDelayer
}

var _ storage.Driver = (*Driver)(nil)

// Open connects to the store at loc. With conditional-write or
// conditional-delete set to auto (the default) it probes the endpoint on a
// scratch key under the store's prefix before returning.
func Open(ctx context.Context, loc storage.Location) (*Driver, error) {
	return openWith(ctx, loc, testHooks{})
}

func openWith(ctx context.Context, loc storage.Location, hooks testHooks) (*Driver, error) {
	prefix, o, err := openOptions(ctx, loc)
	if err != nil {
		return nil, err
	}
	d := &Driver{bucket: loc.Bucket, hooks: hooks}
	if prefix != "" {
		d.prefix = prefix + "/"
	}
	region, pathStyle, err := d.configureClient(ctx, loc, o)
	if err != nil {
		return nil, err
	}
	caps := d.baseCapabilities(prefix, region, pathStyle)
	if loc.ReadOnly {
		// Open writes nothing: no probe, so nothing is declared that only
		// the probe could establish.
		d.readOnly = true
		caps.CreateIfAbsent, caps.ReplaceIfVersion, caps.DeleteIfVersion = capNone("opened read-only"), capNone("opened read-only"), capNone("opened read-only")
		caps.ReadOnly = true
		caps.Notes = append(caps.Notes, "opened read-only: the endpoint was not probed and every write is refused")
		d.caps = caps
		return d, nil
	}
	pr, err := d.probe(ctx, o)
	if err != nil {
		d.Close()
		return nil, err
	}
	d.caps = d.probedCapabilities(caps, o, pr)
	return d, nil
}

// openOptions checks the location and parses its options, before any
// AWS configuration is read: it returns the prefix without its slashes.
func openOptions(ctx context.Context, loc storage.Location) (string, Options, error) {
	const op = "open"
	if err := ctx.Err(); err != nil {
		return "", Options{}, ctxError(op, redacted(loc), err)
	}
	if loc.Scheme != Scheme {
		return "", Options{}, storage.Errorf(op, redacted(loc), storage.ErrInvalidArgument, "the s3 adapter serves s3:// locations, not %q", loc.Scheme)
	}
	if loc.Bucket == "" {
		return "", Options{}, storage.Errorf(op, redacted(loc), storage.ErrInvalidArgument, "no bucket: s3://bucket/optional/prefix")
	}
	prefix := strings.Trim(loc.Prefix, "/")
	if prefix != "" {
		if err := storage.ValidatePrefix(op, prefix); err != nil {
			return "", Options{}, err
		}
	}
	o, err := ParseOptions(loc)
	if err != nil {
		return "", Options{}, err
	}
	if o.Endpoint != "" {
		if err := checkEndpoint(loc, "endpoint=", o.Endpoint); err != nil {
			return "", Options{}, err
		}
	}
	return prefix, o, nil
}

// configureClient loads the AWS configuration and builds d's client,
// returning the region and addressing style it resolved.
func (d *Driver) configureClient(ctx context.Context, loc storage.Location, o Options) (string, bool, error) {
	const op = "open"
	// Capture the transport the SDK's client builds, so Close can drop its
	// idle connections.
	hc := awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) { d.transport = tr })
	loadOpts := []func(*config.LoadOptions) error{config.WithHTTPClient(hc)}
	if o.Region != "" {
		loadOpts = append(loadOpts, config.WithRegion(o.Region))
	}
	cfg, err := config.LoadDefaultConfig(ctx, loadOpts...)
	if err != nil {
		return "", false, &storage.Error{Op: op, Key: redacted(loc), Kind: storage.ErrInvalidArgument,
			Msg: "loading the AWS configuration (environment, shared config files)", Err: redact.Error(err)}
	}
	var endpoint, region string
	var pathStyle bool
	d.client = awss3.NewFromConfig(cfg, func(so *awss3.Options) {
		// so.BaseEndpoint is already resolved here from AWS_ENDPOINT_URL,
		// AWS_ENDPOINT_URL_S3 or the shared config; the URI option wins.
		if o.Endpoint != "" {
			so.BaseEndpoint = aws.String(o.Endpoint)
		}
		endpoint = aws.ToString(so.BaseEndpoint)
		region = so.Region
		if region == "" && endpoint != "" {
			// S3-compatible endpoints rarely care; SigV4 needs a region.
			region = "us-east-1"
		}
		so.Region = region
		pathStyle = endpoint != ""
		if o.PathStyle != nil {
			pathStyle = *o.PathStyle
		}
		so.UsePathStyle = pathStyle
		// so.RetryMode and so.RetryMaxAttempts hold what AWS_RETRY_MODE,
		// AWS_MAX_ATTEMPTS or the shared config set, if anything.
		d.maxAttempts = so.RetryMaxAttempts
		if d.maxAttempts <= 0 {
			d.maxAttempts = retryMaxAttempts
		}
		so.Retryer = newRetryer(so.RetryMode, d.maxAttempts, d.hooks.backoff)
		d.retryMode = "standard"
		if so.RetryMode == aws.RetryModeAdaptive {
			d.retryMode = "adaptive"
		}
		if cfg.Credentials != nil {
			so.Credentials = aws.NewCredentialsCache(markedCredentials{cfg.Credentials})
		}
	})
	if o.Endpoint == "" && endpoint != "" {
		if err := checkEndpoint(loc, "the configured endpoint (AWS_ENDPOINT_URL, AWS_ENDPOINT_URL_S3 or shared config)", endpoint); err != nil {
			return "", false, err
		}
	}
	if region == "" {
		return "", false, storage.Errorf(op, redacted(loc), storage.ErrInvalidArgument,
			"no AWS region: set AWS_REGION, a region in the shared config, or ?region= in the store URI")
	}
	d.endpoint = endpoint
	return region, pathStyle, nil
}

// baseCapabilities are what every open declares, before the probe.
func (d *Driver) baseCapabilities(prefix, region string, pathStyle bool) storage.Capabilities {
	return storage.Capabilities{
		Limits:         storage.Limits{MaxObjectSize: maxObjectSize, MaxDeleteBatch: maxDeleteBatch, MaxListPage: maxListPage, Parallelism: parallelism},
		OrderedList:    true,
		ListAfterWrite: true,
		ListDelimiter:  true,
		// ETags are content hashes: the same bytes give the same token.
		UniqueVersions: false,
		Notes: []string{
			fmt.Sprintf("bucket %s, prefix %q, region %s, %s, %s addressing", d.bucket, prefix, region, endpointNote(d.endpoint), styleName(pathStyle)),
			"version token: the object's ETag without quotes; ETags are content hashes (MD5 for single-part uploads), so rewriting the same bytes keeps the token (unique_versions false)",
			"objects are written with one PutObject each: at most 5 GiB per object; no multipart uploads",
			"no gates: S3 has no lock primitive the adapter could offer for multi-object writes",
			"list order and list-after-write rely on the endpoint listing in UTF-8 byte order with strong consistency, as AWS S3 does since December 2020",
			fmt.Sprintf("retries: the SDK's %s retryer (503 SlowDown and other throttling, 500, 502, 504, broken connections), at most %d attempts per call with exponential back-off and jitter (from 1 s after a throttle, at most 20 s); throttling past them is transient: lower --max-rps or --parallelism", d.retryMode, d.maxAttempts),
		},
	}
}

func capNone(reason string) storage.Capability {
	return storage.Capability{Level: storage.LevelNone, Reason: reason}
}

func capNative(reason string) storage.Capability {
	return storage.Capability{Level: storage.LevelNative, Scope: storage.ScopeGlobal, Reason: reason}
}

// probedCapabilities adds to caps the conditional operations the options
// and the probe allow, and sets how d deletes and reads.
func (d *Driver) probedCapabilities(caps storage.Capabilities, o Options, pr probeResult) storage.Capabilities {
	switch {
	case o.ConditionalWrite == ModeOff:
		caps.CreateIfAbsent = capNone("conditional-write=off in the store URI")
		caps.ReplaceIfVersion = capNone("conditional-write=off in the store URI")
	default:
		caps.CreateIfAbsent = capNative("PutObject with If-None-Match: *; the endpoint refuses it with 412 if the key exists")
		caps.ReplaceIfVersion = capNative("PutObject with If-Match: <ETag>; the endpoint refuses it with 412 if the ETag differs")
		if pr.createWhy != "" {
			caps.CreateIfAbsent = capNone(pr.createWhy)
		}
		if pr.replaceWhy != "" {
			caps.ReplaceIfVersion = capNone(pr.replaceWhy)
		}
	}
	switch {
	case o.ConditionalDelete == ModeOff:
		caps.DeleteIfVersion = capNone("conditional-delete=off in the store URI")
	case pr.deleteWhy != "":
		caps.DeleteIfVersion = capNone(pr.deleteWhy)
	default:
		caps.DeleteIfVersion = capNative("DeleteObject with If-Match: <ETag>; the endpoint refuses it with 412 if the ETag differs")
		d.deleteHeadFirst = !pr.missingAnswered
		if d.deleteHeadFirst {
			caps.Notes = append(caps.Notes, "delete-if-version reads the key (HeadObject) before the conditional DeleteObject, because this endpoint is not known to answer a conditional delete of a missing key with 404: a key deleted by someone else between the two is reported deleted rather than not found")
		}
	}
	if o.ConditionalWrite == ModeOn {
		caps.Notes = append(caps.Notes, "conditional-write=on: create-if-absent and replace-if-version declared native without probing the endpoint")
	}
	if o.ConditionalDelete == ModeOn {
		caps.Notes = append(caps.Notes, "conditional-delete=on: delete-if-version declared native without probing the endpoint")
	}
	if pr.etagIsMD5 {
		d.verifyMD5 = true
		caps.Notes = append(caps.Notes, "the probe's writes came back with the MD5 of their bodies as ETags: every Get checks the body it streams against its ETag and fails rather than return bytes under another version's token (versitygw 1.8.0 was seen answering a GET under concurrent writes with one version's ETag and another's body)")
	}
	caps.Notes = append(caps.Notes, pr.notes...)
	return caps
}

func endpointNote(ep string) string {
	if ep == "" {
		return "AWS endpoint"
	}
	return "endpoint " + ep
}

func styleName(path bool) string {
	if path {
		return "path-style"
	}
	return "virtual-hosted-style"
}

// Capabilities declares what this instance provides; it never changes.
func (d *Driver) Capabilities(ctx context.Context) (storage.Capabilities, error) {
	if err := ctx.Err(); err != nil {
		return storage.Capabilities{}, ctxError("capabilities", "", err)
	}
	c := d.caps
	c.Notes = append([]string(nil), c.Notes...)
	return c, nil
}

// Bucket is the store's bucket.
func (d *Driver) Bucket() string { return d.bucket }

// Client is the SDK client the driver uses, for tests and tools.
func (d *Driver) Client() *awss3.Client { return d.client }

// Close drops idle connections. Readers returned by Get stay valid until
// closed.
func (d *Driver) Close() error {
	d.closeOnce.Do(func() {
		if d.transport != nil {
			d.transport.CloseIdleConnections()
		}
	})
	return nil
}

// AcquireGate refuses: the adapter declares no gates.
func (d *Driver) AcquireGate(ctx context.Context, name string) (storage.GateLease, error) {
	if d.readOnly {
		return storage.GateLease{}, storage.ReadOnlyError("acquire-gate", name)
	}
	return storage.GateLease{}, storage.Errorf("acquire-gate", name, storage.ErrUnsupported,
		"the s3 adapter declares no gates: S3 has no lock primitive to build one on")
}

// ReleaseGate refuses: the adapter declares no gates.
func (d *Driver) ReleaseGate(ctx context.Context, l storage.GateLease) error {
	return storage.Errorf("release-gate", l.Name, storage.ErrUnsupported,
		"the s3 adapter declares no gates: S3 has no lock primitive to build one on")
}

// checkKey runs the contract's key rules and the adapter's reserved name.
func checkKey(op, key string) error {
	if err := storage.ValidateKey(op, key); err != nil {
		return err
	}
	if reserved(key) {
		return storage.Errorf(op, key, storage.ErrInvalidArgument,
			"invalid key: the top-level segment %q is reserved for the s3 adapter's probe", probeDir)
	}
	return nil
}

func reserved(key string) bool {
	return key == probeDir || strings.HasPrefix(key, probeDir+"/")
}

// full is the S3 object key of a store key.
func (d *Driver) full(key string) string { return d.prefix + key }

func randHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func ctxError(op, key string, err error) *storage.Error {
	return &storage.Error{Op: op, Key: key, Kind: storage.ErrTransient, Msg: "context done", Err: err}
}
