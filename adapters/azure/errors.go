package azure

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"

	"github.com/retain-dev/retain/core/storage"
	"github.com/retain-dev/retain/core/storage/redact"
)

// ServiceError is the cause recorded for an error response of the service:
// status, error code and request id, without the request URL or the raw
// body the SDK's own error prints.
type ServiceError struct {
	Status    int
	Code      string // x-ms-error-code, e.g. "BlobAlreadyExists"
	RequestID string
	Message   string // first line of the service's message, may be empty
}

func (e *ServiceError) Error() string {
	s := fmt.Sprintf("azure: HTTP %d", e.Status)
	if e.Code != "" {
		s += " " + e.Code
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	if e.RequestID != "" {
		s += " (request id " + e.RequestID + ")"
	}
	return s
}

// serviceError extracts the response error from err, if there is one.
func serviceError(err error) (*ServiceError, bool) {
	var re *azcore.ResponseError
	if !errors.As(err, &re) {
		return nil, false
	}
	// Code, request id and message are the endpoint's text, which a
	// misconfigured or hostile endpoint may fill with the request it got
	// (its Authorization header, a SAS query): masked, then capped.
	se := &ServiceError{Status: re.StatusCode, Code: redact.Excerpt(re.ErrorCode, 64)}
	if re.RawResponse != nil {
		se.RequestID = redact.Excerpt(re.RawResponse.Header.Get("x-ms-request-id"), 64)
		// The signature mismatch message quotes the string to sign: keep
		// authentication messages to their code.
		if re.StatusCode != http.StatusForbidden {
			se.Message = responseMessage(re.RawResponse)
		}
	}
	return se, true
}

// responseMessage is the first line of the <Message> of an error body.
func responseMessage(resp *http.Response) string {
	body, err := runtime.Payload(resp)
	if err != nil || len(body) == 0 {
		return ""
	}
	var doc struct {
		Message string `xml:"Message"`
	}
	if xml.Unmarshal(bytes.TrimPrefix(body, []byte("\xef\xbb\xbf")), &doc) != nil {
		return ""
	}
	return redact.Excerpt(doc.Message, 200)
}

// cause is what to record as the cause of err: the compact service error
// when it is a response, else err with its text masked.
func cause(err error) error {
	if se, ok := serviceError(err); ok {
		return se
	}
	return redact.Error(err)
}

// hasCode reports whether err is a service response with one of codes.
func hasCode(err error, codes ...bloberror.Code) bool {
	return bloberror.HasCode(err, codes...)
}

// isLeaseErr: the blob is leased by another client (a 412 that is not
// about the version).
func isLeaseErr(err error) bool {
	return hasCode(err, bloberror.LeaseIDMissing, bloberror.LeaseIDMismatchWithBlobOperation, bloberror.LeaseLost)
}

func statusOf(err error) int {
	var re *azcore.ResponseError
	if errors.As(err, &re) {
		return re.StatusCode
	}
	return 0
}

// mapErr turns an SDK or transport error into an *storage.Error for op on key
// (the caller's key, not the blob name), classified from typed errors:
// service error codes and HTTP status, identity errors, net errors.
func (d *Driver) mapErr(op, key string, err error) error {
	if err == nil {
		return nil
	}
	var ce *storage.Error
	if errors.As(err, &ce) {
		return err
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return ctxError(op, key, err)
	}
	if se, ok := serviceError(err); ok {
		kind, msg := d.classify(err, se)
		return &storage.Error{Op: op, Key: key, Kind: kind, Msg: msg, Err: se}
	}
	var cred *credError
	var authFailed *azidentity.AuthenticationFailedError
	var authRequired *azidentity.AuthenticationRequiredError
	if errors.As(err, &cred) || errors.As(err, &authFailed) || errors.As(err, &authRequired) {
		return &storage.Error{Op: op, Key: key, Kind: storage.ErrPermissionDenied,
			Msg: "no usable Azure credentials (DefaultAzureCredential)", Err: redact.Error(err)}
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		// Its text would quote the request URL, SAS query included.
		err = fmt.Errorf("%s %s: %w", ue.Op, redactURL(ue.URL), ue.Err)
	}
	var ne net.Error
	if ue != nil || errors.As(err, &ne) || errors.Is(err, io.ErrUnexpectedEOF) {
		return &storage.Error{Op: op, Key: key, Kind: storage.ErrTransient, Msg: "connection to the endpoint failed", Err: redact.Error(err)}
	}
	return storage.Wrap(op, key, storage.ErrUnknown, redact.Error(err))
}

// classify maps a service error response to a kind and a message.
func (d *Driver) classify(err error, se *ServiceError) (storage.Kind, string) {
	switch {
	case hasCode(err, bloberror.ContainerNotFound):
		return storage.ErrNotFound, fmt.Sprintf("container %q does not exist: create it first", d.bucket)
	case hasCode(err, bloberror.BlobNotFound):
		return storage.ErrNotFound, ""
	case hasCode(err, bloberror.BlobAlreadyExists):
		return storage.ErrAlreadyExists, ""
	case hasCode(err, bloberror.ConditionNotMet):
		return storage.ErrPreconditionFailed, "the blob's ETag is not the expected version"
	case isLeaseErr(err):
		return storage.ErrPermissionDenied, "the blob is leased by another client; retain does not take blob leases"
	case hasCode(err, bloberror.AuthenticationFailed):
		return storage.ErrPermissionDenied, "the service refused the credentials (wrong account key, expired SAS or token)"
	case hasCode(err, bloberror.AuthorizationFailure, bloberror.AuthorizationPermissionMismatch, bloberror.InsufficientAccountPermissions,
		bloberror.AuthorizationSourceIPMismatch, bloberror.AuthorizationProtocolMismatch, bloberror.AuthorizationResourceTypeMismatch,
		bloberror.AuthorizationServiceMismatch, bloberror.NoAuthenticationInformation):
		return storage.ErrPermissionDenied, "the credentials may not do this operation on the container"
	case hasCode(err, bloberror.RequestBodyTooLarge):
		return storage.ErrLimitExceeded, fmt.Sprintf("the endpoint refused the body as too large (this adapter allows %d bytes)", int64(MaxObjectSize))
	case throttled(err, se):
		return storage.ErrTransient, d.throttleMsg(se)
	case hasCode(err, bloberror.OperationTimedOut, bloberror.InternalError):
		return storage.ErrTransient, ""
	}
	switch s := se.Status; {
	case s == http.StatusUnauthorized || s == http.StatusForbidden:
		return storage.ErrPermissionDenied, ""
	case s == http.StatusNotFound:
		return storage.ErrNotFound, ""
	case s == http.StatusRequestEntityTooLarge:
		return storage.ErrLimitExceeded, ""
	case s == http.StatusRequestTimeout || s == http.StatusTooManyRequests || s >= 500:
		return storage.ErrTransient, ""
	case s == http.StatusBadRequest:
		return storage.ErrInvalidArgument, "the endpoint refused the request as malformed"
	}
	return storage.ErrUnknown, ""
}

// ctxError reports a done context: transient, wrapping ctx.Err() so that
// errors.Is(err, context.DeadlineExceeded) still holds.
func ctxError(op, key string, err error) *storage.Error {
	return &storage.Error{Op: op, Key: key, Kind: storage.ErrTransient, Msg: "context done", Err: err}
}
