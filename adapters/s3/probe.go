package s3

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/retain-dev/retain/core/storage"
)

// probeResult says which conditional requests the endpoint failed to
// honour ("" = honoured or not probed) and what the probe saw.
type probeResult struct {
	createWhy, replaceWhy, deleteWhy string
	// missingAnswered: a conditional delete of a missing key is answered
	// 404 or 412 (as on AWS), not success (as on versitygw 1.8.0).
	missingAnswered bool
	// etagIsMD5: every probe write came back with the MD5 of its body as
	// ETag, so reads can check the body they get against the ETag.
	etagIsMD5 bool
	notes     []string
}

// wrongETag is an If-Match value no object has (the MD5 of nothing is
// d41d8cd9..., so all zeros is not even the empty object's).
const wrongETag = `"00000000000000000000000000000000"`

// probe tries, on a scratch key under the store's prefix, the conditional
// requests whose mode is auto, and removes the key afterwards. An error is
// returned only for a store that cannot be used at all (missing bucket,
// unreachable endpoint); a probe refused for lack of permission leaves the
// probed capabilities none, with the reason.
func (d *Driver) probe(ctx context.Context, o Options) (probeResult, error) {
	var pr probeResult
	probeWrite, probeDelete := o.ConditionalWrite == ModeAuto, o.ConditionalDelete == ModeAuto
	if !probeWrite && !probeDelete {
		return pr, nil
	}
	key := probeDir + "/" + randHex(8)
	full := d.full(key)
	where := fmt.Sprintf("s3://%s/%s", d.bucket, full)
	var seen []string
	defer func() {
		// Clean up even if ctx is done: the scratch key must not stay.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		d.client.DeleteObject(cctx, &awss3.DeleteObjectInput{Bucket: &d.bucket, Key: aws.String(full)})
	}()

	md5Writes, otherWrites := 0, 0
	put := func(body string, ifNoneMatch, ifMatch *string) (string, error) {
		out, err := d.client.PutObject(ctx, &awss3.PutObjectInput{Bucket: &d.bucket, Key: aws.String(full),
			Body: bytes.NewReader([]byte(body)), ContentLength: aws.Int64(int64(len(body))),
			IfNoneMatch: ifNoneMatch, IfMatch: ifMatch})
		if err != nil {
			return "", err
		}
		sum := md5.Sum([]byte(body))
		if token(out.ETag) == hex.EncodeToString(sum[:]) {
			md5Writes++
		} else {
			otherWrites++
		}
		pr.etagIsMD5 = md5Writes > 0 && otherWrites == 0
		return aws.ToString(out.ETag), nil
	}
	writesProbed := false // the conditional-write steps are all done
	// fatal ends the probe: a permission refusal leaves what is left
	// unprobed none; anything else fails Open.
	fatal := func(step string, err error) (probeResult, error) {
		ce := d.mapErr("open", where, err)
		if ce.Kind != storage.ErrPermissionDenied {
			msg := "probing conditional requests: " + step
			if ce.Msg != "" {
				msg += ": " + ce.Msg
			}
			return pr, &storage.Error{Op: "open", Key: where, Kind: ce.Kind, Msg: msg, Err: ce.Err}
		}
		why := fmt.Sprintf("the probe at open could not %s at %s (permission denied); set %%s=on in the store URI to declare it without probing", step, where)
		if probeWrite && !writesProbed {
			if pr.createWhy == "" {
				pr.createWhy = fmt.Sprintf(why, "conditional-write")
			}
			if pr.replaceWhy == "" {
				pr.replaceWhy = fmt.Sprintf(why, "conditional-write")
			}
		}
		if probeDelete && pr.deleteWhy == "" {
			pr.deleteWhy = fmt.Sprintf(why, "conditional-delete")
		}
		pr.notes = append(pr.notes, fmt.Sprintf("probe at open on %s stopped: could not %s (permission denied); seen before: %s", where, step, strings.Join(seen, "; ")))
		return pr, nil
	}

	var etag string
	var err error
	if probeWrite {
		etag, err = put("probe 1", aws.String("*"), nil)
		switch f := failureOf(err); {
		case err == nil:
			seen = append(seen, "If-None-Match: * on an absent key: written")
		case f.refused():
			pr.createWhy = fmt.Sprintf("the endpoint refused PutObject with If-None-Match: * on an absent key (%s) in the probe at open", f.describe())
			seen = append(seen, "If-None-Match: * on an absent key: refused ("+f.describe()+")")
		default:
			return fatal("write a scratch object with If-None-Match: *", err)
		}
	}
	if etag == "" {
		if etag, err = put("probe 1", nil, nil); err != nil {
			return fatal("write a scratch object", err)
		}
	}
	if probeWrite && pr.createWhy == "" {
		tag, err := put("probe 2", aws.String("*"), nil)
		switch f := failureOf(err); {
		case err == nil:
			etag = tag
			pr.createWhy = "the endpoint ignores If-None-Match: * on PutObject: in the probe at open, a create-if-absent over an existing object overwrote it"
			seen = append(seen, "If-None-Match: * on an existing key: IGNORED (overwritten)")
		case f.preconditionFailed() || f.conflict():
			seen = append(seen, "If-None-Match: * on an existing key: refused ("+f.describe()+")")
		case f.refused():
			pr.createWhy = fmt.Sprintf("the endpoint refused PutObject with If-None-Match: * on an existing key with %s instead of 412 in the probe at open", f.describe())
			seen = append(seen, "If-None-Match: * on an existing key: "+f.describe())
		default:
			return fatal("write with If-None-Match: *", err)
		}
	}
	if probeWrite {
		tag, err := put("probe 3", nil, aws.String(wrongETag))
		switch f := failureOf(err); {
		case err == nil:
			etag = tag
			pr.replaceWhy = "the endpoint ignores If-Match on PutObject: in the probe at open, a write with a wrong If-Match overwrote the object"
			seen = append(seen, "If-Match (wrong) on PutObject: IGNORED (overwritten)")
		case f.preconditionFailed():
			seen = append(seen, "If-Match (wrong) on PutObject: refused ("+f.describe()+")")
		case f.refused():
			pr.replaceWhy = fmt.Sprintf("the endpoint refused PutObject with If-Match (%s) in the probe at open", f.describe())
			seen = append(seen, "If-Match (wrong) on PutObject: "+f.describe())
		default:
			return fatal("write with a wrong If-Match", err)
		}
	}
	if probeWrite && pr.replaceWhy == "" {
		tag, err := put("probe 4", nil, aws.String(`"`+strings.Trim(etag, `"`)+`"`))
		switch f := failureOf(err); {
		case err == nil:
			etag = tag
			seen = append(seen, "If-Match (current) on PutObject: written")
		case f.preconditionFailed() || f.refused():
			pr.replaceWhy = fmt.Sprintf("the endpoint refused PutObject with If-Match of the object's own ETag (%s) in the probe at open", f.describe())
			seen = append(seen, "If-Match (current) on PutObject: "+f.describe())
		default:
			return fatal("write with the current If-Match", err)
		}
	}
	writesProbed = true
	if probeDelete {
		if err := d.probeDelete(ctx, key, etag, &pr, &seen); err != nil {
			return fatal("delete with If-Match", err)
		}
	}
	pr.notes = append(pr.notes, fmt.Sprintf("probe at open on %s (removed afterwards): %s", where, strings.Join(seen, "; ")))
	return pr, nil
}

// probeDelete deletes the scratch object with a wrong If-Match, then (if
// that was refused and the object kept) with its current ETag.
func (d *Driver) probeDelete(ctx context.Context, key, etag string, pr *probeResult, seen *[]string) error {
	full := aws.String(d.full(key))
	exists := func() (bool, error) {
		_, err := d.head(ctx, key)
		if err == nil {
			return true, nil
		}
		if failureOf(err).notFound() {
			return false, nil
		}
		return false, err
	}
	_, err := d.client.DeleteObject(ctx, &awss3.DeleteObjectInput{Bucket: &d.bucket, Key: full, IfMatch: aws.String(wrongETag)})
	f := failureOf(err)
	switch {
	case err == nil:
		there, err := exists()
		if err != nil {
			return err
		}
		if there {
			pr.deleteWhy = "the endpoint answered success to a DeleteObject with a wrong If-Match but kept the object in the probe at open: its answers to conditional deletes cannot be trusted"
			*seen = append(*seen, "If-Match (wrong) on DeleteObject: success answered, object kept")
		} else {
			pr.deleteWhy = "the endpoint ignores If-Match on DeleteObject: in the probe at open, a delete with a wrong If-Match removed the object"
			*seen = append(*seen, "If-Match (wrong) on DeleteObject: IGNORED (deleted)")
		}
		return nil
	case f.refused():
		pr.deleteWhy = fmt.Sprintf("the endpoint refused DeleteObject with If-Match (%s) in the probe at open", f.describe())
		*seen = append(*seen, "If-Match (wrong) on DeleteObject: "+f.describe())
		return nil
	case !f.preconditionFailed():
		return err
	}
	there, err := exists()
	if err != nil {
		return err
	}
	if !there {
		pr.deleteWhy = "the endpoint answered 412 to a DeleteObject with a wrong If-Match but removed the object in the probe at open"
		*seen = append(*seen, "If-Match (wrong) on DeleteObject: 412, object gone")
		return nil
	}
	*seen = append(*seen, "If-Match (wrong) on DeleteObject: refused ("+f.describe()+"), object kept")
	_, err = d.client.DeleteObject(ctx, &awss3.DeleteObjectInput{Bucket: &d.bucket, Key: full, IfMatch: aws.String(`"` + strings.Trim(etag, `"`) + `"`)})
	g := failureOf(err)
	switch {
	case err == nil:
		there, err := exists()
		if err != nil {
			return err
		}
		if there {
			pr.deleteWhy = "the endpoint answered success to a DeleteObject with the current If-Match but kept the object in the probe at open"
			*seen = append(*seen, "If-Match (current) on DeleteObject: success answered, object kept")
			return nil
		}
		*seen = append(*seen, "If-Match (current) on DeleteObject: deleted")
		_, err = d.client.DeleteObject(ctx, &awss3.DeleteObjectInput{Bucket: &d.bucket, Key: full, IfMatch: aws.String(`"` + strings.Trim(etag, `"`) + `"`)})
		switch m := failureOf(err); {
		case m.notFound() || m.preconditionFailed():
			pr.missingAnswered = true
			*seen = append(*seen, "If-Match on DeleteObject of a missing key: "+m.describe())
		case err == nil:
			*seen = append(*seen, "If-Match on DeleteObject of a missing key: success answered, so each delete-if-version reads the key first to report not found")
		case m.refused():
			*seen = append(*seen, "If-Match on DeleteObject of a missing key: "+m.describe()+", so each delete-if-version reads the key first to report not found")
		default:
			return err
		}
		return nil
	case g.preconditionFailed() || g.refused():
		pr.deleteWhy = fmt.Sprintf("the endpoint refused a DeleteObject with the object's own ETag as If-Match (%s) in the probe at open", g.describe())
		*seen = append(*seen, "If-Match (current) on DeleteObject: "+g.describe())
		return nil
	}
	return err
}
