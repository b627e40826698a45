// Package redact keeps credentials out of everything retain prints, logs or
// records, whatever an endpoint sends back: a misconfigured or hostile
// server may echo the whole request (Authorization header, security token,
// SAS query) into its error body or headers, and that text reaches error
// messages, JSON fields, log lines and audit lines.
//
// Two lines of defence, applied by String:
//
//   - Known values: every credential the process can know is registered in
//     one process-wide set (from the environment and the standard credential
//     files at first use, and by adapters for what their credential chain
//     resolved), and every occurrence, in its raw, URL-, JSON- and
//     Go-quoted forms, is replaced by Mask.
//   - Shapes: values in the obvious credential places (Authorization
//     headers, X-Amz-Security-Token, Signature=, sig=, AccountKey=, bearer
//     tokens, JWTs, PEM private keys, AWS access key ids) are masked even
//     when their value was never registered (a per-request signature, a
//     token a vendor plugin fetched).
//
// Values shorter than MinLen are never registered: masking every "admin" or
// "test" in the output would destroy it and hide nothing.
//
// The package uses the standard library only, so core may depend on it.
package redact

import (
	"bytes"
	"encoding/json"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"
)

// Mask replaces every credential String finds.
const Mask = "[REDACTED]"

// MinLen is the shortest value Register accepts.
const MinLen = 8

var (
	mu       sync.Mutex
	values   = map[string]struct{}{}
	replacer atomic.Pointer[strings.Replacer]
	envOnce  sync.Once
)

// Register adds credential values to the process-wide set String masks.
// Empty and short values (under MinLen) are ignored. Safe for concurrent
// use; cheap to call again with a value already known.
func Register(secrets ...string) {
	loadEnvironment()
	register(secrets...)
}

func register(secrets ...string) {
	mu.Lock()
	defer mu.Unlock()
	changed := false
	for _, s := range secrets {
		s = strings.TrimSpace(s)
		if len(s) < MinLen {
			continue
		}
		for _, f := range forms(s) {
			if _, ok := values[f]; !ok && len(f) >= MinLen {
				values[f] = struct{}{}
				changed = true
			}
		}
	}
	if !changed {
		return
	}
	all := make([]string, 0, len(values))
	for v := range values {
		all = append(all, v)
	}
	// Longest first: the replacer tries its patterns in argument order, so
	// a secret containing another is masked whole.
	sort.Slice(all, func(i, j int) bool {
		if len(all[i]) != len(all[j]) {
			return len(all[i]) > len(all[j])
		}
		return all[i] < all[j]
	})
	pairs := make([]string, 0, 2*len(all))
	for _, v := range all {
		pairs = append(pairs, v, Mask)
	}
	replacer.Store(strings.NewReplacer(pairs...))
}

// forms are the ways s can appear in output: as is, percent-encoded (a
// query or path), JSON- and Go-quoted, and decoded when s is itself
// percent-encoded (a SAS signature as it sits in a connection string).
func forms(s string) []string {
	out := []string{s, url.QueryEscape(s), url.PathEscape(s), quoted(strconv.Quote(s))}
	if b, err := json.Marshal(s); err == nil {
		out = append(out, quoted(string(b)))
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if enc.Encode(s) == nil {
		out = append(out, quoted(strings.TrimSuffix(buf.String(), "\n")))
	}
	if u, err := url.QueryUnescape(s); err == nil && u != s {
		out = append(out, u, url.PathEscape(u))
	}
	return out
}

func quoted(s string) string { return strings.TrimSuffix(strings.TrimPrefix(s, `"`), `"`) }

// rule masks one shape of credential.
type rule struct {
	re   *regexp.Regexp
	repl string
}

// secretNames are parameter, header and field names whose value is a
// credential, in any of name=value, name: value, "name":"value".
const secretNames = `x-amz-security-token|x-amz-signature|x-amz-credential|x-goog-signature|x-goog-credential|` +
	`x-ms-encryption-key|signature|sig|credential|accountkey|sharedaccesssignature|sharedaccesskey|` +
	`access_token|refresh_token|id_token|client_secret|client_assertion|assertion|subject_token|private_key_id|` +
	`aws_secret_access_key|aws_session_token|aws_security_token|aws_access_key_id|secretaccesskey|sessiontoken|` +
	`password|passwd|api_key|apikey|x-api-key`

var rules = []rule{
	// PEM private keys, whole or cut short, raw or with escaped newlines.
	{regexp.MustCompile(`-----BEGIN[A-Z ]*PRIVATE KEY-----(?:[\s\S]*?-----END[A-Z ]*PRIVATE KEY-----|[A-Za-z0-9+/=\s\\]*)`), Mask},
	// An Authorization header's value, whatever its scheme: a header line,
	// a Go-printed header map, a JSON field, a query parameter.
	{regexp.MustCompile(`(?i)(\b(?:proxy-)?authorization\\?"?\s*[:=]\s*\\?"?\[?)[^\r\n"\]\\]+`), "${1}" + Mask},
	{regexp.MustCompile(`(?i)(\b(?:` + secretNames + `)\\?"?\s*[:=]\s*\\?"?)[^\s&;,"'<>\\\]]+`), "${1}" + Mask},
	// XML elements of an STS or echoed answer.
	{regexp.MustCompile(`(?i)(<(?:SecretAccessKey|SessionToken|AccessKeyId|Signature|AccountKey|Password|Token)>)[^<]*`), "${1}" + Mask},
	{regexp.MustCompile(`(?i)\b(bearer\s+)[A-Za-z0-9._~+/=-]{16,}`), "${1}" + Mask},
	{regexp.MustCompile(`(?i)\b(sharedkey(?:lite)?\s+[^\s:]+:)[A-Za-z0-9+/=]{8,}`), "${1}" + Mask},
	// JWTs (OAuth assertions, identity tokens), Google access and refresh
	// tokens, AWS access key ids.
	{regexp.MustCompile(`\beyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*`), Mask},
	{regexp.MustCompile(`\bya29\.[A-Za-z0-9._-]{8,}`), Mask},
	{regexp.MustCompile(`\b1//[A-Za-z0-9_-]{20,}`), Mask},
	{regexp.MustCompile(`\b(?:AKIA|ASIA)[A-Z0-9]{16}\b`), Mask},
}

// String returns s with every registered credential and every credential
// shape masked.
func String(s string) string {
	loadEnvironment()
	if r := replacer.Load(); r != nil {
		s = r.Replace(s)
	}
	for _, r := range rules {
		s = r.re.ReplaceAllString(s, r.repl)
	}
	return s
}

// Excerpt is text a server sent, fit for a one-line message: masked first
// (so a cut never leaves part of a credential), then its first non-empty
// line only, at most max bytes, cut at a character boundary and marked
// "...".
func Excerpt(s string, max int) string {
	s = String(s)
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			s = l
			break
		}
	}
	s = strings.TrimSpace(s)
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}

// Error wraps err so that its text is masked by String; errors.Is and
// errors.As still see err. nil stays nil.
func Error(err error) error {
	if err == nil {
		return nil
	}
	return &scrubbed{err}
}

type scrubbed struct{ err error }

func (e *scrubbed) Error() string { return String(e.err.Error()) }
func (e *scrubbed) Unwrap() error { return e.err }

// RegisterConnectionString registers an Azure storage connection string:
// the whole string, its AccountKey and its SharedAccessSignature (and that
// SAS's signature).
func RegisterConnectionString(cs string) {
	loadEnvironment()
	connectionString(cs)
}

func connectionString(cs string) {
	register(cs)
	for _, part := range strings.Split(cs, ";") {
		k, v, ok := strings.Cut(part, "=")
		if !ok {
			continue
		}
		switch strings.ToLower(strings.TrimSpace(k)) {
		case "accountkey":
			register(v)
		case "sharedaccesssignature":
			sasToken(v)
		}
	}
}

// RegisterSAS registers an Azure shared access signature (a query string):
// the whole token and its sig= value, encoded and decoded.
func RegisterSAS(sas string) {
	loadEnvironment()
	sasToken(sas)
}

func sasToken(sas string) {
	sas = strings.TrimPrefix(strings.TrimSpace(sas), "?")
	register(sas)
	for _, p := range strings.Split(sas, "&") {
		if k, v, ok := strings.Cut(p, "="); ok && strings.EqualFold(k, "sig") {
			register(v)
		}
	}
}

// googleSecretFields are the fields of a Google credentials file that hold
// secrets (service account keys, authorized users, impersonation sources).
var googleSecretFields = map[string]bool{"private_key": true, "private_key_id": true, "client_secret": true, "refresh_token": true, "access_token": true}

// RegisterGoogleJSON registers the secrets of a Google credentials JSON
// (service account key, authorized user, impersonated or external account
// with nested source credentials). Anything else is ignored.
func RegisterGoogleJSON(b []byte) {
	loadEnvironment()
	googleJSON(b)
}

func googleJSON(b []byte) {
	var v any
	if json.Unmarshal(b, &v) != nil {
		return
	}
	var walk func(any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if s, ok := x.(string); ok && googleSecretFields[k] {
					register(s)
					if k == "private_key" {
						// Each base64 line too, so a part of a key is
						// masked as well as the whole.
						for _, l := range strings.Split(s, "\n") {
							if l = strings.TrimSpace(l); !strings.HasPrefix(l, "-----") {
								register(l)
							}
						}
					}
					continue
				}
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(v)
}

// Environment variables whose value is a credential.
var envSecrets = []string{
	"AWS_ACCESS_KEY_ID", // not secret by itself, but it names the principal and pairs with the key
	"AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN", "AWS_CONTAINER_AUTHORIZATION_TOKEN",
	"AZURE_STORAGE_KEY", "AZURE_CLIENT_SECRET", "AZURE_CLIENT_CERTIFICATE_PASSWORD", "AZURE_PASSWORD",
	"GOOGLE_OAUTH_ACCESS_TOKEN", "CLOUDSDK_AUTH_ACCESS_TOKEN", "GOOGLE_API_KEY",
}

// Environment variables naming a file whose content is a token.
var envTokenFiles = []string{"AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", "AZURE_FEDERATED_TOKEN_FILE"}

// awsFileKeys are the keys of the AWS shared config and credentials files
// whose value is a credential.
var awsFileKeys = map[string]bool{"aws_access_key_id": true, "aws_secret_access_key": true, "aws_session_token": true, "aws_security_token": true}

// maxFile bounds what is read of a credential file.
const maxFile = 1 << 20

// loadEnvironment registers, once per process, the credentials of the
// environment and of the standard credential files: AWS's shared config
// and credentials, Azure's connection string and SAS, Google's application
// default credentials. A plugin process inherits the host's environment
// and loads the same set.
func loadEnvironment() {
	envOnce.Do(func() {
		for _, k := range envSecrets {
			register(os.Getenv(k))
		}
		for _, k := range envTokenFiles {
			if p := os.Getenv(k); p != "" {
				register(string(readFile(p)))
			}
		}
		if cs := os.Getenv("AZURE_STORAGE_CONNECTION_STRING"); cs != "" {
			connectionString(cs)
		}
		if sas := os.Getenv("AZURE_STORAGE_SAS_TOKEN"); sas != "" {
			sasToken(sas)
		}
		home, _ := os.UserHomeDir()
		for _, p := range []string{envOrJoin("AWS_SHARED_CREDENTIALS_FILE", home, ".aws", "credentials"), envOrJoin("AWS_CONFIG_FILE", home, ".aws", "config")} {
			registerAWSFile(readFile(p))
		}
		gcloud := os.Getenv("CLOUDSDK_CONFIG")
		if gcloud == "" && home != "" {
			gcloud = filepath.Join(home, ".config", "gcloud")
		}
		for _, p := range []string{os.Getenv("GOOGLE_APPLICATION_CREDENTIALS"), filepath.Join(gcloud, "application_default_credentials.json")} {
			if b := readFile(p); len(b) > 0 {
				googleJSON(b)
			}
		}
	})
}

func envOrJoin(k, home string, elem ...string) string {
	if p := os.Getenv(k); p != "" {
		return p
	}
	if home == "" {
		return ""
	}
	return filepath.Join(append([]string{home}, elem...)...)
}

func readFile(p string) []byte {
	if p == "" {
		return nil
	}
	f, err := os.Open(p)
	if err != nil {
		return nil
	}
	defer f.Close()
	b, _ := io.ReadAll(io.LimitReader(f, maxFile))
	return b
}

// registerAWSFile registers the credential values of an INI-style AWS
// shared config or credentials file, all profiles.
func registerAWSFile(b []byte) {
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, "=")
		if ok && awsFileKeys[strings.ToLower(strings.TrimSpace(k))] {
			register(v)
		}
	}
}

// Writer masks credentials in everything written through it. It holds back
// an unfinished line until its newline (or Flush), so a credential split
// across two writes is still seen whole. Safe for concurrent use.
type Writer struct {
	mu  sync.Mutex
	w   io.Writer
	buf []byte
}

// maxPending is the longest unfinished line Writer holds back.
const maxPending = 64 << 10

// NewWriter returns a Writer writing the masked text to w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// Write masks and writes every complete line of p; the rest waits.
func (w *Writer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	n := bytes.LastIndexByte(w.buf, '\n') + 1
	if n == 0 && len(w.buf) < maxPending {
		return len(p), nil
	}
	if n == 0 {
		n = len(w.buf)
	}
	err := w.emit(n)
	return len(p), err
}

// Flush masks and writes what is held back.
func (w *Writer) Flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.emit(len(w.buf))
}

func (w *Writer) emit(n int) error {
	if n == 0 {
		return nil
	}
	out := String(string(w.buf[:n]))
	w.buf = append(w.buf[:0], w.buf[n:]...)
	_, err := io.WriteString(w.w, out)
	return err
}

// Unwrap returns the writer underneath (to ask whether it is a terminal).
func (w *Writer) Unwrap() io.Writer { return w.w }
