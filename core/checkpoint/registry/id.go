package registry

import (
	"crypto/rand"
	"encoding/base32"
	"fmt"
)

// ID identifies one checkpoint, or one table of the catalog: 128 random
// bits written as 26 characters of lower-case RFC 4648 base32
// ("a"–"z", "2"–"7") without padding, for example
// "7k3q2m4xw5bfyz6tnrhd2vca4e". IDs are never reused: a revived name gets a
// fresh id, and the old id stays the old checkpoint's forever.
type ID string

// IDLen is the length of an ID in characters.
const IDLen = 26

var idEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// NewID returns a fresh random ID. It panics only if the system has no
// randomness, as crypto/rand itself does.
func NewID() ID {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("checkpoint: no randomness: " + err.Error())
	}
	return ID(idEncoding.EncodeToString(b[:]))
}

// ParseID checks that s is an ID in canonical form: 26 characters of the
// alphabet whose last character carries no bits beyond the 128.
func ParseID(s string) (ID, error) {
	if err := ID(s).Validate(); err != nil {
		return "", err
	}
	return ID(s), nil
}

// Validate is ParseID's check. The error matches ErrInvalidSnapshot and
// storage.ErrInvalidArgument.
func (id ID) Validate() error {
	s := string(id)
	if len(s) != IDLen {
		return errorf("id", s, ErrInvalidSnapshot, "an id is %d characters of lower-case base32, this one has %d", IDLen, len(s))
	}
	b, err := idEncoding.DecodeString(s)
	if err != nil || len(b) != 16 || idEncoding.EncodeToString(b) != s {
		return errorf("id", s, ErrInvalidSnapshot, "not a canonical id: 26 characters of a-z and 2-7 encoding 128 bits")
	}
	return nil
}

func (id ID) String() string { return string(id) }

// idOK reports whether s is syntactically an ID.
func idOK(s string) bool { return ID(s).Validate() == nil }

var _ fmt.Stringer = ID("")
