package s3

import (
	"bytes"
	"errors"
	"io"
	"os"
)

// memSpool is how much of a body is held in memory before it spills to a
// temp file.
const memSpool = 16 << 20

// spooled is a Put body made seekable with a known length, so the SDK can
// sign and checksum it and rewind it for a retry.
type spooled struct {
	r    io.ReadSeeker
	size int64
	file *os.File // temp file to remove, if the body spilled
}

func (s *spooled) Close() {
	if s.file != nil {
		s.file.Close()
		os.Remove(s.file.Name())
	}
}

// errTooLarge is returned by spool for a body over the limit.
var errTooLarge = errors.New("body exceeds the object size limit")

// spool reads body (at most limit bytes) into memory or a temp file. A
// reader that already knows its length and can seek (bytes.Reader,
// strings.Reader) is used as it is.
func spool(body io.Reader, limit int64) (*spooled, error) {
	if body == nil {
		return &spooled{r: bytes.NewReader(nil)}, nil
	}
	if rs, ok := body.(interface {
		io.ReadSeeker
		Len() int
	}); ok {
		if int64(rs.Len()) > limit {
			return nil, errTooLarge
		}
		return &spooled{r: rs, size: int64(rs.Len())}, nil
	}
	var buf bytes.Buffer
	n, err := io.CopyN(&buf, body, memSpool+1)
	if err != nil && err != io.EOF {
		return nil, err
	}
	if n <= memSpool {
		if n > limit {
			return nil, errTooLarge
		}
		return &spooled{r: bytes.NewReader(buf.Bytes()), size: n}, nil
	}
	f, err := os.CreateTemp("", "retain-s3-put-")
	if err != nil {
		return nil, err
	}
	s := &spooled{file: f}
	if _, err := f.Write(buf.Bytes()); err != nil {
		s.Close()
		return nil, err
	}
	m, err := io.CopyN(f, body, limit-n+1)
	if err != nil && err != io.EOF {
		s.Close()
		return nil, err
	}
	if n+m > limit {
		s.Close()
		return nil, errTooLarge
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		s.Close()
		return nil, err
	}
	s.r, s.size = f, n+m
	return s, nil
}
