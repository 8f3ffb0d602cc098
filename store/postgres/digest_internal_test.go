package postgres

import (
	"encoding/binary"
	"testing"
	"unsafe"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/no8s/no8s-agent/store"
)

// TestDigestDecoderFormats decodes the same row sent in text and in binary
// format: which one the server sends depends on how the query was
// prepared, and both must give the same digest.
func TestDigestDecoderFormats(t *testing.T) {
	t.Parallel()
	int8Bin := func(v int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(v)) }
	fields := func(format int16) []pgconn.FieldDescription {
		fs := make([]pgconn.FieldDescription, 11)
		for i := range fs {
			fs[i].Format = format
		}
		return fs
	}
	want := store.ResourceDigest{ID: 1 << 40, Kind: "Widget", Namespace: "team-a", Name: "a", SpecHash: "s", Action: "make",
		MetaHash: "m", Generation: 7, Deleting: true, Path: "w/a.yaml"}
	tests := []struct {
		name    string
		fields  []pgconn.FieldDescription
		vals    [][]byte
		want    store.ResourceDigest
		wantErr bool
	}{
		{"text", fields(pgx.TextFormatCode), [][]byte{[]byte("1099511627776"), []byte("Widget"), []byte("a"), []byte("s"),
			[]byte("make"), []byte("m"), []byte("7"), []byte("t"), nil, []byte("w/a.yaml"), []byte("team-a")}, want, false},
		{"binary", fields(pgx.BinaryFormatCode), [][]byte{int8Bin(1 << 40), []byte("Widget"), []byte("a"), []byte("s"),
			[]byte("make"), []byte("m"), int8Bin(7), {1}, nil, []byte("w/a.yaml"), []byte("team-a")}, want, false},
		{"prune disabled", fields(pgx.BinaryFormatCode), [][]byte{int8Bin(1), []byte("Widget"), []byte("a"), []byte("s"),
			[]byte(""), []byte("m"), int8Bin(1), {0}, {1}, []byte(""), []byte("")},
			store.ResourceDigest{ID: 1, Kind: "Widget", Name: "a", SpecHash: "s", MetaHash: "m", Generation: 1, PruneDisabled: true}, false},
		{"short binary id", fields(pgx.BinaryFormatCode), [][]byte{{1, 2}, nil, nil, nil, nil, nil, int8Bin(1), {0}, nil, nil, nil}, store.ResourceDigest{}, true},
		{"null generation", fields(pgx.TextFormatCode), [][]byte{[]byte("1"), nil, nil, nil, nil, nil, nil, nil, nil, nil, nil}, store.ResourceDigest{}, true},
		{"bad text id", fields(pgx.TextFormatCode), [][]byte{[]byte("x"), nil, nil, nil, nil, nil, []byte("1"), nil, nil, nil, nil}, store.ResourceDigest{}, true},
		{"missing column", fields(pgx.TextFormatCode)[:10], make([][]byte, 10), store.ResourceDigest{}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var dec digestDecoder
			got, err := dec.decode(tc.fields, tc.vals)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if !tc.wantErr && got != tc.want {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

// TestDigestDecoderSharesKinds checks that rows of one kind share its string
// rather than each holding a copy.
func TestDigestDecoderSharesKinds(t *testing.T) {
	t.Parallel()
	var dec digestDecoder
	a, b := dec.share([]byte("Widget")), dec.share([]byte("Widget"))
	if a != "Widget" || b != "Widget" || unsafe.StringData(a) != unsafe.StringData(b) || len(dec.shared) != 1 {
		t.Fatalf("share: %q %q, %d shared", a, b, len(dec.shared))
	}
}
