package api

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/cohort-dev/cohort/internal/blob"
	"github.com/cohort-dev/cohort/internal/errs"
)

// statusClientClosedRequest is nginx's status for a request whose client went away before the
// answer: not a server error.
const statusClientClosedRequest = 499

// ErrorBody is the one error shape of every endpoint.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

type ErrorDetail struct {
	Code      string            `json:"code"`
	Message   string            `json:"message"`
	Fields    map[string]string `json:"fields,omitempty"`
	RequestID string            `json:"request_id,omitempty"`
}

// reply answers a handler's result: out as JSON with status, or err in the one error shape.
func reply(c *gin.Context, status int, out any, err error) {
	if err != nil {
		abort(c, err)
		return
	}
	c.JSON(status, out)
}

// abort renders err in the error shape and stops the handler chain. It is the only place that
// turns domain errors into HTTP statuses.
func abort(c *gin.Context, err error) {
	status, body := mapError(err)
	body.RequestID = c.GetString(ctxRequestID)
	if status >= 500 {
		// Dependencies' messages can carry internals; log them, answer generically.
		c.Set(ctxErr, err)
	}
	if status == http.StatusUnauthorized {
		c.Header("WWW-Authenticate", `Bearer realm="cohort", ApiKey realm="cohort"`)
	}
	var rl *errs.RateLimitedError
	var coded *errs.CodedError
	if errors.As(err, &rl) && rl.RetryAfter > 0 {
		secs := int(rl.RetryAfter.Seconds() + 0.999)
		c.Header("Retry-After", strconv.Itoa(max(secs, 1)))
	} else if errors.As(err, &coded) && coded.RetryAfter > 0 {
		secs := int(coded.RetryAfter.Seconds() + 0.999)
		c.Header("Retry-After", strconv.Itoa(max(secs, 1)))
	}
	c.AbortWithStatusJSON(status, ErrorBody{Error: body})
}

func mapError(err error) (int, ErrorDetail) {
	var (
		ve     *errs.ValidationError
		coded  *errs.CodedError
		rl     *errs.RateLimitedError
		tooBig *http.MaxBytesError
	)
	switch {
	case errors.As(err, &ve):
		code := ve.Code
		if code == "" {
			code = "validation_failed"
		}
		msg := ve.Msg
		if msg == "" {
			msg = "request failed validation"
		}
		return http.StatusBadRequest, ErrorDetail{Code: code, Message: msg, Fields: ve.Fields}
	case errors.As(err, &tooBig):
		return http.StatusRequestEntityTooLarge, ErrorDetail{Code: "too_large", Message: "request body exceeds " + strconv.FormatInt(tooBig.Limit, 10) + " bytes"}
	case errors.As(err, &rl):
		return http.StatusTooManyRequests, ErrorDetail{Code: "rate_limited", Message: rl.Error()}
	case errors.As(err, &coded):
		return statusOf(coded.Kind), ErrorDetail{Code: coded.Code, Message: coded.Msg}
	case errors.Is(err, blob.ErrBadSignature), errors.Is(err, blob.ErrExpired):
		return http.StatusForbidden, ErrorDetail{Code: "forbidden", Message: "download link is invalid or has expired"}
	case errors.Is(err, blob.ErrNotFound):
		return http.StatusNotFound, ErrorDetail{Code: "not_found", Message: "not found"}
	case errors.Is(err, blob.ErrInvalidKey):
		return http.StatusNotFound, ErrorDetail{Code: "not_found", Message: "not found"}
	case errors.Is(err, context.Canceled):
		// The client went away (or the server is stopping): nobody reads this answer, but the
		// access log and the metrics must not count it as a server error.
		return statusClientClosedRequest, ErrorDetail{Code: "client_closed_request", Message: "the client closed the request"}
	case errors.Is(err, context.DeadlineExceeded):
		return http.StatusServiceUnavailable, ErrorDetail{Code: "unavailable", Message: "a dependency did not answer in time"}
	}
	for _, kind := range []error{errs.ErrNotFound, errs.ErrConflict, errs.ErrUnauthenticated, errs.ErrForbidden, errs.ErrTooLarge, errs.ErrUnavailable, errs.ErrInvalid} {
		if errors.Is(err, kind) {
			status := statusOf(kind)
			msg := err.Error()
			if status >= 500 {
				msg = "a dependency is unavailable; try again shortly"
			}
			return status, ErrorDetail{Code: codeOf(kind), Message: msg}
		}
	}
	return http.StatusInternalServerError, ErrorDetail{Code: "internal", Message: "internal error"}
}

func statusOf(kind error) int {
	switch kind {
	case errs.ErrNotFound:
		return http.StatusNotFound
	case errs.ErrConflict:
		return http.StatusConflict
	case errs.ErrUnauthenticated:
		return http.StatusUnauthorized
	case errs.ErrForbidden:
		return http.StatusForbidden
	case errs.ErrTooLarge:
		return http.StatusRequestEntityTooLarge
	case errs.ErrUnavailable:
		return http.StatusServiceUnavailable
	case errs.ErrInvalid:
		return http.StatusBadRequest
	}
	return http.StatusInternalServerError
}

func codeOf(kind error) string {
	switch kind {
	case errs.ErrNotFound:
		return "not_found"
	case errs.ErrConflict:
		return "conflict"
	case errs.ErrUnauthenticated:
		return "unauthenticated"
	case errs.ErrForbidden:
		return "forbidden"
	case errs.ErrTooLarge:
		return "too_large"
	case errs.ErrUnavailable:
		return "unavailable"
	case errs.ErrInvalid:
		return "validation_failed"
	}
	return "internal"
}
