package manifest

import (
	"bytes"
	"testing"
)

// FuzzDecodeFile feeds arbitrary bytes to the decoder. Whatever it accepts
// must survive a round trip: the canonical JSON of each document, decoded
// again, gives the same canonical JSON. What the fast path accepts, yaml.v3
// must decode alike. The seed corpus lives in testdata/fuzz/FuzzDecodeFile.
func FuzzDecodeFile(f *testing.F) {
	f.Add([]byte("apiVersion: v1\nkind: K\nmetadata: {name: a}\n"))
	f.Add([]byte("a: &a [1, 2]\nb: [*a, *a]\n<<: {c: 1}\n"))
	f.Add([]byte("---\n---\n"))
	f.Add([]byte("a:\n- x\n- {b: 'c''d', e: [1, \"2\"]}\nf: -1 # c\n"))
	f.Add([]byte("{\"a\": [1.5, null, true],\n \"b\": {}}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		checkFastDecode(t, data)
		docs, problems := DecodeFile("fuzz.yaml", data, DecodeOptions{})
		for _, p := range problems {
			if p.File != "fuzz.yaml" || p.Message == "" {
				t.Fatalf("problem without file or message: %+v", p)
			}
		}
		for _, d := range docs {
			if d.Object == nil || d.Line < 1 {
				t.Fatalf("document %d without object or line", d.Index)
			}
			canonical, err := CanonicalJSON(d.Object)
			if err != nil {
				t.Fatalf("decoded value has no canonical JSON: %v", err)
			}
			again, ps := DecodeFile("again.json", canonical, DecodeOptions{})
			if len(ps) > 0 || len(again) != 1 {
				t.Fatalf("canonical JSON %s does not decode: %v", canonical, ps)
			}
			second, err := CanonicalJSON(again[0].Object)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(canonical, second) {
				t.Fatalf("round trip changed the document:\n%s\n%s", canonical, second)
			}
			// Line lookups must never panic, whatever the pointer.
			d.LineOf("/a/0/~1/~0/b")
		}
	})
}

// FuzzFastDecode checks the fast decoder against yaml.v3 on arbitrary
// bytes: it may decline anything, but what it accepts it must decode
// exactly as yaml.v3 does. The seeds are the differential table's cases.
func FuzzFastDecode(f *testing.F) {
	for _, tc := range fastDecodeCases {
		f.Add([]byte(tc.in))
	}
	for n := range 3 {
		f.Add([]byte(benchResourceDoc(n)))
	}
	f.Add([]byte(benchTypeDoc(1)))
	f.Fuzz(func(t *testing.T, data []byte) {
		checkFastDecode(t, data)
	})
}
