package gcs

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/storage/redact"
	"github.com/retain-dev/retain/core/storage/storagetest"
)

// Endpoints that echo each request into their error answers: GCS echoing
// the bearer token, the token endpoint echoing the signed assertion. In
// process, without the plugin boundary's mask, the adapter's error
// carries neither, nor any part of the key file.
func TestEchoingEndpointErrorsCarryNoCredential(t *testing.T) {
	// The environment is loaded before this test points it at its key
	// file: only what Open registers can mask the key and the token.
	redact.String("")
	t.Setenv(emulatorEnv, "")
	t.Setenv("GOOGLE_CLOUD_PROJECT", "retain-test")
	// Not a Google-shaped token: only its registration can mask it.
	const token = "echoAccessToken0123456789abcdefghij"
	for _, c := range []struct {
		name    string
		tokenOK bool
	}{{"GCS echoes the bearer token", true}, {"the token endpoint echoes the assertion", false}} {
		t.Run(c.name, func(t *testing.T) {
			var mu sync.Mutex
			var seen []string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				dump, _ := httputil.DumpRequest(r, true)
				body, _ := io.ReadAll(r.Body)
				form, _ := url.ParseQuery(string(body))
				bare := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ") + " " + form.Get("assertion")
				mu.Lock()
				if a := form.Get("assertion"); a != "" {
					seen = append(seen, a)
				}
				mu.Unlock()
				w.Header().Set("Content-Type", "application/json")
				switch {
				case r.URL.Path == "/token" && c.tokenOK:
					json.NewEncoder(w).Encode(map[string]any{"access_token": token, "token_type": "Bearer", "expires_in": 3600})
				case r.URL.Path == "/token":
					w.WriteHeader(http.StatusBadRequest)
					json.NewEncoder(w).Encode(map[string]string{"error": "invalid_grant", "error_description": bare + "\n" + string(dump)})
				default:
					w.WriteHeader(http.StatusForbidden)
					json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"code": 403, "message": bare + "\n" + string(dump),
						"errors": []map[string]string{{"reason": "forbidden", "message": bare}}}})
				}
			}))
			defer srv.Close()
			path, pk := serviceAccountKey(t, srv.URL+"/token")
			t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", path)
			_, err := openURIErr("gs://retain-test/p?conditional-delete=off&endpoint=" + srv.URL)
			ce := storagetest.WantKind(t, "open against an echoing endpoint", err, storage.ErrPermissionDenied)
			mu.Lock()
			defer mu.Unlock()
			secrets := append([]string{pk[40:80], pk[len(pk)-80 : len(pk)-40]}, seen...)
			if c.tokenOK {
				secrets = append(secrets, token)
			} else if len(seen) == 0 {
				t.Fatal("no assertion reached the token endpoint")
			}
			for _, s := range secrets {
				if strings.Contains(ce.Error(), s[:16]) {
					t.Errorf("the error carries %q: %v", s, ce)
				}
			}
		})
	}
}
