package emulator

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
)

// CreateBucket creates bucket on the endpoint, with its own client (not
// the environment's), so a test can make buckets before it points the
// AWS variables anywhere.
func (s *S3) CreateBucket(tb testing.TB, bucket string) {
	tb.Helper()
	c := awss3.New(awss3.Options{Region: s.Region, BaseEndpoint: aws.String(s.Endpoint), UsePathStyle: true,
		Credentials: aws.NewCredentialsCache(aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: s.AccessKey, SecretAccessKey: s.SecretKey}, nil
		}))})
	if _, err := c.CreateBucket(context.Background(), &awss3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		tb.Fatalf("create bucket %s on %s: %v", bucket, s.Name, err)
	}
}
