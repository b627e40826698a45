package main

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/spf13/cobra"

	"github.com/retain-dev/retain/core/storage"
)

// refuseUnknownCommands makes a mistyped subcommand a usage error (exit 2)
// that names the nearest real command. Cobra checks subcommand names only
// at the root: `retain checkpoint creat …` printed the group's help and
// exited 0, so a script saw success. A group command runs only to print
// its help when given no words, and refuses any word that is not one of
// its commands. Flag errors are usage errors with the echoed input capped.
func refuseUnknownCommands(root *cobra.Command) {
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return usageError{errors.New(capEchoes(err.Error()))}
	})
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.HasSubCommands() && !c.Runnable() {
			c.Args = unknownSubcommand
			c.DisableFlagsInUseLine = true
			c.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
		}
		c.SuggestionsMinimumDistance = 2
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

// unknownSubcommand refuses the first word of a group command that names
// none of its commands, suggesting the ones it is closest to.
func unknownSubcommand(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	msg := fmt.Sprintf("unknown command %s for `%s`", storage.Quote(args[0]), cmd.CommandPath())
	if sug := cmd.SuggestionsFor(args[0]); len(sug) > 0 {
		for i := range sug {
			sug[i] = "`" + cmd.CommandPath() + " " + sug[i] + "`"
		}
		msg += ": did you mean " + strings.Join(sug, " or ") + "?"
	}
	return usageError{fmt.Errorf("%s (see `%s --help`)", msg, cmd.CommandPath())}
}

// capEchoes shortens every word of a message longer than storage.MaxEcho bytes
// to its first bytes and its length: cobra and pflag echo flags and values
// as given, and a pasted 20 KB value must not become a 20 KB message.
func capEchoes(msg string) string {
	words := strings.Split(msg, " ")
	for i, w := range words {
		if len(w) > storage.MaxEcho {
			words[i] = storage.Quote(w)
		}
	}
	return strings.Join(words, " ")
}

// showURI renders a store or table URI the user gave for a message: whole
// while it could name a real store (no key is longer than storage.MaxKeyBytes),
// capped like storage.Quote beyond that.
func showURI(uri string) string {
	if len(uri) <= storage.MaxKeyBytes {
		return uri
	}
	return storage.Quote(uri)
}

// capPathError keeps an *fs.PathError's operation and cause but caps its
// path: the os package repeats a path as given, however long.
func capPathError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) && len(pe.Path) > storage.MaxKeyBytes {
		return fmt.Errorf("%s %s: %w", pe.Op, storage.Quote(pe.Path), pe.Err)
	}
	return err
}
