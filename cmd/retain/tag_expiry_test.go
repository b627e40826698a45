package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/retain-dev/retain/core/tag"
)

func TestTagExpiresFlags(t *testing.T) {
	db := fixtureDB(t, "v2-appends")
	uri := db + "/v2-appends.lance"
	out, errs, code := retain(t, "tag", "create", "session-1", uri, "--expires", "2h", "--json")
	if code != 0 {
		t.Fatalf("create --expires: %d %s", code, errs)
	}
	var res struct {
		Tag tag.Ref `json:"tag"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || res.Tag.Expires == nil || time.Until(*res.Tag.Expires) < 110*time.Minute || time.Until(*res.Tag.Expires) > 2*time.Hour {
		t.Fatalf("create --expires 2h: %v %s", err, out)
	}
	if _, errs, code := retain(t, "tag", "update", "session-1", uri, "--expires", "1h", "--no-expiry"); code != 2 || !strings.Contains(errs, "give one") {
		t.Fatalf("both: %d %s", code, errs)
	}
	out, errs, code = retain(t, "tag", "update", "session-1", uri, "--no-expiry", "--json")
	res.Tag = tag.Ref{}
	if err := json.Unmarshal([]byte(out), &res); code != 0 || err != nil || res.Tag.Expires != nil {
		t.Fatalf("update --no-expiry: %d %s %s", code, out, errs)
	}
	if _, errs, code := retain(t, "tag", "create", "s2", uri, "--meta", "retain.expires=never"); code != 2 || !strings.Contains(errs, "reserved") {
		t.Fatalf("a reserved key by hand: %d %s", code, errs)
	}
}
