package storage

import (
	"fmt"
	"net/url"
	"path/filepath"
	"sort"
	"strings"
)

// Location is a parsed store URI: where a store lives and which adapter
// scheme serves it.
type Location struct {
	// Scheme is "file", "s3", "gs", "az", "mem" or a vendor's scheme.
	Scheme string `json:"scheme"`
	// Path is the absolute root directory for file stores.
	Path string `json:"path,omitempty"`
	// Bucket is the bucket or container for object stores.
	Bucket string `json:"bucket,omitempty"`
	// Prefix is the key prefix under the bucket, without leading or
	// trailing '/'.
	Prefix string `json:"prefix,omitempty"`
	// Options are the URI's query parameters (endpoint=..., region=...).
	Options map[string]string `json:"options,omitempty"`
	// ReadOnly asks the adapter to open the store without writing
	// anything: no reserved folders, no lock files, no probe objects. It is
	// how the caller opens, not where the store is, so it is not a URI
	// query option: ParseLocation never sets it and String never renders
	// it. The caller sets it (bundled.OpenReadOnly) for commands that only
	// look (inspect, claim status, checkpoint list|show). An adapter opened
	// read-only declares Capabilities.ReadOnly, every conditional
	// capability none and no gates, and refuses Put, Delete, DeleteMany and
	// AcquireGate with ErrPermissionDenied, writing nothing.
	ReadOnly bool `json:"read_only,omitempty"`
}

// ParseLocation parses a store URI: file:///abs/path, a plain path
// (made absolute), or scheme://bucket/prefix for object stores.
func ParseLocation(s string) (Location, error) {
	bad := func(format string, args ...any) (Location, error) {
		return Location{}, &Error{Op: "parse-location", Key: s, Kind: ErrInvalidArgument,
			Msg: fmt.Sprintf(format, args...)}
	}
	if s == "" {
		return bad("empty store URI: give a path, file:///abs/path, s3://bucket/prefix, gs://bucket/prefix or az://container/prefix")
	}
	if !strings.Contains(s, "://") {
		if u, err := url.Parse(s); err == nil && u.Scheme != "" && u.Opaque != "" {
			return bad("looks like a URI without '//': write %s://... (or ./%s for a local path)", u.Scheme, s)
		}
		abs, err := filepath.Abs(s)
		if err != nil {
			return bad("cannot make the path absolute: %v", err)
		}
		return Location{Scheme: "file", Path: filepath.Clean(abs)}, nil
	}
	u, err := url.Parse(s)
	if err != nil {
		return bad("not a URI: %v", err)
	}
	// A fragment names no part of a store: dropping it silently would open
	// another store than the one written.
	if strings.Contains(s, "#") {
		return bad("'#' begins a URI fragment, which names no part of a store: remove it, or write %%23 for a '#' in a path or option")
	}
	loc := Location{Scheme: strings.ToLower(u.Scheme)}
	if q := u.Query(); len(q) > 0 {
		loc.Options = map[string]string{}
		for k, v := range q {
			loc.Options[k] = v[len(v)-1]
		}
	}
	switch loc.Scheme {
	case "file":
		if u.Host != "" && u.Host != "localhost" {
			return bad("file URIs name a local absolute path: file:///abs/path (found host %q)", u.Host)
		}
		if !filepath.IsAbs(u.Path) {
			return bad("file URIs need an absolute path: file:///abs/path")
		}
		loc.Path = filepath.Clean(u.Path)
	default:
		if u.Host == "" {
			return bad("%s URIs name a bucket: %s://bucket/optional/prefix", loc.Scheme, loc.Scheme)
		}
		loc.Bucket = u.Host
		loc.Prefix = strings.Trim(u.Path, "/")
		if loc.Prefix != "" {
			if err := ValidatePrefix("parse-location", loc.Prefix); err != nil {
				return Location{}, err
			}
		}
	}
	return loc, nil
}

// String renders the location back as a URI.
func (l Location) String() string {
	var s string
	if l.Scheme == "file" {
		s = (&url.URL{Scheme: "file", Path: l.Path}).String()
		if !strings.HasPrefix(s, "file:///") {
			s = strings.Replace(s, "file:", "file://", 1)
		}
	} else {
		s = l.Scheme + "://" + l.Bucket
		if l.Prefix != "" {
			s += "/" + l.Prefix
		}
	}
	if len(l.Options) > 0 {
		keys := make([]string, 0, len(l.Options))
		for k := range l.Options {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		q := url.Values{}
		for _, k := range keys {
			q.Set(k, l.Options[k])
		}
		s += "?" + q.Encode()
	}
	return s
}
