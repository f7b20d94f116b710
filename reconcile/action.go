package reconcile

// Action is what a planned change does to one resource. The rune is the
// symbol the human view prints in front of the resource.
type Action rune

const (
	NoOp             Action = 0
	Create           Action = '+'
	Update           Action = '~'
	DeleteThenCreate Action = '∓' // a replacement: rendered as "-/+"
	Delete           Action = '-'
)

// String is the action's name as it appears in the JSON plan's
// "actions" list (joined with "," for a replacement).
func (a Action) String() string {
	switch a {
	case NoOp:
		return "no-op"
	case Create:
		return "create"
	case Update:
		return "update"
	case DeleteThenCreate:
		return "delete,create"
	case Delete:
		return "delete"
	}
	return "unknown"
}

// Actions lists the action in Terraform's JSON form: ["create"],
// ["delete","create"], ["no-op"]….
func (a Action) Actions() []string {
	switch a {
	case DeleteThenCreate:
		return []string{"delete", "create"}
	default:
		return []string{a.String()}
	}
}

// Symbol is the marker the human view prints: "+", "~", "-", "-/+", or
// " " for no-op.
func (a Action) Symbol() string {
	switch a {
	case NoOp:
		return " "
	case DeleteThenCreate:
		return "-/+"
	}
	return string(rune(a))
}

// IsDestructive reports whether the action removes a live object.
func (a Action) IsDestructive() bool { return a == Delete || a == DeleteThenCreate }

// actionFromStrings is the inverse of Actions, for reading saved plans.
func actionFromStrings(s []string) (Action, bool) {
	switch {
	case len(s) == 1 && s[0] == "no-op":
		return NoOp, true
	case len(s) == 1 && s[0] == "create":
		return Create, true
	case len(s) == 1 && s[0] == "update":
		return Update, true
	case len(s) == 1 && s[0] == "delete":
		return Delete, true
	case len(s) == 2 && s[0] == "delete" && s[1] == "create":
		return DeleteThenCreate, true
	}
	return NoOp, false
}
