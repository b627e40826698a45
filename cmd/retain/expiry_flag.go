package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/retain-dev/retain/core/duration"
)

// expiryValue is --expires: a duration from now ("7d", "2h") or a moment
// (RFC 3339, "2026-12-11T00:00:00Z"). A moment makes a retry after a lost
// reply ask for the same expiry, where "7d" would ask for a later one.
type expiryValue struct {
	d  time.Duration
	at time.Time
}

func (v *expiryValue) Set(s string) error {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		*v = expiryValue{at: t.UTC()}
		return nil
	}
	d, err := duration.Parse(s)
	if err != nil {
		return fmt.Errorf("%v; or write a moment (RFC 3339, e.g. 2026-12-11T00:00:00Z)", err)
	}
	*v = expiryValue{d: d}
	return nil
}

func (v *expiryValue) String() string {
	if !v.at.IsZero() {
		return v.at.Format(time.RFC3339Nano)
	}
	if v.d == 0 {
		return ""
	}
	return v.d.String()
}

func (v *expiryValue) Type() string { return "duration|time" }

// resolve is the expiry as a moment; one not after now is a usage error.
func (v *expiryValue) resolve(now time.Time) (time.Time, error) {
	at := v.at
	if at.IsZero() {
		at = now.Add(v.d)
	}
	if !at.After(now) {
		return time.Time{}, usageError{errors.New("--expires: a positive duration from now (2h, 7d) or a moment in the future (RFC 3339)")}
	}
	return at, nil
}
