package azure

import (
	"bytes"
	"io"
	"os"

	"github.com/retain-dev/retain/core/storage"
)

// memSpool is the largest body kept in memory before a write; larger ones
// go to a temp file. Put Blob needs a seekable body (the SDK rewinds it to
// retry), and a body from the plugin boundary is a stream.
const memSpool = 8 << 20

// spooled is a seekable copy of a Put body.
type spooled struct {
	io.ReadSeeker
	f *os.File // the temp file, if any
}

// Close is a no-op: the SDK closes bodies it sends, and a retry must still
// be able to rewind. release frees the body.
func (s *spooled) Close() error { return nil }

func (s *spooled) release() {
	if s.f != nil {
		s.f.Close()
	}
}

// spool makes body seekable and measures it, refusing bodies over
// MaxObjectSize with ErrLimitExceeded before anything is sent. A body that
// can already seek and read at offsets (bytes.Reader, os.File) is used in
// place from its current offset.
func spool(op, key string, body io.Reader) (*spooled, int64, error) {
	tooBig := func() error {
		return storage.Errorf(op, key, storage.ErrLimitExceeded,
			"the body exceeds %d bytes, the most one Put Blob takes (a larger write would need a staged upload, which a condition cannot cover)", int64(MaxObjectSize))
	}
	if body == nil {
		return &spooled{ReadSeeker: bytes.NewReader(nil)}, 0, nil
	}
	if ra, ok := body.(interface {
		io.ReaderAt
		io.Seeker
	}); ok {
		cur, err := ra.Seek(0, io.SeekCurrent)
		if err == nil {
			end, err := ra.Seek(0, io.SeekEnd)
			if err == nil {
				if _, err := ra.Seek(cur, io.SeekStart); err != nil {
					return nil, 0, storage.Wrap(op, key, storage.ErrUnknown, err)
				}
				if end-cur > MaxObjectSize {
					return nil, 0, tooBig()
				}
				return &spooled{ReadSeeker: io.NewSectionReader(ra, cur, end-cur)}, end - cur, nil
			}
		}
	}
	var buf bytes.Buffer
	n, err := io.Copy(&buf, io.LimitReader(body, memSpool+1))
	if err != nil {
		return nil, 0, readErr(op, key, err)
	}
	if n <= memSpool {
		return &spooled{ReadSeeker: bytes.NewReader(buf.Bytes())}, n, nil
	}
	f, err := os.CreateTemp("", "retain-azure-body-*")
	if err != nil {
		return nil, 0, storage.Wrap(op, key, storage.ErrUnknown, err)
	}
	// Unlinked at once: the descriptor keeps it, nothing is left on a crash.
	os.Remove(f.Name())
	s := &spooled{f: f}
	if _, err := f.Write(buf.Bytes()); err != nil {
		s.release()
		return nil, 0, storage.Wrap(op, key, storage.ErrUnknown, err)
	}
	m, err := io.Copy(f, io.LimitReader(body, MaxObjectSize+1-n))
	if err != nil {
		s.release()
		return nil, 0, readErr(op, key, err)
	}
	if n+m > MaxObjectSize {
		s.release()
		return nil, 0, tooBig()
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		s.release()
		return nil, 0, storage.Wrap(op, key, storage.ErrUnknown, err)
	}
	s.ReadSeeker = f
	return s, n + m, nil
}

// readErr reports a failure reading the caller's body, keeping its kind
// when it has one (a body from the plugin boundary carries kinds).
func readErr(op, key string, err error) error {
	return &storage.Error{Op: op, Key: key, Kind: storage.KindOf(err), Msg: "reading the body to write failed; nothing was sent", Err: err}
}
