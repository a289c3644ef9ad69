package enroll

import (
	"errors"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Revocation refusals carry an ErrorInfo detail with this reason and
// domain, so that an agent tells "revoked: enroll again" from every other
// refusal without reading the message.
const (
	RevokedReason = "AGENT_REVOKED"
	ErrorDomain   = "plumbline"
)

// RevokedError is the status of a call refused because the calling
// agent's enrollment was revoked: PermissionDenied with the ErrorInfo
// reason RevokedReason.
func RevokedError(msg string) error {
	st := status.New(codes.PermissionDenied, msg)
	withInfo, err := st.WithDetails(&errdetails.ErrorInfo{Reason: RevokedReason, Domain: ErrorDomain})
	if err != nil {
		return st.Err()
	}
	return withInfo.Err()
}

// IsRevoked says whether err (or an error it wraps) is a RevokedError.
func IsRevoked(err error) bool {
	var se interface{ GRPCStatus() *status.Status }
	if !errors.As(err, &se) {
		return false
	}
	for _, d := range se.GRPCStatus().Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetReason() == RevokedReason && info.GetDomain() == ErrorDomain {
			return true
		}
	}
	return false
}
