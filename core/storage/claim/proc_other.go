//go:build !linux

package claim

import "errors"

// Outside Linux the tool cannot name a process instance, so a claim made
// here carries no boot id and a takeover always needs an operator's
// attestation: failing closed rather than guessing that an owner is dead.

func bootID() string { return "" }

var errNoProcfs = errors.New("process inspection is implemented for Linux only")

func processStart(pid int) (string, error) { return "", errNoProcfs }

// processAlive cannot prove a process dead here, so it reports it alive.
func processAlive(pid int) (bool, string, error) { return true, "", errNoProcfs }
