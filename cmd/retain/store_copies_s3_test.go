package main

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/retain-dev/retain/internal/emulator"
)

// s3Sync copies every object of bucket src to bucket dst server-side, as
// `aws s3 sync s3://src s3://dst` does (CopyObject per key).
func s3Sync(t *testing.T, c *awss3.Client, src, dst string) int {
	t.Helper()
	ctx := context.Background()
	if _, err := c.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: aws.String(dst)}); err != nil {
		t.Fatal(err)
	}
	n := 0
	p := awss3.NewListObjectsV2Paginator(c, &awss3.ListObjectsV2Input{Bucket: aws.String(src)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range page.Contents {
			if _, err := c.CopyObject(ctx, &awss3.CopyObjectInput{Bucket: aws.String(dst), Key: o.Key,
				CopySource: aws.String(src + "/" + *o.Key)}); err != nil {
				t.Fatalf("copy %s: %v", *o.Key, err)
			}
			n++
		}
	}
	return n
}

// Items 1 and 2 on an object store: a store checkpointed on bucket src,
// synced to bucket dst, and table b's manifests then renamed by LanceDB's
// migrateManifestPathsV2 on dst. Every command agrees dst is healthy,
// cleanup runs, and real Lance on the emulator reads the pinned version
// whole. (Before pins named the commit's content, show --deep called b's
// pinned manifest missing after the migration and cleanup refused dst.)
func TestSyncedBucketStaysCleanable(t *testing.T) {
	e := emulator.GoFakeS3(t)
	emulator.IsolateAWS(t, e.Env())
	c := awss3.New(awss3.Options{Region: e.Region, BaseEndpoint: aws.String(e.Endpoint), UsePathStyle: true,
		Credentials: aws.NewCredentialsCache(aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: e.AccessKey, SecretAccessKey: e.SecretKey}, nil
		}))})
	if _, err := c.CreateBucket(context.Background(), &awss3.CreateBucketInput{Bucket: aws.String("src")}); err != nil {
		t.Fatal(err)
	}
	lance := map[string]string{"aws_endpoint": e.Endpoint, "aws_access_key_id": e.AccessKey,
		"aws_secret_access_key": e.SecretKey, "aws_region": e.Region, "allow_http": "true"}

	for _, tb := range []struct{ name, naming string }{{"a", "v2"}, {"b", "v1"}} {
		lanceRun(t, "s3://src/db", tb.name, tb.naming, lance, map[string]any{"op": "create", "rows": 3},
			map[string]any{"op": "add", "rows": 1}, map[string]any{"op": "add", "rows": 1})
	}
	if _, errs, code := retain(t, "checkpoint", "create", "nightly", "s3://src/db"); code != 0 {
		t.Fatalf("create: %d %s", code, errs)
	}
	for _, tb := range []string{"a", "b"} {
		lanceRun(t, "s3://src/db", tb, "", lance, map[string]any{"op": "open", "nextId": 5},
			map[string]any{"op": "add", "rows": 1}, map[string]any{"op": "add", "rows": 1})
	}
	if n := s3Sync(t, c, "src", "dst"); n < 20 {
		t.Fatalf("synced only %d objects", n)
	}
	lanceRun(t, "s3://dst/db", "b", "", lance, map[string]any{"op": "open"}, map[string]any{"op": "migrateManifestPathsV2"})
	wantHealthyAndCleanable(t, "s3 sync to another bucket, then Lance's manifest migration", "s3://dst/db", lance)
}
