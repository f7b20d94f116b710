// Package layers holds TestImportRules, the one table of which package of
// the module may import which (and which third-party modules), checked on
// every non-test source file. A new package, or a new import across
// packages, is a change to that table: the place to see and review the
// architecture's dependency direction (README, "Layout").
package layers
