package emulator

import (
	"os"
	"path/filepath"
	"testing"
)

// awsUnset are the variables that would let the machine's AWS identity or
// endpoint into a test.
var awsUnset = []string{"AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL_S3", "AWS_ROLE_ARN", "AWS_WEB_IDENTITY_TOKEN_FILE"}

// IsolateAWS keeps the machine's AWS files, profile, session and instance
// metadata out of t (config and credentials files point into a temporary
// folder), then sets env (an emulator's Env(), which child processes
// inherit). It returns env as KEY=VALUE lines, for a child's cmd.Env.
// The variables are unset, not emptied: Lance's object_store takes an
// empty AWS_* variable as a value (an empty endpoint URL panics in it).
// t.Setenv restores everything after the test.
func IsolateAWS(t testing.TB, env map[string]string) []string {
	t.Helper()
	dir := t.TempDir()
	set := map[string]string{
		"AWS_CONFIG_FILE":             filepath.Join(dir, "config"),
		"AWS_SHARED_CREDENTIALS_FILE": filepath.Join(dir, "credentials"),
		"AWS_EC2_METADATA_DISABLED":   "true",
	}
	for k, v := range set {
		t.Setenv(k, v)
	}
	for _, k := range awsUnset {
		t.Setenv(k, "") // registers the restore
		os.Unsetenv(k)
	}
	var list []string
	for k, v := range set {
		list = append(list, k+"="+v)
	}
	for k, v := range env {
		t.Setenv(k, v)
		list = append(list, k+"="+v)
	}
	return list
}
