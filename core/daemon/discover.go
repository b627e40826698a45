package daemon

import (
	"context"
	"strings"

	"github.com/retain-dev/retain/core/checkpoint"
	"github.com/retain-dev/retain/core/storage"
)

// DiscoverStores names the children of s that are stores: folders holding
// retain's own folder (_retain/) or a Lance table (*.lance/). It costs one
// listing of s's top level and one of each child's (a page of folders per
// request where the adapter lists with a delimiter).
func DiscoverStores(ctx context.Context, s *storage.Store) ([]string, error) {
	children, err := folders(ctx, s, "")
	if err != nil {
		return nil, err
	}
	var out []string
	for _, c := range children {
		inner, err := folders(ctx, s, c)
		if err != nil {
			return nil, err
		}
		for _, f := range inner {
			name := strings.TrimSuffix(strings.TrimPrefix(f, c), "/")
			if name == "_retain" || (strings.HasSuffix(name, checkpoint.TableSuffix) && name != checkpoint.TableSuffix) {
				out = append(out, strings.TrimSuffix(c, "/"))
				break
			}
		}
	}
	return out, nil
}

// folders lists the folders directly under prefix ("" or "name/").
func folders(ctx context.Context, s *storage.Store, prefix string) ([]string, error) {
	var out []string
	opts := storage.ListOptions{Prefix: prefix, Delimiter: storage.Delimiter}
	for {
		page, err := s.ListPage(ctx, opts)
		if err != nil {
			return nil, err
		}
		out = append(out, page.Folders...)
		if !page.More {
			return out, nil
		}
		opts.StartAfter = page.Last()
	}
}
