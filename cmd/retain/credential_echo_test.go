package main

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
)

// echoEndpoint is a misconfigured or hostile endpoint: it answers every
// request with an error in its backend's format whose message, and whose
// request-id headers, echo the whole request back (headers with
// Authorization, query, body, and every value bare on the first line). It
// records the credential material each request carried.
type echoEndpoint struct {
	*httptest.Server
	format string // "s3", "gcs", "azure"
	status int
	code   string
	// tokenOK: a POST to /token is a working OAuth token endpoint handing
	// out token; otherwise it echoes too.
	tokenOK bool
	token   string

	mu   sync.Mutex
	seen map[string]bool
	hits int
}

func newEchoEndpoint(t *testing.T, format string, status int, code string) *echoEndpoint {
	e := &echoEndpoint{format: format, status: status, code: code, seen: map[string]bool{}}
	e.Server = httptest.NewServer(http.HandlerFunc(e.serve))
	t.Cleanup(e.Close)
	return e
}

var (
	sigParam   = regexp.MustCompile(`(?i)Signature=([0-9a-f]+)`)
	credParam  = regexp.MustCompile(`Credential=([^/]+)/`)
	schemeAuth = regexp.MustCompile(`^(?:Bearer|SharedKey [^:]+:)\s*(.+)$`)
)

func (e *echoEndpoint) serve(w http.ResponseWriter, r *http.Request) {
	dump, _ := httputil.DumpRequest(r, true)
	body, _ := io.ReadAll(r.Body)
	var bare []string
	var names []string
	for k := range r.Header {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		bare = append(bare, r.Header.Values(k)...)
	}
	for _, vs := range r.URL.Query() {
		bare = append(bare, vs...)
	}
	form, _ := url.ParseQuery(string(body))
	for _, vs := range form {
		bare = append(bare, vs...)
	}
	e.record(r, form)
	line := "echo: " + strings.Join(bare, " ") + " " + r.URL.RawQuery
	msg := line + "\n" + string(dump)

	if r.URL.Path == "/token" && e.tokenOK {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"access_token": e.token, "token_type": "Bearer", "expires_in": 3600})
		return
	}
	auth := r.Header.Get("Authorization")
	switch {
	case r.URL.Path == "/token":
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		json.NewEncoder(w).Encode(map[string]string{"error": "invalid_grant", "error_description": msg})
	case e.format == "s3":
		w.Header().Set("x-amz-request-id", auth)
		w.Header().Set("x-amz-id-2", r.Header.Get("X-Amz-Security-Token"))
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(e.status)
		fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>%s</Message><RequestId>%s</RequestId><HostId>%s</HostId></Error>`,
			e.code, html.EscapeString(msg), html.EscapeString(auth), html.EscapeString(line))
	case e.format == "gcs":
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(e.status)
		json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"code": e.status, "message": msg,
			"errors": []map[string]string{{"domain": "global", "reason": e.code, "message": msg}}}})
	default:
		w.Header().Set("x-ms-request-id", strings.ReplaceAll(line, "\n", " "))
		w.Header().Set("x-ms-error-code", e.code)
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(e.status)
		fmt.Fprintf(w, "\xef\xbb\xbf<?xml version=\"1.0\" encoding=\"utf-8\"?><Error><Code>%s</Code><Message>%s</Message></Error>", e.code, html.EscapeString(msg))
	}
}

// record keeps what of the request is a credential: the signature and key
// id of an Authorization header, a bearer token or shared-key signature,
// security tokens, SAS signatures, OAuth assertions.
func (e *echoEndpoint) record(r *http.Request, form url.Values) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.hits++
	add := func(v string) {
		if len(v) >= 12 {
			e.seen[v] = true
		}
	}
	auth := r.Header.Get("Authorization")
	for _, re := range []*regexp.Regexp{sigParam, credParam, schemeAuth} {
		if m := re.FindStringSubmatch(auth); m != nil {
			add(m[1])
		}
	}
	add(r.Header.Get("X-Amz-Security-Token"))
	q := r.URL.Query()
	for _, k := range []string{"sig", "X-Amz-Signature", "X-Amz-Security-Token", "X-Amz-Credential"} {
		add(q.Get(k))
	}
	add(form.Get("assertion"))
	add(form.Get("client_secret"))
	add(form.Get("refresh_token"))
}

func (e *echoEndpoint) material() (hits int, seen []string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for v := range e.seen {
		seen = append(seen, v)
	}
	return e.hits, seen
}

// leaked names each secret of which any 12-character piece is in out.
func leaked(out string, secrets []string) []string {
	var bad []string
	for _, s := range secrets {
		for i := 0; i+12 <= len(s); i++ {
			if strings.Contains(out, s[i:i+12]) {
				bad = append(bad, fmt.Sprintf("%q (piece %q)", s, s[i:i+12]))
				break
			}
		}
	}
	return bad
}

// fakeSecret is a credential-looking value unique to the test run, with
// the characters that need escaping in URLs and JSON.
func fakeSecret(prefix string, n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return prefix + strings.NewReplacer("a", "+", "b", "/").Replace(hex.EncodeToString(b))
}

// credentialOutputs runs a read-only and a writing command against uri at
// every output form and log level and fails on any credential in any
// output. secrets are the values the environment or files hold.
func credentialOutputs(t *testing.T, e *echoEndpoint, env []string, uri string, secrets ...string) {
	t.Helper()
	home := t.TempDir()
	env = append([]string{"HOME=" + home}, env...)
	for _, mode := range [][]string{nil, {"--json"}, {"--log-level", "trace"}, {"--json", "--log-level", "trace"}} {
		for _, cmd := range [][]string{{"claim", "status", uri}, {"checkpoint", "create", "echo/1", uri}} {
			args := append(append([]string{}, mode...), cmd...)
			before, _ := e.material()
			out, errs, code := retainEnv(t, env, args...)
			hits, seen := e.material()
			if code == 0 || hits == before {
				t.Fatalf("retain %s: exit %d after %d requests to the echoing endpoint:\n%s\n%s", strings.Join(args, " "), code, hits-before, out, errs)
			}
			if bad := leaked(out+errs, append(seen, secrets...)); len(bad) > 0 {
				t.Errorf("retain %s printed credentials %s:\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), strings.Join(bad, ", "), out, errs)
			}
		}
	}
	if _, seen := e.material(); len(seen) == 0 {
		t.Fatal("no request carried credentials: the test proves nothing")
	}
}

// awsEnv clears the AWS credentials the environment may hold.
var awsEnvClear = []string{"AWS_ACCESS_KEY_ID=", "AWS_SECRET_ACCESS_KEY=", "AWS_SESSION_TOKEN=", "AWS_PROFILE=", "AWS_ENDPOINT_URL=", "AWS_REGION=us-east-1",
	"AWS_EC2_METADATA_DISABLED=true"}

func TestNoCredentialInOutputS3EchoingEndpoint(t *testing.T) {
	t.Parallel() // a process-bound test: it waits on retain, Lance and emulators, not the CPU
	key, secret, token := "AKIA"+strings.ToUpper(hex.EncodeToString([]byte("ECHOTEST"))), fakeSecret("s3secret", 16), fakeSecret("s3token", 40)
	for _, c := range []struct {
		name   string
		status int
		code   string
	}{{"403 AccessDenied", 403, "AccessDenied"}, {"400 unknown code", 400, "EchoedRequest"}} {
		t.Run("environment "+c.name, func(t *testing.T) {
			e := newEchoEndpoint(t, "s3", c.status, c.code)
			env := append(append([]string{}, awsEnvClear...), "AWS_ACCESS_KEY_ID="+key, "AWS_SECRET_ACCESS_KEY="+secret, "AWS_SESSION_TOKEN="+token)
			credentialOutputs(t, e, env, "s3://echo-bucket/tables?endpoint="+e.URL, key, secret, token)
		})
	}
	// Credentials only the adapter's credential chain knows (a
	// credential_process): the host never sees them, the plugin must mask
	// them before its errors leave it.
	t.Run("credential_process", func(t *testing.T) {
		dir := t.TempDir()
		pkey, psecret, ptoken := "ASIA"+strings.ToUpper(hex.EncodeToString([]byte("PROCESS1"))), fakeSecret("procsecret", 16), fakeSecret("proctoken", 40)
		script := filepath.Join(dir, "creds.sh")
		js, _ := json.Marshal(map[string]any{"Version": 1, "AccessKeyId": pkey, "SecretAccessKey": psecret, "SessionToken": ptoken})
		os.WriteFile(script, []byte("#!/bin/sh\ncat <<'EOF'\n"+string(js)+"\nEOF\n"), 0o755)
		cfg := filepath.Join(dir, "config")
		os.WriteFile(cfg, []byte("[default]\ncredential_process = "+script+"\n"), 0o600)
		e := newEchoEndpoint(t, "s3", 403, "AccessDenied")
		env := append(append([]string{}, awsEnvClear...), "AWS_CONFIG_FILE="+cfg, "AWS_SHARED_CREDENTIALS_FILE="+filepath.Join(dir, "none"))
		credentialOutputs(t, e, env, "s3://echo-bucket/tables?endpoint="+e.URL, pkey, psecret, ptoken)
	})
}

func TestNoCredentialInOutputGCSEchoingEndpoint(t *testing.T) {
	t.Parallel() // a process-bound test: it waits on retain, Lance and emulators, not the CPU
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalPKCS8PrivateKey(k)
	pk := string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
	keyFile := func(t *testing.T, tokenURL string) string {
		b, _ := json.Marshal(map[string]string{
			"type": "service_account", "project_id": "retain-echo", "private_key_id": fakeSecret("pkid", 10),
			"private_key": pk, "client_email": "echo@retain-echo.iam.gserviceaccount.com", "client_id": "1", "token_uri": tokenURL,
		})
		p := filepath.Join(t.TempDir(), "key.json")
		os.WriteFile(p, b, 0o600)
		return p
	}
	gcsEnv := func(path string) []string {
		return []string{"GOOGLE_APPLICATION_CREDENTIALS=" + path, "STORAGE_EMULATOR_HOST=", "GOOGLE_CLOUD_PROJECT=retain-echo"}
	}
	t.Run("storage endpoint echoes the bearer token", func(t *testing.T) {
		e := newEchoEndpoint(t, "gcs", 403, "forbidden")
		e.tokenOK, e.token = true, "ya29."+fakeSecret("echo", 30)
		credentialOutputs(t, e, gcsEnv(keyFile(t, e.URL+"/token")), "gs://echo-bucket/tables?endpoint="+e.URL, e.token, pk[40:200])
	})
	t.Run("token endpoint echoes the signed assertion", func(t *testing.T) {
		e := newEchoEndpoint(t, "gcs", 403, "forbidden")
		credentialOutputs(t, e, gcsEnv(keyFile(t, e.URL+"/token")), "gs://echo-bucket/tables?endpoint="+e.URL, pk[40:200])
	})
}

func TestNoCredentialInOutputAzureEchoingEndpoint(t *testing.T) {
	t.Parallel() // a process-bound test: it waits on retain, Lance and emulators, not the CPU
	acct := "echoacct"
	key := "ZWNobw" + fakeSecret("", 30) + "=="
	sig := fakeSecret("c2ln", 20) + "="
	sas := "sv=2022-11-02&ss=b&srt=sco&sp=rwdlac&se=2030-01-01T00%3A00%3A00Z&sig=" + url.QueryEscape(sig)
	azClear := []string{"AZURE_STORAGE_CONNECTION_STRING=", "AZURE_STORAGE_ACCOUNT=", "AZURE_STORAGE_KEY="}
	for _, c := range []struct {
		name   string
		status int
		code   string
	}{{"400 unknown code", 400, "EchoedRequest"}, {"403 AuthenticationFailed", 403, "AuthenticationFailed"}} {
		t.Run("shared key "+c.name, func(t *testing.T) {
			e := newEchoEndpoint(t, "azure", c.status, c.code)
			env := append(append([]string{}, azClear...), "AZURE_STORAGE_ACCOUNT="+acct, "AZURE_STORAGE_KEY="+key)
			credentialOutputs(t, e, env, "az://echo-container/tables?endpoint="+e.URL+"/"+acct, key)
		})
		t.Run("SAS connection string "+c.name, func(t *testing.T) {
			e := newEchoEndpoint(t, "azure", c.status, c.code)
			env := append(append([]string{}, azClear...), "AZURE_STORAGE_CONNECTION_STRING=BlobEndpoint="+e.URL+"/"+acct+";SharedAccessSignature="+sas)
			credentialOutputs(t, e, env, "az://echo-container/tables", sig, url.QueryEscape(sig))
		})
	}
	t.Run("account key connection string", func(t *testing.T) {
		e := newEchoEndpoint(t, "azure", 400, "EchoedRequest")
		env := append(append([]string{}, azClear...), "AZURE_STORAGE_CONNECTION_STRING=DefaultEndpointsProtocol=http;AccountName="+acct+";AccountKey="+key+";BlobEndpoint="+e.URL+"/"+acct+";")
		credentialOutputs(t, e, env, "az://echo-container/tables", key)
	})
}
