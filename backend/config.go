package backend

// Config names a stack's backend: the rpd block's backend "TYPE" { … }
// block, as a saved plan keeps it so that applying the plan opens the same
// backend. Its zero value is the local backend at DefaultLocalPath.
type Config struct {
	Type        string `json:"type"`                   // "local" or "aws"; "" means "local"
	Path        string `json:"path,omitempty"`         // local: the SQLite file
	Region      string `json:"region,omitempty"`       // aws: "" means the SDK's configuration chain
	Profile     string `json:"profile,omitempty"`      // aws: "" means the chain's
	TablePrefix string `json:"table_prefix,omitempty"` // aws: "" means DefaultTablePrefix(stack)
	// NormalPrioritySync (local) keeps the thread of the grant journal's
	// synced appends in the normal scheduling class (realtime_sync = false).
	NormalPrioritySync bool `json:"normal_priority_sync,omitempty"`
}

// Backend defaults. These are the only place they are written; spec
// documents the same values, and spec/limits_test.go keeps the two equal.
const (
	DefaultType      = "local"
	DefaultLocalPath = ".rpd/state.db"
	// defaultTablePrefixOf + stack is an aws stack's default table prefix.
	defaultTablePrefixOf = "rpd-"
)

// DefaultTablePrefix is the table prefix of an aws stack that names none:
// "rpd-<stack>", so that two stacks in one account keep apart.
func DefaultTablePrefix(stack string) string { return defaultTablePrefixOf + stack }

// WithDefaults returns c with every unset field that has a default filled
// in for stack: the type, the local path, the aws table prefix. Region and
// profile have none: the AWS SDK's configuration chain decides them.
func (c Config) WithDefaults(stack string) Config {
	if c.Type == "" {
		c.Type = DefaultType
	}
	switch c.Type {
	case "local":
		if c.Path == "" {
			c.Path = DefaultLocalPath
		}
	case "aws":
		if c.TablePrefix == "" {
			c.TablePrefix = DefaultTablePrefix(stack)
		}
	}
	return c
}
