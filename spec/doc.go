// Package spec is rpd's configuration language: it loads every *.hcl file of
// a directory (or one file), resolves input variables and locals, applies
// defaults, validates everything and returns a typed, immutable Config.
//
// Loading never stops at the first problem: every error and warning comes
// back as hcl.Diagnostics, each with the file, line and column it concerns,
// so the CLI can print them with source snippets (Loader.Files returns the
// sources for hcl.NewDiagnosticTextWriter) and the daemon can log them.
//
// What it is not: spec knows nothing of backends, queues or the runtime
// components; it does not read the process environment (callers pass it in
// Vars) and it does not plan or apply.
//
// Start reading at Load and Loader.LoadSources (load.go), which describe the
// phases; decode.go holds the schema of every block and its defaults;
// units.go parses sizes and durations. The language reference for users is
// docs/language.md.
package spec
