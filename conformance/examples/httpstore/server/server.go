// Package server is a tiny in-memory HTTP object store: the backend the
// httpstore example adapter talks to. It is deliberately small and uses the
// standard library only. Every conditional request is decided under one
// mutex, which is what lets the adapter declare its conditional operations
// native.
//
// The API, on /<bucket>/<key>:
//
//	GET, HEAD     200 with the body (GET), ETag, Content-Length and
//	              X-Object-Modified (RFC 3339, nanoseconds); 404
//	PUT           200 with the new object's info as JSON; If-None-Match: *
//	              creates only if absent, If-Match: "v" replaces only that
//	              version (412 when the condition fails, 404 when If-Match
//	              names a missing key); 413 over the size limit
//	DELETE        204; If-Match: "v" deletes only that version (412, 404);
//	              without it a missing key is not an error
//
// and on /<bucket>:
//
//	HEAD          200 when the bucket exists, with the server's limits in
//	              X-Max-Object-Size, X-Max-List-Page, X-Max-Delete-Batch; 404
//	PUT           creates the bucket (201, or 200 when it exists)
//	GET ?list     one page of keys in byte order as JSON: prefix, start-after
//	              (exclusive), max-keys (clamped to the page limit) and more
//	POST ?delete  batch delete of {"keys":[...]}: one result per key, 413
//	              over the batch limit
//
// Errors carry a machine-readable code in the X-Error-Code header
// (NoSuchBucket, NoSuchKey, PreconditionFailed, ...) and a text body for
// people. With Config.Token set, a request without "Authorization: Bearer
// <token>" gets 403.
package server

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Config sets the server's limits. Zero fields take the defaults.
type Config struct {
	MaxObjectSize  int64  // default 64 MiB
	MaxListPage    int    // default 1000
	MaxDeleteBatch int    // default 1000
	Token          string // when set, every request must carry it as a bearer token
}

// Defaults of Config.
const (
	DefaultMaxObjectSize  = 64 << 20
	DefaultMaxListPage    = 1000
	DefaultMaxDeleteBatch = 1000
)

// Error codes sent in the X-Error-Code header.
const (
	CodeNoSuchBucket       = "NoSuchBucket"
	CodeNoSuchKey          = "NoSuchKey"
	CodePreconditionFailed = "PreconditionFailed"
	CodeAccessDenied       = "AccessDenied"
	CodeTooLarge           = "TooLarge"
	CodeBadRequest         = "BadRequest"
)

// ErrorCodeHeader names the header carrying the error code.
const ErrorCodeHeader = "X-Error-Code"

// ModifiedHeader carries an object's modification time.
const ModifiedHeader = "X-Object-Modified"

// Limit headers sent on HEAD /<bucket>, so a client can declare them.
const (
	MaxObjectSizeHeader  = "X-Max-Object-Size"
	MaxListPageHeader    = "X-Max-List-Page"
	MaxDeleteBatchHeader = "X-Max-Delete-Batch"
)

// ObjectInfo is one object as PUT and list report it.
type ObjectInfo struct {
	Key      string    `json:"key"`
	Size     int64     `json:"size"`
	ETag     string    `json:"etag"`
	Modified time.Time `json:"modified"`
}

// ListResult is one page of a listing.
type ListResult struct {
	Objects []ObjectInfo `json:"objects"`
	More    bool         `json:"more"`
}

// DeleteRequest is the body of a batch delete.
type DeleteRequest struct {
	Keys []string `json:"keys"`
}

// DeleteResult is the outcome for one key of a batch delete; Code is empty
// when the key was deleted or already absent.
type DeleteResult struct {
	Key  string `json:"key"`
	Code string `json:"code,omitempty"`
}

// DeleteResponse is the answer to a batch delete.
type DeleteResponse struct {
	Results []DeleteResult `json:"results"`
}

type object struct {
	body []byte // never mutated after a write: a GET streams it unlocked
	info ObjectInfo
}

// Server is the object store. Use it as an http.Handler.
type Server struct {
	cfg     Config
	mu      sync.Mutex
	buckets map[string]map[string]object
	epoch   string // versions of a restarted server never repeat old ones
	seq     uint64
}

// New returns an empty server with the named buckets.
func New(cfg Config, buckets ...string) *Server {
	if cfg.MaxObjectSize <= 0 {
		cfg.MaxObjectSize = DefaultMaxObjectSize
	}
	if cfg.MaxListPage <= 0 {
		cfg.MaxListPage = DefaultMaxListPage
	}
	if cfg.MaxDeleteBatch <= 0 {
		cfg.MaxDeleteBatch = DefaultMaxDeleteBatch
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	s := &Server{cfg: cfg, buckets: map[string]map[string]object{}, epoch: hex.EncodeToString(b[:])}
	for _, name := range buckets {
		s.buckets[name] = map[string]object{}
	}
	return s
}

func fail(w http.ResponseWriter, status int, code, format string, args ...any) {
	w.Header().Set(ErrorCodeHeader, code)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(status)
	fmt.Fprintf(w, format+"\n", args...)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// ServeHTTP routes /<bucket> and /<bucket>/<key>.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Token != "" && r.Header.Get("Authorization") != "Bearer "+s.cfg.Token {
		fail(w, http.StatusForbidden, CodeAccessDenied, "missing or wrong bearer token")
		return
	}
	bucket, key, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	if bucket == "" {
		fail(w, http.StatusBadRequest, CodeBadRequest, "name a bucket: /<bucket>/<key>")
		return
	}
	if key == "" {
		s.serveBucket(w, r, bucket)
		return
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		s.get(w, r, bucket, key)
	case http.MethodPut:
		s.put(w, r, bucket, key)
	case http.MethodDelete:
		s.delete(w, r, bucket, key)
	default:
		fail(w, http.StatusMethodNotAllowed, CodeBadRequest, "method %s not allowed on an object", r.Method)
	}
}

func (s *Server) serveBucket(w http.ResponseWriter, r *http.Request, bucket string) {
	q := r.URL.Query()
	switch {
	case r.Method == http.MethodPut:
		s.mu.Lock()
		_, ok := s.buckets[bucket]
		if !ok {
			s.buckets[bucket] = map[string]object{}
		}
		s.mu.Unlock()
		if !ok {
			w.WriteHeader(http.StatusCreated)
		}
		return
	case r.Method == http.MethodHead:
		s.mu.Lock()
		_, ok := s.buckets[bucket]
		s.mu.Unlock()
		if !ok {
			fail(w, http.StatusNotFound, CodeNoSuchBucket, "no bucket %q", bucket)
			return
		}
		w.Header().Set(MaxObjectSizeHeader, strconv.FormatInt(s.cfg.MaxObjectSize, 10))
		w.Header().Set(MaxListPageHeader, strconv.Itoa(s.cfg.MaxListPage))
		w.Header().Set(MaxDeleteBatchHeader, strconv.Itoa(s.cfg.MaxDeleteBatch))
		return
	case r.Method == http.MethodGet && q.Has("list"):
		s.list(w, r, bucket)
	case r.Method == http.MethodPost && q.Has("delete"):
		s.deleteMany(w, r, bucket)
	default:
		fail(w, http.StatusBadRequest, CodeBadRequest, "on a bucket: HEAD, PUT, GET ?list or POST ?delete")
	}
}

// etag quotes a version as an entity tag.
func etag(v string) string { return `"` + v + `"` }

func setInfo(w http.ResponseWriter, info ObjectInfo) {
	w.Header().Set("ETag", etag(info.ETag))
	w.Header().Set("Content-Length", strconv.FormatInt(info.Size, 10))
	w.Header().Set(ModifiedHeader, info.Modified.Format(time.RFC3339Nano))
}

func (s *Server) get(w http.ResponseWriter, r *http.Request, bucket, key string) {
	s.mu.Lock()
	objs, ok := s.buckets[bucket]
	o, found := objs[key]
	s.mu.Unlock()
	switch {
	case !ok:
		fail(w, http.StatusNotFound, CodeNoSuchBucket, "no bucket %q", bucket)
		return
	case !found:
		fail(w, http.StatusNotFound, CodeNoSuchKey, "no object %q", key)
		return
	}
	// The headers and the body come from the same snapshot: the ETag sent
	// is the version of exactly these bytes.
	setInfo(w, o.info)
	if r.Method == http.MethodHead {
		return
	}
	_, _ = w.Write(o.body)
}

// ifMatch returns the version an If-Match header names.
func ifMatch(r *http.Request) (string, bool) {
	v := r.Header.Get("If-Match")
	if v == "" {
		return "", false
	}
	return strings.Trim(v, `"`), true
}

func (s *Server) put(w http.ResponseWriter, r *http.Request, bucket, key string) {
	createOnly := r.Header.Get("If-None-Match") == "*"
	want, replaceOnly := ifMatch(r)
	if createOnly && replaceOnly {
		fail(w, http.StatusBadRequest, CodeBadRequest, "If-None-Match and If-Match together")
		return
	}
	// Read the whole body before taking the lock: a slow client never
	// holds up other requests, and a body cut short is never stored.
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxObjectSize))
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		fail(w, http.StatusRequestEntityTooLarge, CodeTooLarge, "an object is at most %d bytes", s.cfg.MaxObjectSize)
		return
	case err != nil:
		fail(w, http.StatusBadRequest, CodeBadRequest, "reading the body: %v", err)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	objs, ok := s.buckets[bucket]
	if !ok {
		fail(w, http.StatusNotFound, CodeNoSuchBucket, "no bucket %q", bucket)
		return
	}
	cur, exists := objs[key]
	switch {
	case createOnly && exists:
		fail(w, http.StatusPreconditionFailed, CodePreconditionFailed, "object %q exists", key)
		return
	case replaceOnly && !exists:
		fail(w, http.StatusNotFound, CodeNoSuchKey, "no object %q", key)
		return
	case replaceOnly && cur.info.ETag != want:
		fail(w, http.StatusPreconditionFailed, CodePreconditionFailed, "object %q has another version", key)
		return
	}
	// Every write gets a new version, even of the same bytes.
	s.seq++
	info := ObjectInfo{Key: key, Size: int64(len(body)), ETag: fmt.Sprintf("%s-%d", s.epoch, s.seq), Modified: time.Now().UTC()}
	objs[key] = object{body: body, info: info}
	w.Header().Set("ETag", etag(info.ETag))
	writeJSON(w, info)
}

func (s *Server) delete(w http.ResponseWriter, r *http.Request, bucket, key string) {
	want, conditional := ifMatch(r)
	s.mu.Lock()
	defer s.mu.Unlock()
	objs, ok := s.buckets[bucket]
	if !ok {
		fail(w, http.StatusNotFound, CodeNoSuchBucket, "no bucket %q", bucket)
		return
	}
	cur, exists := objs[key]
	switch {
	case conditional && !exists:
		fail(w, http.StatusNotFound, CodeNoSuchKey, "no object %q", key)
		return
	case conditional && cur.info.ETag != want:
		fail(w, http.StatusPreconditionFailed, CodePreconditionFailed, "object %q has another version", key)
		return
	}
	delete(objs, key)
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) list(w http.ResponseWriter, r *http.Request, bucket string) {
	q := r.URL.Query()
	prefix, after := q.Get("prefix"), q.Get("start-after")
	size := s.cfg.MaxListPage
	if v := q.Get("max-keys"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			fail(w, http.StatusBadRequest, CodeBadRequest, "max-keys %q is not a count", v)
			return
		}
		if n > 0 && n < size {
			size = n
		}
	}
	s.mu.Lock()
	objs, ok := s.buckets[bucket]
	if !ok {
		s.mu.Unlock()
		fail(w, http.StatusNotFound, CodeNoSuchBucket, "no bucket %q", bucket)
		return
	}
	var keys []string
	for k := range objs {
		if strings.HasPrefix(k, prefix) && k > after {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys) // Go compares strings bytewise: byte order
	res := ListResult{Objects: []ObjectInfo{}}
	if len(keys) > size {
		keys, res.More = keys[:size], true
	}
	for _, k := range keys {
		res.Objects = append(res.Objects, objs[k].info)
	}
	s.mu.Unlock()
	writeJSON(w, res)
}

func (s *Server) deleteMany(w http.ResponseWriter, r *http.Request, bucket string) {
	var req DeleteRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 8<<20)).Decode(&req); err != nil {
		fail(w, http.StatusBadRequest, CodeBadRequest, "body is not {\"keys\": [...]}: %v", err)
		return
	}
	if len(req.Keys) > s.cfg.MaxDeleteBatch {
		fail(w, http.StatusRequestEntityTooLarge, CodeTooLarge, "at most %d keys per batch delete, got %d", s.cfg.MaxDeleteBatch, len(req.Keys))
		return
	}
	s.mu.Lock()
	objs, ok := s.buckets[bucket]
	if !ok {
		s.mu.Unlock()
		fail(w, http.StatusNotFound, CodeNoSuchBucket, "no bucket %q", bucket)
		return
	}
	res := DeleteResponse{Results: make([]DeleteResult, len(req.Keys))}
	for i, k := range req.Keys {
		res.Results[i].Key = k
		if k == "" {
			res.Results[i].Code = CodeBadRequest
			continue
		}
		delete(objs, k)
	}
	s.mu.Unlock()
	writeJSON(w, res)
}

// Len reports how many objects a bucket holds, for tests.
func (s *Server) Len(bucket string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.buckets[bucket])
}

// Bytes returns a copy of an object's body, for tests.
func (s *Server) Bytes(bucket, key string) ([]byte, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.buckets[bucket][key]
	return bytes.Clone(o.body), ok
}
