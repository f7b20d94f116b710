package aws

import (
	"context"
	"errors"
	"fmt"

	"github.com/rpdhq/rpd/backend"
)

var _ backend.TableAdmin = (*Backend)(nil)

// Tables reports the stack's tables as reconcile plans them (table.<role>).
// A table that exists with a foreign key schema is listed and reported in
// the joined error, so a plan names it instead of adopting it.
func (b *Backend) Tables(ctx context.Context) ([]backend.TableInfo, error) {
	infos, err := b.TableStatus(ctx)
	if err != nil {
		return nil, err
	}
	var errs []error
	out := make([]backend.TableInfo, 0, len(infos))
	for _, i := range infos {
		if i.Problem != "" {
			errs = append(errs, fmt.Errorf("dynamodb table %s: %s", i.Name, i.Problem))
		}
		out = append(out, backend.TableInfo{Resource: i.Role, Name: i.Name, Exists: i.Exists})
	}
	return out, errors.Join(errs...)
}
