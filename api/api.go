// Package api holds the contract of the server's HTTP inventory API: the
// OpenAPI 3 document api/openapi.yaml, served at /api/v1/openapi.yaml.
package api

import _ "embed"

// OpenAPI is api/openapi.yaml.
//
//go:embed openapi.yaml
var OpenAPI []byte
