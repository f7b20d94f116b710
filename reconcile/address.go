package reconcile

import (
	"fmt"
	"strings"
)

// ResourceType is the first part of a resource address.
type ResourceType string

// The resource types. Infrastructure (queues, tables) lives in the backend;
// the rest lives in the runtime document of the backend's state store.
const (
	TypeTable       ResourceType = "table"
	TypeQueue       ResourceType = "queue"
	TypeRunnerClass ResourceType = "runner_class"
	TypeBudget      ResourceType = "budget"
	TypeVMCeiling   ResourceType = "vm_ceiling"
	TypePool        ResourceType = "pool"
	TypePriority    ResourceType = "priority"
)

// resourceTypes in dependency order: tables before queues before the
// runtime resources that refer to them.
var resourceTypes = []ResourceType{TypeTable, TypeQueue, TypeRunnerClass, TypeBudget, TypeVMCeiling, TypePool, TypePriority}

func (t ResourceType) rank() int {
	for i, rt := range resourceTypes {
		if rt == t {
			return i
		}
	}
	return len(resourceTypes)
}

// Address names one resource: "queue.medium", "pool.default_pool".
type Address struct {
	Type ResourceType
	Name string
}

func (a Address) String() string { return string(a.Type) + "." + a.Name }

// Less orders addresses by type (dependency order) and then by name.
func (a Address) Less(b Address) bool {
	if a.Type != b.Type {
		return a.Type.rank() < b.Type.rank()
	}
	return a.Name < b.Name
}

// ParseAddress parses "TYPE.NAME".
func ParseAddress(s string) (Address, error) {
	typ, name, ok := strings.Cut(s, ".")
	if !ok || name == "" {
		return Address{}, fmt.Errorf("invalid resource address %q: want TYPE.NAME, e.g. pool.default_pool or queue.medium", s)
	}
	t := ResourceType(typ)
	if t.rank() == len(resourceTypes) {
		return Address{}, fmt.Errorf("invalid resource address %q: unknown type %q (known: table, queue, runner_class, budget, vm_ceiling, pool, priority)", s, typ)
	}
	return Address{Type: t, Name: name}, nil
}

// MarshalText writes the address as "TYPE.NAME".
func (a Address) MarshalText() ([]byte, error) { return []byte(a.String()), nil }

// UnmarshalText reads "TYPE.NAME".
func (a *Address) UnmarshalText(b []byte) error {
	p, err := ParseAddress(string(b))
	if err != nil {
		return err
	}
	*a = p
	return nil
}
