// Package azure is the Azure Blob Storage adapter: store az://container/prefix
// keeps object key "a/b" as the block blob "prefix/a/b" of the container,
// holding exactly the body.
//
// How each guarantee is made:
//
//   - Every write is one Put Blob request (blockblob.Client.Upload), never a
//     staged block list: Azure applies a Put Blob atomically, and a
//     condition on it covers the whole write (on a staged upload it would
//     cover only the final commit).
//   - create-if-absent is Put Blob with If-None-Match: *; replace-if-version
//     is Put Blob with If-Match: <ETag>; delete-if-version is Delete Blob
//     with If-Match: <ETag>. The service evaluates each condition atomically
//     with the write, for every writer of the account.
//   - The version token is the blob's ETag (without its quotes, so Stat, Get
//     and List agree): the service changes it on every write, even of the
//     same bytes.
//   - Get returns the ETag, size and time of the very response whose body
//     it streams; if the connection breaks the body is re-requested from the
//     offset reached with If-Match of that ETag, so a reader never sees two
//     writes mixed.
//   - The SDK retries requests whose response was lost. A retried
//     conditional write can then meet its own first attempt (409 or 412
//     although the blob is ours), so every write stamps a random id in the
//     blob's metadata (retainwriteid) and a refused write whose earlier try
//     may have been applied checks it.
//
// Keys whose blob name would have a segment ending in '.' are refused: the
// Azure front end trims trailing dots from URL path segments, so "a." would
// be stored as "a".
package azure

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/service"

	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/storage/redact"
)

const (
	// Name is the adapter's name; Scheme its store URI scheme.
	Name   = "azure"
	Scheme = "az"

	// MaxObjectSize is the largest body one Put Blob accepts (service
	// versions 2019-12-12 and later; the SDK's blockblob.MaxUploadBlobBytes,
	// 256 MiB, is the older limit). Larger bodies would need a staged block
	// list, which a condition cannot cover, so they are refused.
	MaxObjectSize = 5000 << 20
	// maxDeleteBatch bounds one DeleteMany call; its deletes run
	// maxDeleteWorkers at a time.
	maxDeleteBatch   = 1000
	maxDeleteWorkers = 16
	// maxListPage keeps a listing page well under the plugin's 4 MiB gRPC
	// message limit even with 1 KiB keys (Azure allows 5000).
	maxListPage = 1000
	// parallelism: Blob Storage serves many requests at once; 64 keeps a
	// store-wide pass quick without tripping an account's throttling.
	parallelism = 64
	// maxBlobNameChars and maxBlobSegments are Azure's blob name limits.
	maxBlobNameChars = 1024
	maxBlobSegments  = 254

	// writeIDMeta is the metadata name of the per-write random id. Azure
	// metadata names are C# identifiers, case-insensitive.
	writeIDMeta = "retainwriteid"
	// probeDir is where the conditional-delete probe writes, under the
	// store's prefix.
	probeDir = ".retain-probe"

	envConnectionString = "AZURE_STORAGE_CONNECTION_STRING"
	envAccount          = "AZURE_STORAGE_ACCOUNT"
	envKey              = "AZURE_STORAGE_KEY"
)

// Options the store URI may carry.
const (
	OptAccount           = "account"
	OptEndpoint          = "endpoint"
	OptConditionalDelete = "conditional-delete"
)

// Adapter opens Azure Blob stores for az://container/prefix locations.
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

// Driver is an Azure Blob store: one container and a key prefix in it. It
// implements storage.Driver and is safe for concurrent use.
type Driver struct {
	cc     *container.Client
	bucket string // the container's name
	prefix string // "" or the store prefix with a trailing '/'
	caps   storage.Capabilities
	// condDelete says delete-if-version is declared (and so provided).
	condDelete bool
	// readOnly: opened read-only (storage.Location.ReadOnly): no probe ran and
	// every write is refused.
	readOnly bool
	closed   atomic.Bool

	markers markerCache
}

var _ storage.Driver = (*Driver)(nil)

// openOptions are test hooks.
type openOptions struct {
	transport policy.Transporter // replaces the HTTP client
	// retry: its non-zero fields replace the adapter's retry settings.
	retry *policy.RetryOptions
}

// Open connects to the container named by loc.Bucket. Credentials come from
// the environment (see docs/backend-azure.md): a connection string, else an
// account name and shared key, else DefaultAzureCredential. With
// conditional-delete=auto (the default) it probes under the store's prefix
// whether the endpoint honours If-Match on delete.
func Open(ctx context.Context, loc storage.Location) (*Driver, error) {
	return openWith(ctx, loc, openOptions{})
}

func openWith(ctx context.Context, loc storage.Location, o openOptions) (*Driver, error) {
	const op = "open"
	where := Scheme + "://" + loc.Bucket
	if loc.Prefix != "" {
		where += "/" + loc.Prefix
	}
	if err := ctx.Err(); err != nil {
		return nil, ctxError(op, where, err)
	}
	if loc.Scheme != Scheme {
		return nil, storage.Errorf(op, where, storage.ErrInvalidArgument, "the azure adapter serves %s:// locations, not %q", Scheme, loc.Scheme)
	}
	if err := checkContainerName(loc.Bucket); err != nil {
		return nil, storage.Errorf(op, where, storage.ErrInvalidArgument, "%s", err)
	}
	prefix := strings.Trim(loc.Prefix, "/")
	if prefix != "" {
		if err := storage.ValidatePrefix(op, prefix); err != nil {
			return nil, err
		}
		if err := checkBlobName(prefix); err != nil {
			return nil, storage.Errorf(op, where, storage.ErrInvalidArgument, "invalid prefix: %s", err)
		}
		prefix += "/"
	}
	var unknown []string
	for k := range loc.Options {
		switch k {
		case OptAccount, OptEndpoint, OptConditionalDelete:
		default:
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return nil, storage.Errorf(op, where, storage.ErrInvalidArgument,
			"unknown URI option %s: the azure adapter takes %s, %s and %s", strings.Join(unknown, ", "), OptAccount, OptEndpoint, OptConditionalDelete)
	}
	condMode := loc.Options[OptConditionalDelete]
	switch condMode {
	case "":
		condMode = "auto"
	case "auto", "on", "off":
	default:
		return nil, storage.Errorf(op, where, storage.ErrInvalidArgument, "%s=%q: want auto, on or off", OptConditionalDelete, condMode)
	}

	copts := &service.ClientOptions{}
	copts.PerRetryPolicies = []policy.Policy{attemptPolicy{}}
	copts.Telemetry.ApplicationID = "retain"
	if o.transport != nil {
		copts.Transport = o.transport
	}
	copts.Retry = withTestRetry(retryOptions(), o.retry)
	svc, credDesc, err := newServiceClient(loc.Options, copts)
	if err != nil {
		return nil, &storage.Error{Op: op, Key: where, Kind: storage.KindOf(err), Msg: err.Error()}
	}
	d := &Driver{cc: svc.NewContainerClient(loc.Bucket), bucket: loc.Bucket, prefix: prefix}
	d.markers.init(markerCacheSize)
	endpoint := redactURL(svc.URL())

	caps := storage.Capabilities{
		CreateIfAbsent: storage.Capability{Level: storage.LevelNative, Scope: storage.ScopeGlobal,
			Reason: "one Put Blob request with If-None-Match: *; the service refuses it with 409 BlobAlreadyExists when the blob exists"},
		ReplaceIfVersion: storage.Capability{Level: storage.LevelNative, Scope: storage.ScopeGlobal,
			Reason: "one Put Blob request with If-Match: <ETag>; the service refuses it with 412 ConditionNotMet when the ETag differs"},
		Limits:         storage.Limits{MaxObjectSize: MaxObjectSize, MaxDeleteBatch: maxDeleteBatch, MaxListPage: maxListPage, Parallelism: parallelism},
		OrderedList:    true,
		ListAfterWrite: true,
		ListDelimiter:  true,
		UniqueVersions: true,
		Notes: []string{
			"endpoint " + endpoint + ", container " + loc.Bucket + ", credentials: " + credDesc,
			"version token: the blob's ETag, which the service changes on every write",
			"bodies up to 8 MiB are buffered in memory, larger ones in an unlinked temp file, because one Put Blob needs a seekable body; the limit is 5000 MiB per object",
			"keys whose blob name has a segment ending in '.' are refused: Azure trims trailing dots from URL path segments",
			"StartAfter has no wire equivalent: a page that follows one this process returned resumes from the cached continuation marker, any other lists from the start of the prefix and skips",
			fmt.Sprintf("retries: azcore's policy (408, 429, 500, 502, 503 ServerBusy, 504, broken connections; Retry-After honoured), at most %d tries per call with exponential back-off from 0.8 s, at most 30 s a wait; throttling past them is transient: lower --max-rps or --parallelism", retryMaxRetries+1),
		},
	}
	if !isAzurePublicEndpoint(svc.URL()) {
		caps.Notes = append(caps.Notes, "the endpoint is not *.blob.core.windows.net: versions are whatever ETags it issues (Azurite 3.37 issues time x random(70000..100000), so two writes of one key in the same millisecond repeat a token with probability 1 in 30001)")
	}
	if loc.ReadOnly {
		d.readOnly = true
		none := storage.Capability{Level: storage.LevelNone, Reason: "opened read-only"}
		caps.CreateIfAbsent, caps.ReplaceIfVersion, caps.DeleteIfVersion = none, none, none
		caps.ReadOnly = true
		caps.Notes = append(caps.Notes, "opened read-only: the endpoint was not probed and every write is refused")
		d.caps = caps
		return d, nil
	}
	switch condMode {
	case "on":
		d.condDelete = true
		caps.DeleteIfVersion = storage.Capability{Level: storage.LevelNative, Scope: storage.ScopeGlobal,
			Reason: "Delete Blob with If-Match: <ETag> (conditional-delete=on: trusted without probing)"}
	case "off":
		caps.DeleteIfVersion = storage.Capability{Level: storage.LevelNone,
			Reason: "conditional-delete=off in the store URI"}
	case "auto":
		c, note, err := d.probeConditionalDelete(ctx)
		if err != nil {
			return nil, err
		}
		d.condDelete = c.Level != storage.LevelNone
		caps.DeleteIfVersion = c
		caps.Notes = append(caps.Notes, note)
	}
	d.caps = caps
	return d, nil
}

// newServiceClient picks the credentials: the connection string, else the
// shared key, else DefaultAzureCredential. Its errors never quote a secret.
func newServiceClient(opts map[string]string, copts *service.ClientOptions) (*service.Client, string, error) {
	account, endpoint := opts[OptAccount], opts[OptEndpoint]
	if account != "" {
		if err := checkAccountName(account); err != nil {
			return nil, "", storage.Errorf("", "", storage.ErrInvalidArgument, "%s=%q: %v", OptAccount, account, err)
		}
	}
	if endpoint != "" {
		u, err := url.Parse(endpoint)
		switch {
		case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
			return nil, "", storage.Errorf("", "", storage.ErrInvalidArgument, "%s= must be an http(s) URL such as https://ACCOUNT.blob.core.windows.net or http://127.0.0.1:10000/devstoreaccount1", OptEndpoint)
		case u.User != nil || u.RawQuery != "" || u.Fragment != "":
			// A SAS token here would end up in logs and messages.
			return nil, "", storage.Errorf("", "", storage.ErrInvalidArgument, "%s= must not carry credentials, a query or a fragment: give a SAS in %s instead", OptEndpoint, envConnectionString)
		}
		endpoint = strings.TrimSuffix(endpoint, "/")
	}

	if cs := os.Getenv(envConnectionString); cs != "" {
		// Its AccountKey or SAS is masked from this process's messages
		// whatever an endpoint echoes back.
		redact.RegisterConnectionString(cs)
		if account != "" || endpoint != "" {
			return nil, "", storage.Errorf("", "", storage.ErrInvalidArgument,
				"%s is set and names its own endpoint and account: drop %s= and %s= from the store URI, or unset it", envConnectionString, OptAccount, OptEndpoint)
		}
		svc, err := service.NewClientFromConnectionString(cs, copts)
		if err != nil {
			// The SDK's message could quote the string: say only where it is.
			return nil, "", storage.Errorf("", "", storage.ErrInvalidArgument, "%s is malformed (want AccountName=...;AccountKey=... or BlobEndpoint=...;SharedAccessSignature=...)", envConnectionString)
		}
		return svc, "connection string from " + envConnectionString, nil
	}

	envAcct, key := os.Getenv(envAccount), os.Getenv(envKey)
	if account == "" {
		account = envAcct
		if account != "" {
			if err := checkAccountName(account); err != nil {
				return nil, "", storage.Errorf("", "", storage.ErrInvalidArgument, "%s=%q: %v", envAccount, account, err)
			}
		}
	}
	serviceURL := endpoint
	if serviceURL == "" {
		if account == "" {
			return nil, "", storage.Errorf("", "", storage.ErrInvalidArgument,
				"no storage account: give az://container/prefix?%s=NAME, set %s, or set %s", OptAccount, envAccount, envConnectionString)
		}
		serviceURL = "https://" + account + ".blob.core.windows.net"
	}
	serviceURL += "/"

	if key != "" {
		redact.Register(key)
		switch {
		case account == "":
			return nil, "", storage.Errorf("", "", storage.ErrInvalidArgument, "%s is set but no account names it: set %s or give %s=NAME", envKey, envAccount, OptAccount)
		case envAcct != "" && envAcct != account:
			return nil, "", storage.Errorf("", "", storage.ErrInvalidArgument,
				"%s=%s in the store URI, but %s holds the key of account %s: unset them or name the same account", OptAccount, account, envKey, envAcct)
		}
		cred, err := azblob.NewSharedKeyCredential(account, key)
		if err != nil {
			return nil, "", storage.Errorf("", "", storage.ErrInvalidArgument, "%s is not a base64 account key", envKey)
		}
		svc, err := service.NewClientWithSharedKeyCredential(serviceURL, cred, copts)
		if err != nil {
			return nil, "", storage.Errorf("", "", storage.ErrInvalidArgument, "cannot make a client for %s: %v", redactURL(serviceURL), err)
		}
		return svc, "shared key of account " + account + " from " + envKey, nil
	}

	if strings.HasPrefix(serviceURL, "http://") {
		// azcore sends bearer tokens only over https and would fail every
		// request with an error no type distinguishes: refuse here.
		return nil, "", storage.Errorf("", "", storage.ErrInvalidArgument,
			"%s is plain http and no %s or %s is set: Microsoft Entra ID tokens are only sent over https; use a shared key or a connection string with an emulator", redactURL(serviceURL), envConnectionString, envKey)
	}
	cred, err := azidentity.NewDefaultAzureCredential(nil)
	if err != nil {
		return nil, "", storage.Errorf("", "", storage.ErrPermissionDenied, "no Azure credentials: set %s, or %s and %s, or configure DefaultAzureCredential (%v)", envConnectionString, envAccount, envKey, redact.Error(err))
	}
	svc, err := service.NewClient(serviceURL, credTagger{cred}, copts)
	if err != nil {
		return nil, "", storage.Errorf("", "", storage.ErrInvalidArgument, "cannot make a client for %s: %v", redactURL(serviceURL), err)
	}
	return svc, "DefaultAzureCredential (Microsoft Entra ID)", nil
}

// credTagger marks every error of the token credential, so that it maps to
// permission denied whatever type the identity library gives it.
type credTagger struct{ azcore.TokenCredential }

func (c credTagger) GetToken(ctx context.Context, o policy.TokenRequestOptions) (azcore.AccessToken, error) {
	t, err := c.TokenCredential.GetToken(ctx, o)
	if err != nil {
		return t, &credError{err}
	}
	redact.Register(t.Token)
	return t, nil
}

type credError struct{ err error }

func (e *credError) Error() string { return "acquiring an Azure token: " + e.err.Error() }
func (e *credError) Unwrap() error { return e.err }

// NonRetriable keeps the SDK's retry policy from retrying it.
func (e *credError) NonRetriable() {}

// attemptPolicy watches the tries of one call (it runs once per retry),
// for calls whose context carries a *tries: a try that ended without an
// answer, or with an answer that does not say the request was not
// executed, may have written.
type attemptPolicy struct{}

type triesKey struct{}

// tries records whether an earlier try of a call may have been applied.
type tries struct {
	n            atomic.Int32
	maybeApplied atomic.Bool
}

func (attemptPolicy) Do(req *policy.Request) (*http.Response, error) {
	resp, err := req.Next()
	if t, ok := req.Raw().Context().Value(triesKey{}).(*tries); ok {
		t.n.Add(1)
		// 429 and 503 (throttling, ServerBusy) are refusals before any
		// work; a lost answer or a 408, 500, 502 or 504 may follow a write.
		if err != nil || resp.StatusCode == http.StatusRequestTimeout || resp.StatusCode == http.StatusInternalServerError ||
			resp.StatusCode == http.StatusBadGateway || resp.StatusCode == http.StatusGatewayTimeout {
			t.maybeApplied.Store(true)
		}
	}
	return resp, err
}

func withTries(ctx context.Context) (context.Context, *tries) {
	t := new(tries)
	return context.WithValue(ctx, triesKey{}, t), t
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

// Container is the name of the store's container.
func (d *Driver) Container() string { return d.bucket }

// Close marks the driver closed; it holds no other resources.
func (d *Driver) Close() error {
	d.closed.Store(true)
	return nil
}

// AcquireGate refuses: the adapter declares no gates.
func (d *Driver) AcquireGate(ctx context.Context, name string) (storage.GateLease, error) {
	if d.readOnly {
		return storage.GateLease{}, storage.ReadOnlyError("acquire-gate", name)
	}
	return storage.GateLease{}, storage.Errorf("acquire-gate", name, storage.ErrUnsupported, "gate %q is not declared: the azure adapter offers no gates", name)
}

// ReleaseGate refuses: the adapter declares no gates.
func (d *Driver) ReleaseGate(ctx context.Context, lease storage.GateLease) error {
	return storage.Errorf("release-gate", lease.Name, storage.ErrUnsupported, "gate %q is not declared: the azure adapter offers no gates", lease.Name)
}

// enter checks ctx and that the driver is open.
func (d *Driver) enter(ctx context.Context, op, key string) error {
	if err := ctx.Err(); err != nil {
		return ctxError(op, key, err)
	}
	if d.closed.Load() {
		return storage.Errorf(op, key, storage.ErrInvalidArgument, "the azure driver is closed")
	}
	return nil
}

// blobName validates key and returns the blob's name in the container.
func (d *Driver) blobName(op, key string) (string, error) {
	if err := storage.ValidateKey(op, key); err != nil {
		return "", err
	}
	name := d.prefix + key
	if err := checkBlobName(name); err != nil {
		return "", storage.Errorf(op, key, storage.ErrInvalidArgument, "invalid key for Azure: %s", err)
	}
	return name, nil
}

// checkBlobName applies Azure's blob name rules beyond the contract's.
func checkBlobName(name string) error {
	units := 0
	for _, r := range name {
		units++
		if r > 0xFFFF {
			units++ // a UTF-16 surrogate pair
		}
	}
	if units > maxBlobNameChars {
		return fmt.Errorf("the blob name (store prefix and key) is %d characters; Azure allows %d", units, maxBlobNameChars)
	}
	segs := strings.Split(name, "/")
	if len(segs) > maxBlobSegments {
		return fmt.Errorf("the blob name has %d path segments; Azure allows %d", len(segs), maxBlobSegments)
	}
	for _, s := range segs {
		if strings.HasSuffix(s, ".") {
			return fmt.Errorf("segment %q ends in '.': Azure trims trailing dots from URL path segments, so it would be stored under another name", s)
		}
	}
	return nil
}

// checkContainerName applies Azure's container naming rules.
func checkContainerName(name string) error {
	switch name {
	case "":
		return fmt.Errorf("no container: write az://container/optional/prefix")
	case "$root", "$web", "$logs":
		return nil
	}
	if len(name) < 3 || len(name) > 63 {
		return fmt.Errorf("container name %q: Azure container names are 3 to 63 characters", name)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case c == '-' && i > 0 && i < len(name)-1 && name[i-1] != '-':
		default:
			return fmt.Errorf("container name %q: Azure container names are lowercase letters, digits and single inner hyphens", name)
		}
	}
	return nil
}

func checkAccountName(name string) error {
	if len(name) < 3 || len(name) > 24 || !utf8.ValidString(name) {
		return fmt.Errorf("Azure storage account names are 3 to 24 lowercase letters and digits")
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
			return fmt.Errorf("Azure storage account names are 3 to 24 lowercase letters and digits")
		}
	}
	return nil
}

// redactURL drops the query (a SAS) and any user info from u.
func redactURL(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "(unparsable endpoint)"
	}
	p.RawQuery, p.User, p.Fragment = "", nil, ""
	return strings.TrimSuffix(p.String(), "/")
}

func isAzurePublicEndpoint(u string) bool {
	p, err := url.Parse(u)
	return err == nil && strings.HasSuffix(p.Hostname(), ".blob.core.windows.net")
}

func randHex() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// markerCacheSize bounds the StartAfter → continuation marker cache.
const markerCacheSize = 1024

type markerKey struct{ prefix, last string }

// markerCache remembers, for pages List returned, the continuation marker
// that follows their last key, so a caller continuing with StartAfter set
// to that key resumes without re-listing. Oldest entries go first.
type markerCache struct {
	mu    sync.Mutex
	m     map[markerKey]string
	order []markerKey
	next  int
}

func (c *markerCache) init(n int) {
	c.m = make(map[markerKey]string, n)
	c.order = make([]markerKey, n)
}

func (c *markerCache) get(k markerKey) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.m[k]
	return v, ok
}

func (c *markerCache) put(k markerKey, marker string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[k]; ok {
		c.m[k] = marker
		return
	}
	if old := c.order[c.next]; old != (markerKey{}) {
		delete(c.m, old)
	}
	c.order[c.next] = k
	c.next = (c.next + 1) % len(c.order)
	c.m[k] = marker
}
