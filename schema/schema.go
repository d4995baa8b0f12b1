// Package schema holds Cohort's versioned SQL migrations. A migration is never edited once shipped:
// add a new file with the next number instead. `cohort migrate` applies them (internal/store).
package schema

import "embed"

// Postgres holds the metadata-store migrations, applied in lexical order of their file names.
//
//go:embed postgres/*.sql
var Postgres embed.FS

// PostgresDir is the directory inside Postgres that holds the files.
const PostgresDir = "postgres"
