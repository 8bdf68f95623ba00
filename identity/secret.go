package identity

import (
	"fmt"
	"log/slog"
)

// redacted is how a Secret shows wherever it is printed.
const redacted = "[redacted]"

// Secret is a credential (an access token) that no log line, error or
// status page may show: every way Go prints a value (fmt's verbs, JSON,
// text, slog) prints "[redacted]". Reveal is the one way to its value.
type Secret struct{ value string }

// NewSecret wraps value.
func NewSecret(value string) Secret { return Secret{value: value} }

// Reveal returns the credential itself, for the one request that sends it.
func (s Secret) Reveal() string { return s.value }

// IsZero reports whether s holds no credential.
func (s Secret) IsZero() bool { return s.value == "" }

// String implements fmt.Stringer.
func (s Secret) String() string { return redacted }

// GoString implements fmt.GoStringer (%#v).
func (s Secret) GoString() string { return redacted }

// Format implements fmt.Formatter: every verb prints "[redacted]".
func (s Secret) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(redacted)) }

// MarshalJSON implements json.Marshaler.
func (s Secret) MarshalJSON() ([]byte, error) { return []byte(`"` + redacted + `"`), nil }

// MarshalText implements encoding.TextMarshaler.
func (s Secret) MarshalText() ([]byte, error) { return []byte(redacted), nil }

// LogValue implements slog.LogValuer.
func (s Secret) LogValue() slog.Value { return slog.StringValue(redacted) }
