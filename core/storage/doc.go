// Package core is retain's storage contract: the Driver interface an
// adapter implements for one backend (get, stat, put with overwrite,
// create-if-absent or replace-if-version, delete optionally if-version,
// batch delete, ordered bounded listing, gates), the Capabilities it
// declares (native, gated or none for each conditional operation, with a
// scope; gates; limits), the error kinds every layer shares (ErrNotFound,
// ErrAlreadyExists, ErrPreconditionFailed, ... matched with errors.Is), the
// key rules, and store URIs (Location).
//
// Store is the portable type over a Driver (as gocloud.dev's blob.Bucket
// is over its drivers): it validates keys and options, refuses what the
// adapter declared none, splits batches to the declared limits, bounds the
// requests in flight, checks what the driver returns and shapes every
// error into an *Error. Everything above the contract takes a *Store.
package storage
