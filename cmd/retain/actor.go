package main

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/retain-dev/retain/core/storage"
)

// maxActorBytes bounds an actor: the checkpoint registry refuses a longer
// one (checkpoint/registry, 256 bytes), so the CLI refuses it up front.
const maxActorBytes = 256

// actorEnv names the actor when --actor is not given.
const actorEnv = "RETAIN_ACTOR"

// osIdentity is who the OS says runs this process; a variable so a test
// can make the user unknown without a second uid.
var osIdentity = func() (name, host string, err error) {
	host, herr := os.Hostname()
	if herr != nil || host == "" {
		return "", "", fmt.Errorf("the host name is unknown (%v)", herr)
	}
	u, uerr := user.Current()
	if uerr == nil && u.Username != "" {
		return u.Username, host, nil
	}
	// A uid without a passwd entry (containers): the login name the
	// environment gives, if any.
	for _, k := range []string{"USER", "LOGNAME"} {
		if v := os.Getenv(k); v != "" {
			return v, host, nil
		}
	}
	if uerr == nil {
		uerr = errors.New("no user name")
	}
	return "", "", fmt.Errorf("the OS user of this process is unknown (%v; $USER and $LOGNAME are unset)", uerr)
}

// actor is who a command that records one acts as (the claim, audit
// lines, checkpoint and tombstone headers): --actor, else RETAIN_ACTOR,
// else user@host. Never a made-up "unknown": with no user and neither
// given it is a usage error naming both.
func (a *app) actor(cmd *cobra.Command) (string, error) {
	if v, from, ok := a.explicitActor(cmd); ok {
		return v, checkActor(from, v)
	}
	name, host, err := osIdentity()
	if err != nil {
		return "", usageError{fmt.Errorf("cannot tell who is acting, to record it: %v: pass --actor NAME or set %s", err, actorEnv)}
	}
	v := name + "@" + host
	if err := checkActor("the OS user@host", v); err != nil {
		return "", usageError{fmt.Errorf("%v: pass --actor NAME or set %s", err, actorEnv)}
	}
	return v, nil
}

// explicitActor is the actor the command line or environment names, and
// where it came from; ok is false when neither does.
func (a *app) explicitActor(cmd *cobra.Command) (v, from string, ok bool) {
	if f := cmd.Flags().Lookup("actor"); f != nil && f.Changed {
		return a.actorFlag, "--actor", true
	}
	if v, set := os.LookupEnv(actorEnv); set {
		return v, actorEnv, true
	}
	return "", "", false
}

// checkActor refuses an actor that would be recorded badly: empty, with
// control or invisible characters (a line break would forge lines in the
// text outputs), or longer than the registry keeps.
func checkActor(from, v string) error {
	switch {
	case strings.TrimSpace(v) == "":
		return usageError{fmt.Errorf("%s is empty: name who is acting, e.g. --actor alice@laptop", from)}
	case !utf8.ValidString(v):
		return usageError{fmt.Errorf("%s %s is not valid UTF-8", from, storage.Quote(v))}
	case len(v) > maxActorBytes:
		return usageError{fmt.Errorf("%s is %d bytes: at most %d", from, len(v), maxActorBytes)}
	case v != strings.TrimSpace(v):
		return usageError{fmt.Errorf("%s %s starts or ends with white space", from, storage.Quote(v))}
	}
	for _, r := range v {
		if !unicode.IsPrint(r) {
			return usageError{fmt.Errorf("%s %s has a non-printable character %U", from, storage.Quote(v), r)}
		}
	}
	return nil
}
