package azure

import (
	"fmt"
	"html"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"

	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/storage/redact"
)

// An endpoint that echoes each request (its SAS query, its shared-key
// signature) into the first line of its error message and its request id:
// in process, without the plugin boundary's mask, no error of the adapter
// carries the SAS signature or the account key.
func TestEchoingEndpointErrorsCarryNoCredential(t *testing.T) {
	// The environment is loaded before this test sets its credentials:
	// only what Open registers can mask them.
	redact.String("")
	const sig = "echoSASsignature0123456789+abcdefgh/ijk="
	const key = "ZWNob0FjY291bnRLZXkwMTIzNDU2Nzg5YWJjZGVmZ2hpams="
	var mu sync.Mutex
	var signatures []string // of the shared-key Authorization headers
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		dump, _ := httputil.DumpRequest(r, true)
		if _, s, ok := strings.Cut(r.Header.Get("Authorization"), ":"); ok {
			mu.Lock()
			signatures = append(signatures, s)
			mu.Unlock()
		}
		bare := r.URL.Query().Get("sig") + " " + r.URL.RawQuery + " " + r.Header.Get("Authorization")
		w.Header().Set("x-ms-request-id", bare)
		w.Header().Set("x-ms-error-code", "EchoedRequest")
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, "<Error><Code>EchoedRequest</Code><Message>%s</Message></Error>", html.EscapeString(bare+"\n"+string(dump)))
	}))
	defer srv.Close()
	noRetry := openOptions{retry: &policy.RetryOptions{MaxRetries: -1}}
	opts := map[string]string{OptConditionalDelete: "on"}

	for _, c := range []struct {
		name    string
		env     map[string]string
		opts    map[string]string
		secrets []string
	}{
		{"SAS connection string", map[string]string{envConnectionString: "BlobEndpoint=" + srv.URL + "/acct;SharedAccessSignature=sv=2022-11-02&sp=rwdl&sig=" + url.QueryEscape(sig)},
			opts, []string{sig, url.QueryEscape(sig)}},
		{"shared key", map[string]string{envAccount: "echoacct", envKey: key},
			map[string]string{OptConditionalDelete: "on", OptEndpoint: srv.URL + "/echoacct"}, []string{key}},
	} {
		t.Run(c.name, func(t *testing.T) {
			clearEnv(t)
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			d, err := openWith(bg, loc("echo", "p", c.opts), noRetry)
			if err != nil {
				t.Fatal(err)
			}
			var errs []error
			_, err = d.Stat(bg, "k")
			errs = append(errs, err)
			_, err = d.Put(bg, "k", strings.NewReader("x"), storage.PutOptions{Mode: storage.PutCreateIfAbsent})
			errs = append(errs, err)
			_, err = d.List(bg, storage.ListOptions{})
			errs = append(errs, err)
			mu.Lock()
			secrets := append(append([]string{}, c.secrets...), signatures...)
			mu.Unlock()
			for i, err := range errs {
				if err == nil {
					t.Fatalf("call %d: no error from an endpoint that refuses everything", i)
				}
				for _, s := range secrets {
					if strings.Contains(err.Error(), s[:16]) {
						t.Errorf("call %d carries %q: %v", i, s, err)
					}
				}
			}
		})
	}
}
