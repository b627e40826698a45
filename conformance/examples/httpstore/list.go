package httpstore

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/retain-dev/retain/conformance/examples/httpstore/server"
	"github.com/retain-dev/retain/core/storage"
)

// List returns one page: keys under Prefix, strictly after StartAfter, in
// byte order, at most PageSize (0: the server's page limit), with More when
// the server has more. The driver's own key prefix is added on the way out
// and removed on the way back.
func (d *Driver) List(ctx context.Context, opts storage.ListOptions) (storage.ListPage, error) {
	if err := storage.ValidatePrefix("list", opts.Prefix); err != nil {
		return storage.ListPage{}, err
	}
	if opts.PageSize < 0 {
		return storage.ListPage{}, storage.Errorf("list", opts.Prefix, storage.ErrInvalidArgument, "negative page size %d", opts.PageSize)
	}
	size := opts.PageSize
	if max := d.limits.MaxListPage; max > 0 && (size == 0 || size > max) {
		size = max
	}
	q := url.Values{}
	q.Set("list", "")
	q.Set("prefix", d.prefix+opts.Prefix)
	if opts.StartAfter != "" {
		q.Set("start-after", d.prefix+opts.StartAfter)
	}
	if size > 0 {
		q.Set("max-keys", strconv.Itoa(size))
	}
	req, err := d.newRequest(ctx, http.MethodGet, d.bucketURL()+"?"+q.Encode(), nil)
	if err != nil {
		return storage.ListPage{}, d.mapErr("list", opts.Prefix, err)
	}
	resp, err := d.client.Do(req)
	if err != nil {
		return storage.ListPage{}, d.mapErr("list", opts.Prefix, err)
	}
	defer resp.Body.Close()
	if err := d.statusErr("list", opts.Prefix, resp, storage.PutOverwrite); err != nil {
		return storage.ListPage{}, err
	}
	var res server.ListResult
	if err := json.NewDecoder(resp.Body).Decode(&res); err != nil {
		return storage.ListPage{}, d.mapErr("list", opts.Prefix, err)
	}
	page := storage.ListPage{More: res.More}
	for _, o := range res.Objects {
		// The portable Store checks order and range too; this check is
		// about the key prefix only the driver knows.
		key, ok := strings.CutPrefix(o.Key, d.prefix)
		if !ok {
			return storage.ListPage{}, storage.Errorf("list", opts.Prefix, storage.ErrUnknown, "the server listed %q outside the store's prefix %q", o.Key, d.prefix)
		}
		page.Objects = append(page.Objects, storage.Info{Key: key, Size: o.Size, Version: o.ETag, ModTime: o.Modified})
	}
	return page, nil
}
