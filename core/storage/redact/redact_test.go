package redact

import (
	"bytes"
	"errors"
	"fmt"
	"github.com/retain-dev/retain/core/storage/storagetest"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// A registered value is masked in every form output can carry it in.
func TestRegisteredValueEveryForm(t *testing.T) {
	secret := `wJalrXUtnFEMI/K7MDENG+bPxRfiCY"EXAMPLE=`
	Register(secret)
	for _, in := range []string{
		"raw " + secret + " end",
		"query x=" + "wJalrXUtnFEMI%2FK7MDENG%2BbPxRfiCY%22EXAMPLE%3D",
		"path /" + "wJalrXUtnFEMI%2FK7MDENG+bPxRfiCY%22EXAMPLE=",
		fmt.Sprintf("go %q", secret),
		`json {"v":"wJalrXUtnFEMI/K7MDENG+bPxRfiCY\"EXAMPLE="}`,
	} {
		if out := String(in); strings.Contains(out, "wJalrXUtnFEMI") {
			t.Errorf("%q -> %q", in, out)
		}
	}
}

func TestShortValuesNotRegistered(t *testing.T) {
	Register("admin", "")
	if out := String("the admin user"); out != "the admin user" {
		t.Fatalf("a short value was masked: %q", out)
	}
}

// Credentials in the places they obviously sit are masked without being
// registered: what an echoing endpoint sends back of a signed request.
func TestShapes(t *testing.T) {
	for _, c := range []struct{ in, leak string }{
		{"Authorization: AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20261201/us-east-1/s3/aws4_request, SignedHeaders=host, Signature=9f2c1b5e7d", "9f2c1b5e7d"},
		{"map[Authorization:[Bearer abcdefghijklmnopqrstuvwxyz] User-Agent:[x]]", "abcdefghijklmnop"},
		{`{"Authorization":"SharedKey acct:c2lnbmF0dXJlLXZhbHVl"}`, "c2lnbmF0dXJl"},
		{"X-Amz-Security-Token: IQoJb3JpZ2luX2VjEXAMPLETOKEN\r\nX-Amz-Date: x", "IQoJb3JpZ2lu"},
		{"GET /b/k?X-Amz-Security-Token=IQoJb3JpZ2lu&X-Amz-Signature=deadbeefcafe HTTP/1.1", "deadbeefcafe"},
		{"GET /c?sv=2022-11-02&sig=c2lnbmF0dXJl%2Bx%3D&sp=r HTTP/1.1", "c2lnbmF0dXJl"},
		{"DefaultEndpointsProtocol=https;AccountName=a;AccountKey=S2V5S2V5S2V5S2V5;EndpointSuffix=x", "S2V5S2V5"},
		{"grant_type=jwt-bearer&assertion=eyJhbGciOiJSUzI1NiJ9.eyJpc3MiOiJ4In0.c2lnbmF0dXJl", "eyJpc3MiOiJ4In0"},
		{"token eyJhbGciOiJSUzI1NiJ9.eyJpc3MiOiJ4In0.c2lnbmF0dXJl here", "eyJpc3MiOiJ4In0"},
		{`{"access_token":"ya29.a0AfH6SMBxyzxyzxyz","token_type":"Bearer"}`, "a0AfH6SMB"},
		{"key AKIAIOSFODNN7EXAMPLE used", "IOSFODNN7"},
		{"-----BEGIN PRIVATE KEY-----\\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\\n-----END PRIVATE KEY-----\\n", "MIIEvQIBADAN"},
		{"-----BEGIN RSA PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC", "MIIEvQIBADAN"},
		{"<SessionToken>FQoGZXIvYXdzEXAMPLE</SessionToken>", "FQoGZXIvYXdz"},
		{`level=debug msg="client_secret: s3cr3t-v4lu3-xyz"`, "s3cr3t-v4lu3"},
	} {
		out := String(c.in)
		if strings.Contains(out, c.leak) {
			t.Errorf("%q -> %q still carries %q", c.in, out, c.leak)
		}
		if !strings.Contains(out, Mask) {
			t.Errorf("%q -> %q: no mask", c.in, out)
		}
	}
}

// Ordinary output is left as it is.
func TestOrdinaryTextUntouched(t *testing.T) {
	for _, s := range []string{
		`get "__leases/retention.json": permission denied: the endpoint refused access to bucket "b" (403 AccessDenied): check the credentials the AWS default chain found and their permissions`,
		"AuthorizationHeaderMalformed: the bucket lives in another region",
		"SignatureDoesNotMatch",
		"endpoint http://127.0.0.1:10000/devstoreaccount1, container c, credentials: shared key of account devstoreaccount1 from AZURE_STORAGE_KEY",
		"owner token 3f9a0c2e8b1d4f6a7c5e9b0d2a4c6e8f, checkpoint nightly/1 (ogcp_0123456789abcdef)",
		"Microsoft Entra ID tokens are only sent over https",
	} {
		if out := String(s); out != s {
			t.Errorf("%q -> %q", s, out)
		}
	}
}

func TestConnectionStringAndSAS(t *testing.T) {
	RegisterConnectionString("BlobEndpoint=http://127.0.0.1:1/acct;SharedAccessSignature=sv=2022-11-02&sp=rwdl&sig=Zm9vYmFyYmF6cXV1eA%3D%3D")
	RegisterConnectionString("AccountName=acct;AccountKey=QWNjb3VudEtleVZhbHVlQQ==")
	for _, in := range []string{"echo Zm9vYmFyYmF6cXV1eA== end", "echo Zm9vYmFyYmF6cXV1eA%3D%3D end", "key QWNjb3VudEtleVZhbHVlQQ== end"} {
		if out := String(in); strings.Contains(out, "Zm9vYmFy") || strings.Contains(out, "QWNjb3Vu") {
			t.Errorf("%q -> %q", in, out)
		}
	}
}

func TestGoogleJSON(t *testing.T) {
	RegisterGoogleJSON([]byte(`{"type":"authorized_user","client_id":"1","client_secret":"d-FL95Q19q7MQmFpd7hHD0Ty","refresh_token":"rt-1234567890abcdef"}`))
	for _, in := range []string{"secret d-FL95Q19q7MQmFpd7hHD0Ty", "refresh rt-1234567890abcdef"} {
		if out := String(in); strings.Contains(out, "FL95Q19q") || strings.Contains(out, "1234567890abcdef") {
			t.Errorf("%q -> %q", in, out)
		}
	}
}

// The environment and the standard credential files are read at first use
// in a fresh process: run this test's binary again with them set.
func TestEnvironmentAndFilesLoaded(t *testing.T) {
	if os.Getenv("REDACT_TEST_CHILD") == "1" {
		for _, v := range strings.Split(os.Getenv("REDACT_TEST_VALUES"), ",") {
			if out := String("x " + v + " y"); strings.Contains(out, v) {
				fmt.Printf("LEAK %s\n", v)
			}
		}
		return
	}
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	creds := write("credentials", "[default]\naws_access_key_id = AKIDFILEVALUE0001\naws_secret_access_key=fileSecretValue0002\n[other]\naws_session_token = fileSessionToken0003\n")
	gac := write("sa.json", `{"type":"service_account","private_key_id":"pkid00000004","private_key":"-----BEGIN PRIVATE KEY-----\nTUlJRXZRSUJBREFOQmdrcWhraUc5dzBCQVFFRkFBU0NCS2N3\n-----END PRIVATE KEY-----\n"}`)
	tok := write("token", "webIdentityToken0005\n")
	vals := []string{"envSecretValue0006", "envSessionToken0007", "AKIDENVVALUE0008", "AKIDFILEVALUE0001", "fileSecretValue0002", "fileSessionToken0003",
		"pkid00000004", "TUlJRXZRSUJBREFOQmdrcWhraUc5dzBCQVFFRkFBU0NCS2N3", "webIdentityToken0005", "c2FzU2lnVmFsdWUwMDA5", "YWNjb3VudEtleTAwMTA="}
	cmd := testBinary(t, "TestEnvironmentAndFilesLoaded")
	cmd.Env = append(os.Environ(), "REDACT_TEST_CHILD=1", "REDACT_TEST_VALUES="+strings.Join(vals, ","), "HOME="+dir,
		"AWS_SECRET_ACCESS_KEY=envSecretValue0006", "AWS_SESSION_TOKEN=envSessionToken0007", "AWS_ACCESS_KEY_ID=AKIDENVVALUE0008",
		"AWS_SHARED_CREDENTIALS_FILE="+creds, "GOOGLE_APPLICATION_CREDENTIALS="+gac, "AWS_WEB_IDENTITY_TOKEN_FILE="+tok,
		"AZURE_STORAGE_SAS_TOKEN=?sv=2022-11-02&sig=c2FzU2lnVmFsdWUwMDA5",
		"AZURE_STORAGE_CONNECTION_STRING=AccountName=a;AccountKey=YWNjb3VudEtleTAwMTA=")
	out, err := cmd.CombinedOutput()
	if err != nil || bytes.Contains(out, []byte("LEAK")) || !bytes.Contains(out, []byte("PASS")) {
		t.Fatalf("child: %v\n%s", err, out)
	}
}

// A line written in pieces is masked whole; Flush writes the rest.
func TestWriterHoldsPartialLines(t *testing.T) {
	Register("splitAcrossWrites01")
	var buf bytes.Buffer
	w := NewWriter(&buf)
	fmt.Fprint(w, "error: splitAcr")
	if buf.Len() != 0 {
		t.Fatalf("an unfinished line was written: %q", buf.String())
	}
	fmt.Fprint(w, "ossWrites01 happened\nnext: Authorization: Bearer abcdefghijklmnopqrstuv")
	if got := buf.String(); got != "error: "+Mask+" happened\n" {
		t.Fatalf("after the newline: %q", got)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if got := buf.String(); strings.Contains(got, "abcdefghijklmnop") || !strings.HasSuffix(got, "next: Authorization: "+Mask) {
		t.Fatalf("after Flush: %q", got)
	}
	if w.Unwrap() != &buf {
		t.Fatal("Unwrap")
	}
}

func TestErrorKeepsChain(t *testing.T) {
	Register("errorChainSecret01")
	base := fmt.Errorf("open: %w: token errorChainSecret01", fs.ErrNotExist)
	err := Error(base)
	if strings.Contains(err.Error(), "errorChainSecret01") || !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("%v (is not-exist: %v)", err, errors.Is(err, fs.ErrNotExist))
	}
	if Error(nil) != nil {
		t.Fatal("Error(nil) is not nil")
	}
}

func testBinary(t *testing.T, name string) *exec.Cmd {
	t.Helper()
	return storagetest.Child(name, nil, "-test.v")
}

// An excerpt is masked before it is cut: no prefix of a credential is left.
func TestExcerptMasksBeforeCutting(t *testing.T) {
	Register("excerptSecretValue0123456789")
	in := "\n  GET /b?x=excerptSecretValue0123456789 HTTP/1.1\nAuthorization: AWS4-HMAC-SHA256 Signature=abc"
	out := Excerpt(in, 28)
	if strings.Contains(out, "excerptSecret") || strings.Contains(out, "\n") || len(out) > 28+3 {
		t.Fatalf("%q", out)
	}
	if got := Excerpt("héllo wörld", 2); got != "h..." {
		t.Fatalf("cut inside a character: %q", got)
	}
}
