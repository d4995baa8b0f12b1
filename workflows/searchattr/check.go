package searchattr

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
)

// Runbook is where an operator reads how to register the attributes.
const Runbook = "deploy/runbooks/temporal-setup.md"

// MissingError says which of Cohort's search attributes a namespace lacks (or has with another
// type) and the command that registers them. Every workflow start fails until they exist.
type MissingError struct {
	Namespace string
	Names     []string
}

func (e *MissingError) Error() string {
	return fmt.Sprintf("temporal namespace %q lacks Cohort's search attribute(s) %s, so every workflow start fails: %s",
		e.Namespace, strings.Join(e.Names, ", "), e.Hint())
}

// Hint is the operator's next step: the command that registers what is missing (safe to show in
// a readiness answer: it names no secret).
func (e *MissingError) Hint() string {
	var b strings.Builder
	b.WriteString("run")
	for i, n := range e.Names {
		if i > 0 {
			b.WriteString(" and")
		}
		fmt.Fprintf(&b, " `temporal operator search-attribute create --namespace %s --name %s --type %s`", e.Namespace, n, typeName(n))
	}
	b.WriteString(" (Temporal Cloud: tcld namespace search-attributes add; see " + Runbook + ")")
	return b.String()
}

// typeName is the CLI's name of the attribute's type.
func typeName(name string) string {
	t := Types()[name].String() // INDEXED_VALUE_TYPE_INT
	t = strings.TrimPrefix(t, "INDEXED_VALUE_TYPE_")
	if t == "" {
		return "Int"
	}
	return t[:1] + strings.ToLower(t[1:])
}

// Check asks Temporal for the namespace's custom search attributes and returns a *MissingError
// when one of Cohort's is absent or of another type. A server that does not let the client list
// them (Temporal Cloud API keys without the operator role answer PermissionDenied) is not an
// error: ErrUnchecked says so, for a warning.
func Check(ctx context.Context, c client.Client, namespace string) error {
	resp, err := c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: namespace})
	if err != nil {
		var denied *serviceerror.PermissionDenied
		var unimplemented *serviceerror.Unimplemented
		if errors.As(err, &denied) || errors.As(err, &unimplemented) {
			return fmt.Errorf("%w: %w", ErrUnchecked, err)
		}
		return fmt.Errorf("list the search attributes of namespace %q: %w", namespace, err)
	}
	have := resp.GetCustomAttributes()
	var missing []string
	for name, typ := range Types() {
		if got, ok := have[name]; !ok || got != typ {
			missing = append(missing, name)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	slices.Sort(missing)
	return &MissingError{Namespace: namespace, Names: missing}
}

// ErrUnchecked: the server would not list the namespace's search attributes.
var ErrUnchecked = errors.New("cannot check the search attributes")
