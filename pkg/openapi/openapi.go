// Package openapi embeds the merged OpenAPI (Swagger 2.0) document generated from the
// contracts and their REST mapping, served by the gateway at /openapi.json.
package openapi

import _ "embed"

// Spec is the merged OpenAPI document of every public RPC.
//
//go:embed spec/thefold.swagger.json
var Spec []byte
