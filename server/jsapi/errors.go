package jsapi

// JetStream's error table, the entries this package answers with (codes as
// nats-server's errors.json; clients switch on err_code).

import "fmt"

func apiErr(code int, errCode uint16, format string, args ...any) *APIError {
	return &APIError{Code: code, ErrCode: errCode, Description: fmt.Sprintf(format, args...)}
}

func errBadRequest(format string, args ...any) *APIError {
	return apiErr(400, 10003, "bad request: "+format, args...)
}
func errInvalidJSON(err error) *APIError { return apiErr(400, 10025, "invalid JSON: %v", err) }
func errStreamNotFound() *APIError       { return apiErr(404, 10059, "stream not found") }
func errConsumerNotFound() *APIError     { return apiErr(404, 10014, "consumer not found") }
func errStreamNameExist() *APIError {
	return apiErr(400, 10058, "stream name already in use with a different configuration")
}
func errStreamMismatch() *APIError {
	return apiErr(400, 10056, "stream name in subject does not match request")
}
func errSubjectOverlap() *APIError {
	return apiErr(400, 10065, "subjects overlap with an existing stream")
}
func errNoMessage() *APIError { return apiErr(404, 10037, "no message found") }
func errStreamConfig(format string, args ...any) *APIError {
	return apiErr(500, 10052, format, args...)
}
func errStreamCreate(err error) *APIError   { return apiErr(500, 10049, "%v", err) }
func errConsumerCreate(err error) *APIError { return apiErr(500, 10012, "%v", err) }
func errConsumerPolicy(format string, args ...any) *APIError {
	return apiErr(400, 10094, format, args...)
}
func errConsumerExists() *APIError { return apiErr(400, 10148, "consumer already exists") }
func errConsumerNameExist() *APIError {
	return apiErr(400, 10013, "consumer name already in use")
}
func errConsumerDoesNotExist() *APIError { return apiErr(400, 10149, "consumer does not exist") }
func errReplicas() *APIError {
	return apiErr(500, 10074, "replicas > 1 not supported in non-clustered mode")
}
func errDurableNameMismatch() *APIError {
	return apiErr(400, 10132, "Consumer Durable and Name have to be equal if both are provided")
}
func errFilterMismatch() *APIError {
	return apiErr(400, 10131, "Consumer create request did not match filtered subject from create subject")
}

// errDenied is JetStream's answer to a request the identity may not make
// (nats-server answers with a permissions violation; the JSON says so at
// once instead of a timeout).
func errDenied(what string) *APIError { return apiErr(403, 10003, "permission denied: %s", what) }

// errNotSupported refuses what Fibril does not serve (SPEC.md 16.2), with
// the error code of the request family so clients show it as a failure.
func errNotSupported(errCode uint16, what string) *APIError {
	return apiErr(400, errCode, "not supported by Fibril: %s", what)
}

// errInternal wraps an engine error.
func errInternal(err error) *APIError { return apiErr(500, 10003, "%v", err) }
