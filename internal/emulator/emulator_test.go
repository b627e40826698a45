package emulator

import (
	"net/http"
	"testing"
)

func TestStartAll(t *testing.T) {
	for name, ep := range map[string]string{
		"versitygw": Versitygw(t).Endpoint,
		"azurite":   Azurite(t).Endpoint,
		"gofakes3":  GoFakeS3(t).Endpoint,
		"fakegcs":   "http://" + FakeGCS(t).Host + "/storage/v1/b",
	} {
		resp, err := http.Get(ep)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		resp.Body.Close()
		t.Logf("%s answers %s", name, resp.Status)
	}
}
