package s3

import (
	"fmt"
	"html"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/storage/redact"
	"github.com/retain-dev/retain/internal/emulator"
)

// An endpoint that echoes each signed request (headers, security token,
// signature) into its error answers: in process, without the plugin
// boundary's mask, no error or note of the adapter carries a credential
// the chain resolved or a signature.
func TestEchoingEndpointErrorsCarryNoCredential(t *testing.T) {
	// The environment's credentials are loaded before this test sets its
	// own: only what the chain resolved at open can mask them.
	redact.String("")
	emulator.IsolateAWS(t, nil)
	key, secret, token := "AKIAECHOENDPOINT0001", "echoSecretKey/0123456789+abcdefghijklmnop", "echoSessionToken/0123456789+abcdefghijklmnopqrstuvwxyz="
	t.Setenv("AWS_ACCESS_KEY_ID", key)
	t.Setenv("AWS_SECRET_ACCESS_KEY", secret)
	t.Setenv("AWS_SESSION_TOKEN", token)
	t.Setenv("AWS_REGION", "us-east-1")

	var mu sync.Mutex
	var sigs []string
	sigRE := regexp.MustCompile(`Signature=([0-9a-f]{64})`)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		dump, _ := httputil.DumpRequest(r, true)
		auth := r.Header.Get("Authorization")
		if m := sigRE.FindStringSubmatch(auth); m != nil {
			mu.Lock()
			sigs = append(sigs, m[1])
			mu.Unlock()
		}
		w.Header().Set("x-amz-request-id", r.Header.Get("X-Amz-Security-Token"))
		w.Header().Set("x-amz-id-2", auth)
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(http.StatusForbidden)
		fmt.Fprintf(w, `<Error><Code>AccessDenied</Code><Message>%s</Message></Error>`,
			html.EscapeString(r.Header.Get("X-Amz-Security-Token")+" "+auth+"\n"+string(dump)))
	}))
	defer srv.Close()

	d := openT(t, "s3://echo/p?endpoint="+srv.URL)
	var texts []string
	_, err := d.Get(bg, "k")
	texts = append(texts, err.Error())
	_, err = putS(d, "k", "y", storage.PutCreateIfAbsent, "")
	texts = append(texts, err.Error())
	_, err = d.List(bg, storage.ListOptions{})
	texts = append(texts, err.Error())
	texts = append(texts, d.Delete(bg, "k", storage.DeleteOptions{}).Error())
	texts = append(texts, d.caps.Notes...)
	texts = append(texts, d.caps.CreateIfAbsent.Reason, d.caps.DeleteIfVersion.Reason)

	mu.Lock()
	defer mu.Unlock()
	if len(sigs) == 0 {
		t.Fatal("no signed request reached the endpoint")
	}
	for _, text := range texts {
		for _, s := range append([]string{key, secret, token}, sigs...) {
			if strings.Contains(text, s[:16]) {
				t.Errorf("carries %q: %s", s, text)
			}
		}
	}
}
