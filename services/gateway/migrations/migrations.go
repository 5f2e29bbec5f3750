// Package migrations holds the gateway schema's goose migrations, embedded so the binary and
// the tests migrate from the same files.
package migrations

import "embed"

// FS holds the SQL files at its root, as db.Migrate expects.
//
//go:embed *.sql
var FS embed.FS
