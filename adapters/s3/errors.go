package s3

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/storage/redact"
)

// failure is what an SDK error says, read from its types: the service's
// error code and the HTTP status. Either may be empty or zero.
type failure struct {
	code   string
	status int
}

func failureOf(err error) failure {
	var f failure
	var ae smithy.APIError
	if errors.As(err, &ae) {
		f.code = ae.ErrorCode()
	}
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		f.status = re.HTTPStatusCode()
	} else {
		var sre *smithyhttp.ResponseError
		if errors.As(err, &sre) {
			f.status = sre.HTTPStatusCode()
		}
	}
	return f
}

// S3 error codes the adapter tells apart.
const (
	codeNoSuchKey          = "NoSuchKey"
	codeNotFound           = "NotFound" // HEAD answers carry no body, hence no code but this
	codeNoSuchBucket       = "NoSuchBucket"
	codePreconditionFailed = "PreconditionFailed"
	codeCondConflict       = "ConditionalRequestConflict"
)

func (f failure) notFound() bool {
	return f.code == codeNoSuchKey || f.code == codeNotFound || (f.code == "" && f.status == http.StatusNotFound)
}

func (f failure) preconditionFailed() bool {
	return f.code == codePreconditionFailed || f.status == http.StatusPreconditionFailed
}

// conflict is AWS's 409 ConditionalRequestConflict: a concurrent
// conditional request on the key won; this one did not happen.
func (f failure) conflict() bool { return f.code == codeCondConflict }

// refused says the endpoint rejected a request it does not implement (a
// conditional header it does not support), as opposed to evaluating it.
func (f failure) refused() bool {
	switch f.code {
	case "NotImplemented", "InvalidArgument", "InvalidRequest":
		return true
	}
	return f.code == "" && (f.status == http.StatusNotImplemented || f.status == http.StatusBadRequest)
}

// kind classifies an S3 failure.
func (f failure) kind() (storage.Kind, string) {
	switch f.code {
	case codeNoSuchKey, codeNotFound:
		return storage.ErrNotFound, ""
	case codeNoSuchBucket:
		return storage.ErrNotFound, ""
	case codePreconditionFailed:
		return storage.ErrPreconditionFailed, ""
	case codeCondConflict:
		return storage.ErrTransient, "a concurrent conditional request on the key won (409 ConditionalRequestConflict); this one did not happen"
	case "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "AllAccessDisabled", "AccountProblem",
		"InvalidToken", "ExpiredToken", "TokenRefreshRequired", "InvalidSecurity", "InvalidObjectState", "Forbidden",
		"XAdminUserNotFound": // versitygw's answer (with 404) to an unknown access key id
		return storage.ErrPermissionDenied, ""
	case "EntityTooLarge", "MaxMessageLengthExceeded", "MetadataTooLarge":
		return storage.ErrLimitExceeded, ""
	case "SlowDown", "Throttling", "ThrottlingException", "RequestLimitExceeded", "TooManyRequestsException",
		"RequestTimeout", "RequestTimeoutException", "InternalError", "ServiceUnavailable", "OperationAborted",
		"RequestTimeTooSkewed", "BadDigest", "IncompleteBody", "PriorRequestNotComplete":
		return storage.ErrTransient, ""
	case "PermanentRedirect", "AuthorizationHeaderMalformed", "IllegalLocationConstraintException":
		return storage.ErrInvalidArgument, "the bucket lives in another region or behind another endpoint: set AWS_REGION or ?region= (and ?endpoint=) to match it"
	case "InvalidBucketName", "KeyTooLongError":
		return storage.ErrInvalidArgument, ""
	case "NotImplemented":
		return storage.ErrUnsupported, "the endpoint does not implement this request"
	}
	switch s := f.status; {
	case s == http.StatusNotFound:
		return storage.ErrNotFound, ""
	case s == http.StatusPreconditionFailed:
		return storage.ErrPreconditionFailed, ""
	case s == http.StatusUnauthorized || s == http.StatusForbidden:
		return storage.ErrPermissionDenied, ""
	case s == http.StatusRequestEntityTooLarge:
		return storage.ErrLimitExceeded, ""
	case s == http.StatusNotImplemented:
		return storage.ErrUnsupported, "the endpoint does not implement this request"
	case s == http.StatusTooManyRequests || s == http.StatusRequestTimeout || s >= 500:
		return storage.ErrTransient, ""
	}
	return storage.ErrUnknown, ""
}

// mapErr makes an SDK error an *storage.Error of the right kind. It reads only
// typed errors (API error codes, HTTP statuses, transport error types).
func (d *Driver) mapErr(op, key string, err error) *storage.Error {
	if err == nil {
		return nil
	}
	var ce *storage.Error
	if errors.As(err, &ce) {
		return ce
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return ctxError(op, key, err)
	}
	f := failureOf(err)
	if f.code != "" || f.status != 0 {
		kind, msg := f.kind()
		if f.code == codeNoSuchBucket {
			msg = fmt.Sprintf("bucket %q does not exist at this endpoint", d.bucket)
		} else if kind == storage.ErrTransient && msg == "" && refusal(err) {
			msg = d.throttleMsg(err)
		} else if kind == storage.ErrPermissionDenied && msg == "" {
			msg = fmt.Sprintf("the endpoint refused access to bucket %q (%s): check the credentials the AWS default chain found and their permissions", d.bucket, f.describe())
		}
		return &storage.Error{Op: op, Key: key, Kind: kind, Msg: msg, Err: causeOf(err)}
	}
	var se *v4.SigningError
	var cre *credentialsError
	if errors.As(err, &se) || errors.As(err, &cre) {
		return &storage.Error{Op: op, Key: key, Kind: storage.ErrPermissionDenied,
			Msg: "cannot sign the request: the AWS default chain found no usable credentials (environment, shared config, SSO, web identity, container or instance role)", Err: causeOf(err)}
	}
	var sendErr *smithyhttp.RequestSendError
	var netErr net.Error
	switch {
	case errors.As(err, &sendErr):
		return &storage.Error{Op: op, Key: key, Kind: storage.ErrTransient, Msg: "could not reach the endpoint", Err: causeOf(err)}
	case errors.As(err, &netErr), errors.Is(err, io.ErrUnexpectedEOF):
		return &storage.Error{Op: op, Key: key, Kind: storage.ErrTransient, Msg: "the connection to the endpoint broke", Err: causeOf(err)}
	}
	return storage.Wrap(op, key, storage.ErrUnknown, causeOf(err))
}

func (f failure) describe() string {
	// The code is the endpoint's text: masked and capped like its message.
	code := redact.Excerpt(f.code, 64)
	switch {
	case code != "" && f.status != 0:
		return fmt.Sprintf("%d %s", f.status, code)
	case code != "":
		return code
	}
	return fmt.Sprintf("HTTP %d", f.status)
}

// responseError is what an error records of an endpoint's error answer:
// the operation, status, code, request ids and the first line of the
// message, masked and capped. Never the rest of what the endpoint sent:
// a misconfigured or hostile endpoint may echo the signed request (its
// Authorization header and security token) into its body or headers. It
// unwraps to the SDK's error, so errors.As still finds the SDK's types.
type responseError struct {
	op                string // "S3 GetObject"
	f                 failure
	msg               string
	requestID, hostID string
	err               error
}

// maxExcerpt bounds what of an endpoint's message an error quotes.
const maxExcerpt = 200

func (e *responseError) Error() string {
	s := e.op
	if s != "" {
		s += ": "
	}
	s += e.f.describe()
	if e.msg != "" {
		s += ": " + e.msg
	}
	switch {
	case e.requestID != "" && e.hostID != "":
		s += " (request id " + e.requestID + ", host id " + e.hostID + ")"
	case e.requestID != "":
		s += " (request id " + e.requestID + ")"
	}
	return s
}

func (e *responseError) Unwrap() error { return e.err }

// causeOf is what a *storage.Error records of an SDK error: a responseError
// for an endpoint's answer, any other error with its text masked.
func causeOf(err error) error {
	f := failureOf(err)
	if f.code == "" && f.status == 0 {
		return redact.Error(err)
	}
	re := &responseError{f: f, err: err}
	var oe *smithy.OperationError
	if errors.As(err, &oe) {
		re.op = oe.Service() + " " + oe.Operation()
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		re.msg = redact.Excerpt(ae.ErrorMessage(), maxExcerpt)
	}
	var rid interface{ ServiceRequestID() string }
	if errors.As(err, &rid) {
		re.requestID = redact.Excerpt(rid.ServiceRequestID(), 64)
	}
	var hid interface{ ServiceHostID() string }
	if errors.As(err, &hid) {
		re.hostID = redact.Excerpt(hid.ServiceHostID(), 96)
	}
	return re
}

// credentialsError marks a failure of the AWS credential chain, which the
// SDK reports as untyped text ("get identity: ...").
type credentialsError struct{ err error }

func (e *credentialsError) Error() string { return "no usable credentials: " + e.err.Error() }
func (e *credentialsError) Unwrap() error { return e.err }

// markedCredentials types the errors of the credential chain it wraps.
type markedCredentials struct{ p aws.CredentialsProvider }

func (m markedCredentials) Retrieve(ctx context.Context) (aws.Credentials, error) {
	c, err := m.p.Retrieve(ctx)
	if err != nil && ctx.Err() == nil {
		return c, &credentialsError{err}
	}
	// Whatever the chain resolved (shared files, SSO, a
	// credential_process, a role) is masked from every message and log
	// line of this process, as the environment's credentials are.
	redact.Register(c.AccessKeyID, c.SecretAccessKey, c.SessionToken)
	return c, err
}
