package azure

import (
	"bytes"
	"context"
	"fmt"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"

	"github.com/retain-dev/retain/core/storage"
)

// probeConditionalDelete finds out whether the endpoint honours If-Match on
// Delete Blob (conditional-delete=auto): it writes a scratch blob under
// <prefix>/.retain-probe/, rewrites it, deletes with the first (stale)
// ETag, which must be refused with the blob kept, then with the current
// one, which must delete. The scratch blob is removed whatever happens.
//
// A probe that cannot write for lack of permission declares none (a
// read-only store needs no conditional delete); a missing container or a
// transient failure fails Open instead, rather than declare a capability
// from a glitch.
func (d *Driver) probeConditionalDelete(ctx context.Context) (storage.Capability, string, error) {
	const op = "open"
	name := d.prefix + probeDir + "/" + randHex()
	where := Scheme + "://" + d.bucket + "/" + name
	bc := d.cc.NewBlockBlobClient(name)
	defer bc.Delete(context.WithoutCancel(ctx), nil)
	put := func() (*azcore.ETag, error) {
		r, err := bc.Upload(ctx, &spooled{ReadSeeker: bytes.NewReader([]byte("retain conditional-delete probe"))}, nil)
		return r.ETag, err
	}
	none := func(why string) (storage.Capability, string, error) {
		return storage.Capability{Level: storage.LevelNone, Reason: why}, "conditional-delete=auto: " + why, nil
	}
	stale, err := put()
	if err != nil {
		if storage.KindOf(d.mapErr(op, where, err)) == storage.ErrPermissionDenied {
			return none(fmt.Sprintf("the probe could not write %s (%v); give conditional-delete=on to trust the endpoint without probing", where, cause(err)))
		}
		return storage.Capability{}, "", d.mapErr(op, where, err)
	}
	cur, err := put()
	if err != nil {
		return storage.Capability{}, "", d.mapErr(op, where, err)
	}
	if version(stale) == version(cur) {
		return none(fmt.Sprintf("probe: two writes of %s returned the same ETag %s, so a version cannot tell writes apart", where, version(cur)))
	}
	ifMatch := func(e *azcore.ETag) error {
		_, err := bc.Delete(ctx, &blob.DeleteOptions{AccessConditions: &blob.AccessConditions{
			ModifiedAccessConditions: &blob.ModifiedAccessConditions{IfMatch: etag(version(e))}}})
		return err
	}
	switch err := ifMatch(stale); {
	case err == nil:
		return none(fmt.Sprintf("probe: a Delete Blob of %s with a stale If-Match deleted it: the endpoint ignores the condition", where))
	case bloberror.HasCode(err, bloberror.ConditionNotMet) || statusOf(err) == 412:
	default:
		return storage.Capability{}, "", d.mapErr(op, where, err)
	}
	if _, err := bc.GetProperties(ctx, nil); err != nil {
		if bloberror.HasCode(err, bloberror.BlobNotFound) {
			return none(fmt.Sprintf("probe: a Delete Blob of %s with a stale If-Match answered 412 but deleted the blob", where))
		}
		return storage.Capability{}, "", d.mapErr(op, where, err)
	}
	if err := ifMatch(cur); err != nil {
		if statusOf(err) == 412 {
			return none(fmt.Sprintf("probe: a Delete Blob of %s with its current ETag was refused (%v)", where, cause(err)))
		}
		return storage.Capability{}, "", d.mapErr(op, where, err)
	}
	c := storage.Capability{Level: storage.LevelNative, Scope: storage.ScopeGlobal,
		Reason: "Delete Blob with If-Match: <ETag>; the service refuses it with 412 ConditionNotMet when the ETag differs (probed at open)"}
	return c, "conditional-delete=auto: probed at open on " + d.prefix + probeDir + "/<random>: a Delete Blob with a stale If-Match was refused with 412 and the blob kept, one with the current ETag deleted it", nil
}
