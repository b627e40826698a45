package emulator

import (
	"os"
	"testing"
)

// IsolateAWS unsets (not empties) the profile and points the files away.
func TestIsolateAWS(t *testing.T) {
	t.Setenv("AWS_PROFILE", "machine")
	env := IsolateAWS(t, map[string]string{"AWS_REGION": "us-east-1"})
	if _, ok := os.LookupEnv("AWS_PROFILE"); ok {
		t.Fatal("AWS_PROFILE is still set")
	}
	if os.Getenv("AWS_REGION") != "us-east-1" || len(env) != 4 {
		t.Fatalf("env %v", env)
	}
}
