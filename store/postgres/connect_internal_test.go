package postgres

import (
	"errors"
	"testing"
)

func TestQuietTLS(t *testing.T) {
	t.Parallel()
	header := "failed to connect to `user=no8s database=no8s`:"
	refused := "\t127.0.0.1:5439 (localhost): tls error: server refused TLS connection"
	auth := "\t127.0.0.1:5439 (localhost): failed SASL auth: FATAL: password authentication failed for user \"no8s\" (SQLSTATE 28P01)"
	tests := []struct{ name, in, want string }{
		{"the refusal before the real error goes", header + "\n" + refused + "\n" + auth, header + "\n" + auth},
		{"a refusal alone stays", header + "\n" + refused, header + "\n" + refused},
		{"other errors stay", header + "\n" + auth, header + "\n" + auth},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			inner := errors.New(tc.in)
			err := quietTLS{inner}
			if err.Error() != tc.want {
				t.Errorf("got  %q\nwant %q", err.Error(), tc.want)
			}
			if !errors.Is(err, inner) {
				t.Error("the original error is lost")
			}
		})
	}
}
