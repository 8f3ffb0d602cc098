package api

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"net/http"
	"slices"

	"github.com/no8s/no8s-agent/store"
)

// A list's continue cursor is opaque to clients: a version byte, the last
// id of the page, a fingerprint of the list's filters and a check over
// both, in URL-safe base64. The page after it starts after that id (the
// list is in id order, over the primary key), so resources created or
// removed between pages neither repeat nor shift the others. The check
// catches a cursor that was cut or altered; the fingerprint, one reused
// with other filters, whose position would mean nothing.
const (
	cursorVersion = 1
	cursorLen     = 1 + 8 + 8 + 4
)

// errBadCursor is the answer to a cursor this agent did not issue.
var errBadCursor = errorf(http.StatusBadRequest,
	"continue: not a cursor this agent issued: pass the X-Continue header (or the Link) of the previous page back unchanged")

// filterFingerprint identifies the filters of a list, not its position.
func filterFingerprint(f store.ResourceFilter) [8]byte {
	h := sha256.New()
	for _, v := range []string{f.Kind, f.Source, string(f.Phase), f.Action} {
		h.Write([]byte(v))
		h.Write([]byte{0})
	}
	if f.Namespaces != nil {
		// Only then: the cursors of lists without one stay as they were.
		h.Write([]byte("\x01namespaces"))
		for _, ns := range f.Namespaces {
			h.Write([]byte(ns))
			h.Write([]byte{0})
		}
	}
	keys := make([]string, 0, len(f.Labels))
	for k := range f.Labels {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		h.Write([]byte(k))
		h.Write([]byte{'='})
		h.Write([]byte(f.Labels[k]))
		h.Write([]byte{0})
	}
	var out [8]byte
	copy(out[:], h.Sum(nil))
	return out
}

func cursorCheck(payload []byte) []byte {
	sum := sha256.Sum256(append([]byte("no8s list cursor\x00"), payload...))
	return sum[:4]
}

// encodeCursor returns the cursor of the page after lastID.
func encodeCursor(f store.ResourceFilter, lastID int64) string {
	b := make([]byte, 0, cursorLen)
	b = append(b, cursorVersion)
	b = binary.BigEndian.AppendUint64(b, uint64(lastID))
	fp := filterFingerprint(f)
	b = append(b, fp[:]...)
	b = append(b, cursorCheck(b)...)
	return base64.RawURLEncoding.EncodeToString(b)
}

// decodeCursor returns the last id a cursor of a list with f's filters
// names, or a 400.
func decodeCursor(f store.ResourceFilter, token string) (int64, error) {
	b, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil || len(b) != cursorLen || b[0] != cursorVersion {
		return 0, errBadCursor
	}
	if check := cursorCheck(b[:cursorLen-4]); string(check) != string(b[cursorLen-4:]) {
		return 0, errBadCursor
	}
	if fp := filterFingerprint(f); string(fp[:]) != string(b[9:17]) {
		return 0, errorf(http.StatusBadRequest,
			"continue: the cursor belongs to a list with other filters: keep kind, namespace, source, status and label as they were for the first page")
	}
	id := binary.BigEndian.Uint64(b[1:9])
	if id == 0 || id > 1<<63-1 {
		return 0, errBadCursor
	}
	return int64(id), nil
}
